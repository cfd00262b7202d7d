//! The NIF entry points of module `fraghash_nif` (see the crate docs).

use std::sync::Arc;

use fraghash::{widen_phash2, FragmentScheme, SchemeSpec};
use rustler::{Binary, Encoder, Env, Error, NewBinary, NifResult, Term};

use crate::cache::{self, Entry, LookupError};
use crate::lookup::ErlangLookup;
use crate::mnesia::FragChange;
use crate::recipe::{self, Op, Recipe};

mod atoms {
    rustler::atoms! {
        fraghash,
        miss,
        corrupt_state,
        digest_mismatch,
        bad_spec,
        refused,
        spec,
        fragments,
        memory_bytes,
        slot_bits,
        slots_per_fragment,
        weights,
        none,
        too_many_fragments,
        words,
        slot_words,
        low_bits,
    }
}

fn raise(reason: rustler::Atom, msg: String) -> Error {
    Error::RaiseTerm(Box::new((atoms::fraghash(), reason, msg)))
}

fn lookup_error(e: LookupError) -> Error {
    let reason = match e {
        LookupError::DigestMismatch => atoms::digest_mismatch(),
        LookupError::BadDigest | LookupError::Corrupt(_) => atoms::corrupt_state(),
    };
    raise(reason, e.to_string())
}

fn refused(e: impl std::fmt::Display) -> Error {
    raise(atoms::refused(), e.to_string())
}

/// The cached entry for a state, building it from the recipe on a miss.
fn entry(digest: Binary, bytes: Term) -> NifResult<Arc<Entry>> {
    let bin = bytes.decode::<Binary>().ok();
    cache::resolve(digest.as_slice(), || bin.as_ref().map(|b| b.as_slice())).map_err(lookup_error)
}

fn binary<'a>(env: Env<'a>, data: &[u8]) -> Term<'a> {
    NewBinary::from_slice(env, data).into()
}

/// A recipe for a new table: `Spec` is a core spec string (`slots`,
/// `ring:100`, `jump`, `linear`), `N` the fragment count, `Weights` `[]` or
/// one weight per fragment (slots only). Returns `{Digest, Recipe}`; the
/// scheme is built on first use. O(N).
#[rustler::nif]
fn fresh_state<'a>(
    env: Env<'a>,
    spec: Binary<'a>,
    n: u32,
    weights: Vec<u32>,
) -> NifResult<Term<'a>> {
    let spec = std::str::from_utf8(spec.as_slice())
        .map_err(|_| raise(atoms::bad_spec(), "spec is not UTF-8".into()))?;
    let bytes = Recipe::new(spec, n, &weights)
        .map_err(|e| raise(atoms::bad_spec(), e))?
        .encode();
    let d = recipe::digest(&bytes);
    Ok((binary(env, &d), binary(env, &bytes)).encode(env))
}

/// The fragment (1-based) of `erlang:phash2(Key, 1 bsl 32)`, or `miss` when
/// the state is not cached on this thread or globally (then call
/// `load_locate/3`, which runs on a dirty scheduler). Only `jump` lookups
/// call it per operation: the other schemes' lookups are read in Erlang.
#[rustler::nif]
fn locate<'a>(env: Env<'a>, digest: Binary<'a>, h32: u32) -> NifResult<Term<'a>> {
    match cache::locate(digest.as_slice(), widen_phash2(h32)).map_err(lookup_error)? {
        Some(f) => Ok((f + 1).encode(env)),
        None => Ok(atoms::miss().encode(env)),
    }
}

/// As `locate/2`, decoding and caching the state bytes on a miss.
#[rustler::nif(schedule = "DirtyCpu")]
fn load_locate<'a>(digest: Binary<'a>, bytes: Term<'a>, h32: u32) -> NifResult<u32> {
    Ok(entry(digest, bytes)?.locate(widen_phash2(h32)) + 1)
}

/// Adds a fragment (see [`crate::mnesia::add`]); `max_donors` 0 means no bound.
#[rustler::nif(schedule = "DirtyCpu")]
fn add_frag<'a>(
    env: Env<'a>,
    digest: Binary<'a>,
    bytes: Term<'a>,
    weight: u32,
    max_donors: u32,
) -> NifResult<Term<'a>> {
    change(
        env,
        digest,
        bytes,
        Op::Add {
            weight,
            donors: max_donors,
        },
    )
}

