//! Order keys, and the prefixes of match patterns' keys
//! ([`fraghash_redb::term`]).

use fraghash_redb::term::{order_key, pattern_prefix_etf, TermError};
use rustler::{Binary, Env, Error, NifResult, Term};

use crate::{atoms, binary};

fn key_error(e: TermError) -> Error {
    let reason = match e {
        TermError::UnsupportedKey { .. } => atoms::unsupported_key(),
        TermError::KeyTooLarge { .. } => atoms::key_too_large(),
        TermError::TooDeep { .. } => atoms::too_deep(),
        _ => atoms::bad_term(),
    };
    Error::RaiseTerm(Box::new((atoms::fraghash_redb(), reason, e.to_string())))
}

/// The order key of a term given as `term_to_binary/1` bytes. Normal
/// scheduler: the Erlang wrapper sends only small terms here.
#[rustler::nif]
fn order_key_etf<'a>(env: Env<'a>, etf: Binary<'a>) -> NifResult<Term<'a>> {
    key_of(env, etf)
}

fn key_of<'a>(env: Env<'a>, etf: Binary<'a>) -> NifResult<Term<'a>> {
    let key = order_key(etf.as_slice()).map_err(key_error)?;
    Ok(binary(env, &key))
}

/// As `order_key_etf/1`, on a dirty CPU scheduler, for large terms.
#[rustler::nif(schedule = "DirtyCpu")]
fn order_key_etf_dirty<'a>(env: Env<'a>, etf: Binary<'a>) -> NifResult<Term<'a>> {
    key_of(env, etf)
}

/// The bytes that the order key of every term matching a match pattern
/// (`'_'` and `'$N'` open, see `fraghash_redb::term::pattern_prefix`)
/// starts with; the pattern given as `term_to_binary/1` bytes. Normal
/// scheduler: the Erlang wrapper sends only small patterns here (a dirty
/// scheduler costs a select's plan about 12 µs more per clause).
#[rustler::nif]
fn key_prefix_etf<'a>(env: Env<'a>, etf: Binary<'a>) -> NifResult<Term<'a>> {
    prefix_of(env, etf)
}

fn prefix_of<'a>(env: Env<'a>, etf: Binary<'a>) -> NifResult<Term<'a>> {
    let prefix = pattern_prefix_etf(etf.as_slice()).map_err(key_error)?;
    Ok(binary(env, &prefix))
}

/// As `key_prefix_etf/1`, on a dirty CPU scheduler, for large patterns.
#[rustler::nif(schedule = "DirtyCpu")]
fn key_prefix_etf_dirty<'a>(env: Env<'a>, etf: Binary<'a>) -> NifResult<Term<'a>> {
    prefix_of(env, etf)
}
