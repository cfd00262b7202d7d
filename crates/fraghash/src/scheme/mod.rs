//! The fragment-hashing contract and its schemes, one file each.

pub mod jump;
pub mod linear;
pub mod ring;
pub mod slots;

use crate::error::SchemeError;
use crate::plan::{MigrationPlan, Move, PlanKind, Renumber};

/// The whole contract between a table and the rule that places its keys,
/// modelled on Mnesia's `mnesia_frag_hash` behaviour.
///
/// Fragment ids are dense: `0..fragments()`. Every scheme places a key by its
/// hash `h` alone ([`crate::key_hash`]), and two values with the same state
/// place every `h` identically, in any process on any machine.
///
/// Code written against the trait works with every scheme:
///
/// ```
/// use fraghash::scheme::{jump::Jump, ring::Ring, slots::Slots};
/// use fraghash::{key_hash, AnyScheme, FragmentScheme};
///
/// /// How many of `keys` each fragment holds.
/// fn spread(scheme: &impl FragmentScheme, keys: &[u64]) -> Vec<usize> {
///     let mut counts = vec![0; scheme.fragments() as usize];
///     for &h in keys {
///         counts[scheme.locate(h) as usize] += 1;
///     }
///     counts
/// }
///
/// let keys: Vec<u64> = (0..10_000u32).map(|i| key_hash(&i.to_le_bytes())).collect();
/// let mut slots = Slots::new(4)?;
/// assert_eq!(spread(&slots, &keys).iter().sum::<usize>(), 10_000);
///
/// // Grow by one: the plan says which keys move where.
/// let before: Vec<u32> = keys.iter().map(|&h| slots.locate(h)).collect();
/// let plan = slots.add_fragment()?;
/// for (&h, &old) in keys.iter().zip(&before) {
///     assert_eq!(plan.destination(h, old), Some(slots.locate(h)));
/// }
/// assert_eq!(spread(&slots, &keys).len(), 5);
///
/// // Schemes that can only drop their last fragment say so.
/// let mut jump = Jump::new(4)?;
/// assert!(jump.remove_fragment(0).is_err());
/// assert_eq!(jump.fragments(), 4);
///
/// // The state travels as bytes; `AnyScheme` reads any scheme's.
/// let ring = Ring::new(4, 100)?;
/// let copy = AnyScheme::from_state_bytes(&ring.to_state_bytes())?;
/// assert_eq!(copy.spec(), "ring");
/// assert_eq!(spread(&copy, &keys), spread(&ring, &keys));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait FragmentScheme {
    /// The scheme's spec string (`"slots"`, `"ring:100"`...), which
    /// [`crate::AnyScheme::new`] accepts.
    fn spec(&self) -> String;

    /// How many fragments there are (at least 1).
    fn fragments(&self) -> u32;

    /// The fragment of a key hash. The hot path: no allocation, no locking.
    fn locate(&self, h: u64) -> u32;

    /// Adds fragment `fragments()` and returns what moves into it.
    fn add_fragment(&mut self) -> Result<MigrationPlan, SchemeError>;

    /// Removes fragment `which` and returns what moves out of it. Schemes
    /// that can only drop the last fragment return
    /// [`SchemeError::OnlyLastRemovable`] for any other; the state is then
    /// unchanged. When `which` is not the last, the last fragment takes its id
    /// (see [`MigrationPlan::renumber`]).
    fn remove_fragment(&mut self, which: u32) -> Result<MigrationPlan, SchemeError>;

    /// The state as versioned bytes, for [`crate::AnyScheme::from_state_bytes`].
    fn to_state_bytes(&self) -> Vec<u8>;
}

/// Checks a fragment count for a new state of `scheme`: at least one, at
/// most `max`.
pub(crate) fn check_fragment_count(
    scheme: &'static str,
    fragments: u32,
    max: u32,
) -> Result<(), SchemeError> {
    if fragments == 0 {
        return Err(SchemeError::ZeroFragments);
    }
    if fragments > max {
        return Err(SchemeError::TooManyFragments { scheme, max });
    }
    Ok(())
}

/// Checks `which` against the fragment count and the one-fragment floor.
pub(crate) fn check_removable(which: u32, fragments: u32) -> Result<(), SchemeError> {
    if which >= fragments {
        return Err(SchemeError::NoSuchFragment {
            fragment: which,
            fragments,
        });
    }
    if fragments == 1 {
        return Err(SchemeError::LastFragment);
    }
    Ok(())
}

/// The plan of an add that makes fragment `before` (the old count).
pub(crate) fn add_plan(before: u32, moves: Vec<Move>) -> MigrationPlan {
    MigrationPlan {
        kind: PlanKind::Add { fragment: before },
        fragments_before: before,
        fragments_after: before + 1,
        moves,
        renumber: None,
    }
}

/// How ids change when `which` of `before` fragments is removed: the last
/// fragment takes the removed id, so that ids stay dense; nothing changes
/// when the last one is removed.
pub(crate) fn removal_renumber(which: u32, before: u32) -> Option<Renumber> {
    let last = before - 1;
    (which != last).then_some(Renumber {
        from: last,
        to: which,
    })
}

/// The plan of removing `which` of `before` fragments, with `moves` in the
/// old numbering and the renumbering of [`removal_renumber`].
pub(crate) fn removal_plan(which: u32, before: u32, moves: Vec<Move>) -> MigrationPlan {
    MigrationPlan {
        kind: PlanKind::Remove { fragment: which },
        fragments_before: before,
        fragments_after: before - 1,
        moves,
        renumber: removal_renumber(which, before),
    }
}

/// For schemes that can only drop their last fragment (`jump`, `linear`):
/// checks that `which` is that one and returns the plan, a filter move of
/// its keys back to wherever the smaller scheme places them. The caller
/// then shrinks its state to `fragments - 1`.
pub(crate) fn remove_last(
    scheme: &'static str,
    which: u32,
    fragments: u32,
) -> Result<MigrationPlan, SchemeError> {
    check_removable(which, fragments)?;
    let last = fragments - 1;
    if which != last {
        return Err(SchemeError::OnlyLastRemovable {
            scheme,
            last,
            requested: which,
        });
    }
    Ok(removal_plan(
        last,
        fragments,
        vec![Move::Filter { from: last }],
    ))
}
