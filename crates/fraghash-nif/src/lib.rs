//! Erlang NIF for the fraghash Mnesia adapter: module `fraghash_nif`.
//!
//! The Erlang hash modules (`mnesia_frag_slots`, `mnesia_frag_chash`,
//! `mnesia_frag_jump`, `mnesia_frag_linear`) keep a scheme's state in
//! Mnesia's `hash_state` as plain data: the state bytes of the core crate as
//! one binary, and a 16-byte digest of them. This library maps key hashes to
//! fragments with the core crate's code, finding the decoded scheme by digest
//! in a bounded cache ([`cache`]), so a lookup costs the same at any fragment
//! count and never touches the big binary.
//!
//! Functions (all fragment numbers are Mnesia's, 1-based):
//!
//! | function | scheduler | returns |
//! |---|---|---|
//! | `new_state(Spec, N)` | dirty CPU | `{Digest, Bytes}` |
//! | `fresh_state(Spec, N, Weights)` | normal, O(N) | `{Digest, Bytes}` describing a new table, built on first use ([`fresh`]) |
//! | `locate(Digest, H)` | normal, O(1) | fragment, or `miss` when not cached |
//! | `load_locate(Digest, Bytes, H)` | dirty CPU | fragment (decodes on a miss) |
//! | `add_frag(Digest, Bytes, Weight, MaxDonors)` | dirty CPU | `{Digest, Bytes, IterFrags, LockFrags}` |
//! | `del_frag(Digest, Bytes)` | dirty CPU | `{Digest, Bytes, IterFrags, LockFrags}` |
//! | `set_weight(Digest, Bytes, Frag, Weight)` | dirty CPU | `{Digest, Bytes, IterFrags, LockFrags}` |
//! | `info(Digest, Bytes)` | dirty CPU | a map |
//! | `cache_stats()` | normal | `{Entries, Bytes}` |
//! | `digest(Bytes)` | dirty CPU | the 16-byte digest of state bytes |
//!
//! `H` is `erlang:phash2(Key, 1 bsl 32)`, widened with
//! [`fraghash::widen_phash2`]. Errors raise `{fraghash, Reason, Message}`
//! (`Reason` one of `corrupt_state`, `digest_mismatch`, `bad_spec`,
//! `refused`; `Message` a binary); bad argument types raise `badarg`. No call
//! can bring the VM down: the core never panics on bad bytes, and rustler
//! turns any panic into an Erlang exception.

pub mod cache;
pub mod fresh;
pub mod mnesia;
pub mod runs;

// The NIF entry points reference `enif_*` symbols that only the VM provides,
// so they are left out of the unit-test binary (which would not link).
#[cfg(not(test))]
mod nif;