/// Adds a fragment that takes half of fragment `fragment`'s slots (1-based,
/// Mnesia's numbering; `slots` only; see [`crate::mnesia::split`]).
#[rustler::nif(schedule = "DirtyCpu")]
fn split_frag<'a>(
    env: Env<'a>,
    digest: Binary<'a>,
    bytes: Term<'a>,
    fragment: u32,
) -> NifResult<Term<'a>> {
    let fragment = fragment.checked_sub(1).ok_or(Error::BadArg)?;
    change(env, digest, bytes, Op::Split { fragment })
}

/// Removes the last fragment (see [`crate::mnesia::del_last`]).
#[rustler::nif(schedule = "DirtyCpu")]
fn del_frag<'a>(env: Env<'a>, digest: Binary<'a>, bytes: Term<'a>) -> NifResult<Term<'a>> {
    change(env, digest, bytes, Op::DelLast)
}

/// Applies `op` to the cached scheme and appends it to the recipe; returns
/// `{Digest, Recipe, IterFrags, LockFrags}` with the new scheme cached.
fn change<'a>(env: Env<'a>, digest: Binary<'a>, bytes: Term<'a>, op: Op) -> NifResult<Term<'a>> {
    // The recipe is extended below and the cached scheme changed alongside,
    // so the two must be the same state even on a cache hit.
    let mut recipe = checked_recipe(digest, bytes)?;
    let mut scheme = entry(digest, bytes)?.scheme.clone();
    let c: FragChange = recipe::apply(&mut scheme, op).map_err(refused)?;
    recipe.push(op);
    let (d, b, _) = cache::store(&recipe, scheme);
    Ok((binary(env, &d), binary(env, &b), c.iter, c.lock).encode(env))
}

/// The recipe `bytes`, checked to be the state `digest` names: for calls
/// that read the recipe itself, not only the scheme cached under the digest.
fn checked_recipe(digest: Binary, bytes: Term) -> NifResult<Recipe> {
    let bin: Binary = bytes.decode().map_err(|_| {
        raise(
            atoms::corrupt_state(),
            "state recipe is not a binary".into(),
        )
    })?;
    if recipe::digest(bin.as_slice()) != digest.as_slice() {
        return Err(lookup_error(LookupError::DigestMismatch));
    }
    Recipe::decode(bin.as_slice()).map_err(|e| lookup_error(LookupError::Corrupt(e)))
}

/// A description of a state: `#{spec, fragments, memory_bytes}` and, for
/// `slots`, `slot_bits`, `slots_per_fragment` and `weights`.
#[rustler::nif(schedule = "DirtyCpu")]
fn info<'a>(env: Env<'a>, digest: Binary<'a>, bytes: Term<'a>) -> NifResult<Term<'a>> {
    let e = entry(digest, bytes)?;
    let s = &e.scheme;
    let mut map = Term::map_new(env);
    let put = |m: Term<'a>, k: rustler::Atom, v: Term<'a>| m.map_put(k, v);
    map = put(map, atoms::spec(), binary(env, s.spec().as_bytes()))?;
    map = put(map, atoms::fragments(), s.fragments().encode(env))?;
    map = put(map, atoms::memory_bytes(), s.memory_bytes().encode(env))?;
    if let Some(sl) = s.as_slots() {
        map = put(map, atoms::slot_bits(), sl.slot_bits().encode(env))?;
        map = put(
            map,
            atoms::slots_per_fragment(),
            sl.slots_per_fragment().encode(env),
        )?;
        map = put(map, atoms::weights(), sl.weights().encode(env))?;
    }
    Ok(map)
}

/// The lookup Erlang publishes for this state ([`crate::lookup`]):
/// `{words, Shift, Binary}` for `ring` (see [`crate::lookup_words`]), `none`
/// for every other scheme (`jump` is answered by `locate/2`; `slots` and
/// `linear` states carry their lookup, see `inline_table/2`). Built once
/// per state and published by the caller.
#[rustler::nif(schedule = "DirtyCpu")]
fn lookup_table<'a>(env: Env<'a>, digest: Binary<'a>, bytes: Term<'a>) -> NifResult<Term<'a>> {
    // The ring's token bound comes from the recipe, which must then be the
    // state's own even when the scheme was found by digest alone.
    let recipe = checked_recipe(digest, bytes)?;
    if !matches!(recipe.spec(), SchemeSpec::Ring { .. }) {
        return Ok(atoms::none().encode(env));
    }
    let e = entry(digest, bytes)?;
    Ok(encode_lookup(
        env,
        ErlangLookup::build(&e.scheme, recipe.fragments_added()),
    ))
}

