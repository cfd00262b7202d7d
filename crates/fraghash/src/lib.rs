//! Fragment hashing: which fragment (partition) of a table holds each key,
//! and exactly which keys move when a fragment is added or removed.
//!
//! This is the core of fraghash, with no I/O. It models Mnesia's
//! `mnesia_frag_hash` behaviour as one trait, [`FragmentScheme`], and offers
//! four interchangeable schemes:
//!
//! | scheme | lookup | an add scans | removes | balance |
//! |---|---|---|---|---|
//! | [`linear`](scheme::linear) | O(1) | one fragment | last only | uneven: up to 2× |
//! | [`ring`](scheme::ring) | O(1) expected | exactly the arcs taken | any | stddev ≈ mean/√P |
//! | [`jump`](scheme::jump) | O(1) expected | every fragment | last only | sampling floor |
//! | [`slots`](scheme::slots) (default) | O(1) | exactly the slots taken | any | sampling floor |
//!
//! Every scheme places a key by its hash `h = key_hash(key)` alone. Every
//! add or remove returns a [`MigrationPlan`] saying which keys move.
//!
//! # Example
//!
//! ```
//! use fraghash::{key_hash, AnyScheme, FragmentScheme};
//!
//! // 50 fragments with the default scheme.
//! let mut scheme = AnyScheme::new("slots", 50)?;
//! let h = key_hash(b"user:42");
//! let before = scheme.locate(h);
//!
//! // Grow to 51: only slots taken by the new fragment move, as hash ranges.
//! let plan = scheme.add_fragment()?;
//! assert_eq!(scheme.fragments(), 51);
//! assert!(plan.is_range_plan());
//! let after = scheme.locate(h);
//! assert!(after == before || after == 50);
//! // The plan alone says where the key is now, and whether it moved.
//! assert_eq!(plan.destination(h, before), Some(after));
//! assert_eq!(plan.covers(h, before), after != before);
//!
//! // Remove fragment 7: its keys move, and fragment 50 takes id 7. Ids
//! // change, so compare through `destination`, not `after != before`.
//! let plan = scheme.remove_fragment(7)?;
//! assert_eq!(plan.destination(h, after), Some(scheme.locate(h)));
//!
//! // The state is plain bytes: another process places keys identically.
//! let copy = AnyScheme::from_state_bytes(&scheme.to_state_bytes())?;
//! assert_eq!(copy.locate(h), scheme.locate(h));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `examples/apply_plans.rs` applies plans of every kind to a store of its
//! own (a `HashMap` per fragment).
//!
//! # The contract of a plan
//!
//! Moves name fragments in the numbering *before* the operation.
//!
//! - **Range plans** (`ring`, `slots`, and every `slots` split, weight
//!   change and rebalance) list hash ranges per (source, destination):
//!   [`MigrationPlan::covers`]`(h, old)` is true **if and only if** the key
//!   changes fragment, so a store keyed by hash reads exactly the keys that
//!   move.
//! - **Filter plans** (`linear`, `jump`) name the fragments that can lose
//!   keys: `covers(h, old)` is true for **every** key of a filtered
//!   fragment, a superset of the keys that move, and no key of another
//!   fragment moves. A store scans the filtered fragments and moves each
//!   key whose fragment changed under the new scheme.
//! - **Renumbering**: removing a fragment other than the last gives the
//!   last fragment its id ([`MigrationPlan::renumber`]), so ids stay
//!   `0..N`. [`MigrationPlan::destination`]`(h, old)` gives a key's fragment
//!   after the operation in the new numbering: always for range plans
//!   (`new.locate(h) == destination(h, old.locate(h))`), and outside the
//!   filtered fragments for filter plans (inside them it is `None`: the new
//!   scheme's `locate` decides).
//!
//! Property tests check each of these over random schemes, operations and
//! keys (`tests/invariants.rs`, `tests/destination.rs`).
//!
//! # Limits
//!
//! - Fragment ids are `u32`; each scheme has a maximum fragment count
//!   ([`SchemeSpec::max_fragments`]): `slots` 262,144; `ring` 2^24 points in
//!   all; `linear` 2^31; `jump` 2^20 (its add plan names every fragment).
//! - The state format is versioned ([`state::FORMAT_VERSION`]) and ends
//!   with a checksum, so damaged bytes give an error, not another
//!   placement; decoding never panics on arbitrary bytes.

#![warn(missing_docs)]

mod any;
pub mod error;
pub mod guard;
mod hash;
pub mod keys;
pub mod plan;
pub mod scheme;
pub mod state;
pub mod stats;

pub use any::{AnyScheme, SchemeSpec};
pub use error::{SchemeError, SpecError, StateError};
pub use hash::{key_hash, widen_phash2};
pub use plan::{HashRange, MigrationPlan, Move, PlanKind, Renumber};
pub use scheme::FragmentScheme;
pub use stats::Stats;

/// Any error of this crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A bad spec string.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A refused operation.
    #[error(transparent)]
    Scheme(#[from] SchemeError),
    /// Undecodable state bytes.
    #[error(transparent)]
    State(#[from] StateError),
}

/// The README's Rust example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
