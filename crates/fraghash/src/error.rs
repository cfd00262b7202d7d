//! Typed errors of the core crate.

use thiserror::Error;

/// The valid scheme specs, for error messages and `--help` texts.
pub const VALID_SPECS: &str = "linear, ring, ring:<points per fragment 1..=10000>, jump, slots";

/// A scheme spec string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown scheme spec {spec:?}: valid forms are {VALID_SPECS}")]
pub struct SpecError {
    /// The spec as given.
    pub spec: String,
}

/// An operation a scheme refused. The scheme's state is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SchemeError {
    /// The scheme can only remove its last fragment.
    #[error(
        "scheme {scheme} can only remove its last fragment ({last}), not fragment {requested}"
    )]
    OnlyLastRemovable {
        /// The scheme's name.
        scheme: &'static str,
        /// The last fragment's id.
        last: u32,
        /// The fragment the caller asked to remove.
        requested: u32,
    },
    /// The fragment id is not in `0..fragments`.
    #[error("fragment {fragment} does not exist: {}", existing_ids(*.fragments))]
    NoSuchFragment {
        /// The id asked for.
        fragment: u32,
        /// How many fragments there are.
        fragments: u32,
    },
    /// A table keeps at least one fragment.
    #[error("cannot remove the only fragment: a table has at least one")]
    LastFragment,
    /// The scheme cannot hold more fragments.
    #[error("scheme {scheme} supports at most {max} fragments")]
    TooManyFragments {
        /// The scheme's name.
        scheme: &'static str,
        /// Its limit.
        max: u32,
    },
    /// A fragment count of zero was asked for.
    #[error("a table needs at least one fragment")]
    ZeroFragments,
    /// The operation exists only for some schemes.
    #[error("scheme {scheme} does not support {operation}; use the slots scheme")]
    Unsupported {
        /// The scheme's name.
        scheme: &'static str,
        /// What was asked.
        operation: &'static str,
    },
    /// A parameter was out of range (a weight of zero, sizes of the wrong length...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// The ids that exist among `fragments`, for messages: "there are 9
/// fragments (ids 0..=8)", written as an inclusive range like the other
/// ranges in messages, since users read `0..9` as including 9.
fn existing_ids(fragments: u32) -> String {
    match fragments {
        0 => "there are no fragments".into(),
        1 => "there is 1 fragment (id 0)".into(),
        n => format!("there are {n} fragments (ids 0..={})", n - 1),
    }
}

/// Scheme state bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StateError {
    /// The bytes are empty or do not start with the fraghash state magic.
    #[error("not a fraghash scheme state (bad magic); the bytes come from something else")]
    Foreign,
    /// Written by a newer (or unknown) format version.
    #[error("scheme state format version {found} is not supported (this build reads versions 1 to {supported}); was it written by a newer fraghash?")]
    UnsupportedVersion {
        /// Version in the bytes.
        found: u16,
        /// The newest version this build reads (it reads every version
        /// from [`crate::state::OLDEST_READABLE_VERSION`] to this one).
        supported: u16,
    },
    /// The scheme tag is not one this build knows.
    #[error("unknown scheme tag {0} in scheme state")]
    UnknownScheme(u8),
    /// The bytes start like a state but are truncated, malformed or fail
    /// their checksum.
    #[error("corrupt scheme state: {0}")]
    Corrupt(String),
    /// The body decoded but breaks an invariant (an owner out of range...).
    #[error("invalid scheme state: {0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids named are the ones that exist: the last is `fragments - 1`.
    #[test]
    fn no_such_fragment_names_the_ids_that_exist() {
        let e = |fragment, fragments| SchemeError::NoSuchFragment {
            fragment,
            fragments,
        };
        assert_eq!(
            e(9, 9).to_string(),
            "fragment 9 does not exist: there are 9 fragments (ids 0..=8)"
        );
        assert_eq!(
            e(3, 1).to_string(),
            "fragment 3 does not exist: there is 1 fragment (id 0)"
        );
    }
}
