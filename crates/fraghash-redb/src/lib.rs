//! Storage for a Mnesia backend on redb, without any Erlang VM code.
//!
//! Two parts:
//!
//! - [`term`]: Erlang terms in the external term format (the bytes of
//!   `term_to_binary/1`) decoded into a [`term::Term`], and turned into an
//!   **order key**: bytes whose `memcmp` order is Erlang's term order, with
//!   terms that compare equal (`==`, such as `1` and `1.0`) getting the same
//!   bytes. A table keyed by order keys iterates in the order of an ets
//!   `ordered_set`. [`term::reference_cmp`] is Erlang's term order written
//!   straight from the rules, which the tests hold the encoding to.
//! - [`db`]: one redb database file holding many named tables (one per
//!   Mnesia table), written in batches that span tables in one transaction,
//!   read by key and in chunks in either direction.
//!
//! ```
//! use fraghash_redb::term::{order_key, Term};
//!
//! let one = order_key(&Term::from(1).to_etf()).unwrap();
//! let one_float = order_key(&Term::Float(1.0).to_etf()).unwrap();
//! let atom = order_key(&Term::atom("a").to_etf()).unwrap();
//! assert_eq!(one, one_float); // 1 == 1.0
//! assert!(one < atom); // number < atom
//! ```

#![warn(missing_docs)]

pub mod db;
pub mod term;
