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
//! add or remove returns a [`MigrationPlan`] that covers a key if and only if
//! the key changes fragment.
//!
//! # Example
//!
//! ```
//! use fraghash::{key_hash, AnyScheme, FragmentScheme, Move};
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
//! assert_eq!(plan.covers(h, before), after != before);
//!
//! // The state is plain bytes: another process places keys identically.
//! let copy = AnyScheme::from_state_bytes(&scheme.to_state_bytes())?;
//! assert_eq!(copy.locate(h), after);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Limits
//!
//! - Fragment ids are `u32`; each scheme has a maximum fragment count
//!   ([`SchemeSpec::max_fragments`]): `slots` 262,144; `ring` 2^24 points in
//!   all; `linear` 2^31; `jump` 2^20 (its add plan names every fragment).
//! - The state format is versioned ([`state::FORMAT_VERSION`]); decoding
//!   never panics on arbitrary bytes.

#![warn(missing_docs)]

mod any;
pub mod error;
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
