//! Erlang NIF for the fraghash Mnesia adapter: module `fraghash_nif`.
//!
//! The Erlang hash modules (`mnesia_frag_slots`, `mnesia_frag_chash`,
//! `mnesia_frag_jump`, `mnesia_frag_linear`) keep a scheme's state in
//! Mnesia's `hash_state` as plain data: a short recipe ([`recipe`]: the new
//! table it started as, then its `add_frag`s and `del_frag`s) and a 16-byte
//! digest of it. This library maps key hashes to fragments with the core
//! crate's code, finding the built scheme by digest in a bounded cache
//! ([`cache`]), so a lookup costs the same at any fragment count.
//!
//! Functions (all fragment numbers are Mnesia's, 1-based):
//!
//! | function | scheduler | returns |
//! |---|---|---|
//! | `fresh_state(Spec, N, Weights)` | normal, O(N) | `{Digest, Recipe}` of a new table, built on first use |
//! | `locate(Digest, H)` | normal, O(1) | fragment, or `miss` when not cached |
//! | `load_locate(Digest, Recipe, H)` | dirty CPU | fragment (builds the scheme on a miss) |
//! | `add_frag(Digest, Recipe, Weight, MaxDonors)` | dirty CPU | `{Digest, Recipe, IterFrags, LockFrags}` |
//! | `split_frag(Digest, Recipe, Fragment)` | dirty CPU | as `add_frag`, the new fragment taking half of `Fragment`'s slots (`slots` only) |
//! | `del_frag(Digest, Recipe)` | dirty CPU | `{Digest, Recipe, IterFrags, LockFrags}` |
//! | `info(Digest, Recipe)` | dirty CPU | a map |
//! | `cache_stats()` | normal | `{Entries, Bytes}` |
//! | `set_built_dir(Dir)` | normal | `ok`; `Dir` a binary path, or `undefined` (see [`built`]) |
//! | `digest(Bytes)` | dirty CPU | the 16-byte digest of a recipe |
//! | `lookup_table(Digest, Recipe)` | dirty CPU | the lookup Erlang publishes for a `ring` state ([`lookup`]), or `none` |
//! | `inline_table(Digest, Recipe)` | dirty CPU | the lookup a `slots` or `linear` state carries itself, or `none` |
//!
//! `H` is `erlang:phash2(Key, 1 bsl 32)`, widened with
//! [`fraghash::widen_phash2`]. Errors raise `{fraghash, Reason, Message}`
//! (`Reason` one of `corrupt_state`, `digest_mismatch`, `bad_spec`,
//! `refused`, `too_many_fragments`; `Message` a binary); bad argument types raise `badarg`. No call
//! can bring the VM down: the core never panics on bad bytes, and rustler
//! turns any panic into an Erlang exception.

pub mod built;
pub mod cache;
pub mod lookup;
pub mod lookup_slot_words;
pub mod lookup_words;
pub mod mnesia;
pub mod ranges;
pub mod recipe;
pub mod runs;
pub mod schemes;

// The NIF entry points reference `enif_*` symbols that only the VM provides,
// so they are left out of the unit-test binary and of the examples (which
// would not link): see the `nif` feature.
#[cfg(all(feature = "nif", not(test)))]
mod nif;

#[cfg(all(feature = "nif", feature = "tools"))]
compile_error!(
    "features `nif` and `tools` exclude each other: use --no-default-features --features tools"
);
