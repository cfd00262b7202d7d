//! The fragment-hashing contract and its schemes, one file each.

pub mod jump;
pub mod linear;
pub mod ring;
pub mod slots;

use crate::error::SchemeError;
use crate::plan::MigrationPlan;

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