/// The lookup a hash state carries inside itself ([`crate::lookup`]):
/// `{slot_words, Params, Binary}` for `slots` (see
/// [`crate::lookup_slot_words`]; `Params` as
/// [`crate::lookup::SlotWordIndex::params`]), `{low_bits, Mask, Half, N}`
/// for `linear`, `none` for `ring` and `jump` (published instead, see
/// `lookup_table/2`; nothing is built for them). A `slots` table past
/// [`crate::lookup::MAX_SLOT_WORD_OWNER`] fragments raises
/// `too_many_fragments`.
#[rustler::nif(schedule = "DirtyCpu")]
fn inline_table<'a>(env: Env<'a>, digest: Binary<'a>, bytes: Term<'a>) -> NifResult<Term<'a>> {
    let recipe = checked_recipe(digest, bytes)?;
    let lookup = match recipe.spec() {
        SchemeSpec::Ring { .. } | SchemeSpec::Jump => return Ok(atoms::none().encode(env)),
        SchemeSpec::Slots if recipe.fragments() > crate::lookup::MAX_SLOT_WORD_OWNER => None,
        SchemeSpec::Slots if !recipe.has_history() => {
            ErlangLookup::new_slots(&recipe.base_weights())
        }
        _ => {
            let e = entry(digest, bytes)?;
            ErlangLookup::build(&e.scheme, recipe.fragments_added())
        }
    };
    match lookup {
        Some(l) if l.carried() => Ok(encode_lookup(env, Some(l))),
        _ => Err(raise(
            atoms::too_many_fragments(),
            // Mnesia builds a new table's state one fragment at a time, so the
            // count reached here is the first one past the limit, not the count
            // asked for: the message names the limit only.
            format!(
                "mnesia_frag_slots holds at most {} fragments (a hash state names \
                 each fragment in 13 bits): a table cannot be created with, or grown \
                 to, more",
                crate::lookup::MAX_SLOT_WORD_OWNER
            ),
        )),
    }
}

fn encode_lookup(env: Env, lookup: Option<ErlangLookup>) -> Term {
    match lookup {
        None => atoms::none().encode(env),
        Some(ErlangLookup::LowBits {
            mask,
            half,
            fragments,
        }) => (atoms::low_bits(), mask, half, fragments).encode(env),
        Some(ErlangLookup::Words(w)) => {
            (atoms::words(), w.shift, binary(env, &w.to_be_bytes())).encode(env)
        }
        Some(ErlangLookup::SlotWords(w)) => (
            atoms::slot_words(),
            w.params(),
            binary(env, &w.to_be_bytes()),
        )
            .encode(env),
    }
}

/// Sets the directory of built-state files ([`crate::built`]): a binary
/// path, or `undefined` for none.
#[rustler::nif]
fn set_built_dir(dir: Term) -> NifResult<rustler::Atom> {
    let dir = match dir.decode::<Binary>() {
        Ok(b) => Some(std::path::PathBuf::from(
            std::str::from_utf8(b.as_slice()).map_err(|_| Error::BadArg)?,
        )),
        Err(_) if dir.is_atom() => None,
        Err(_) => return Err(Error::BadArg),
    };
    crate::built::set_dir(dir);
    Ok(rustler::types::atom::ok())
}

/// `{Entries, DecodedBytes}` of the global state cache.
#[rustler::nif]
fn cache_stats() -> (usize, usize) {
    cache::stats()
}

/// The digest (xxh3-128, 16 bytes) that states are cached by.
#[rustler::nif(schedule = "DirtyCpu")]
fn digest<'a>(env: Env<'a>, bytes: Binary<'a>) -> Term<'a> {
    binary(env, &recipe::digest(bytes.as_slice()))
}

/// The schemes this NIF serves the Mnesia adapter ([`crate::schemes`]), as
/// `[{ErlangName, StateCode, CoreName, CoreTag}]`: the one table that ties
/// the Erlang hash modules' names and state codes to the core's schemes.
#[rustler::nif]
fn schemes(env: Env) -> NifResult<Term> {
    crate::schemes::SCHEMES
        .iter()
        .map(|s| {
            Ok((
                rustler::Atom::from_str(env, s.erlang)?,
                s.state_code,
                binary(env, s.core.as_bytes()),
                s.core_tag(),
            )
                .encode(env))
        })
        .collect::<NifResult<Vec<Term>>>()
        .map(|v| v.encode(env))
}

rustler::init!("fraghash_nif");
