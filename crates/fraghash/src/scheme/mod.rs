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
