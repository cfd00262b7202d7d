//! The one table of the schemes the Mnesia adapter offers: for each, the
//! name the Erlang side gives it (its hash module is `mnesia_frag_<name>`),
//! the code that names it in the Erlang hash state's header
//! (`fraghash_state`), and the core scheme behind it with the tag that names
//! that scheme in a core state's envelope. The two numberings differ and are
//! both persisted (Mnesia schemas hold the Erlang states, recipes and core
//! states the core tags), so neither is ever renumbered: this table only
//! puts them side by side. `fraghash_nif:schemes/0` returns it, and the
//! Erlang tests (`fraghash_state_tests`) hold the Erlang modules to it.

use fraghash::SchemeSpec;

/// One scheme as the Mnesia adapter names and codes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MnesiaScheme {
    /// The Erlang name: `?SCHEME` of the hash module `mnesia_frag_<name>`.
    pub erlang: &'static str,
    /// The scheme's code in the Erlang hash state's header.
    pub state_code: u8,
    /// The core scheme (a [`SchemeSpec`] name).
    pub core: &'static str,
}

/// Every scheme the Mnesia adapter offers.
pub const SCHEMES: [MnesiaScheme; 4] = [
    MnesiaScheme {
        erlang: "slots",
        state_code: 1,
        core: "slots",
    },
    // The core's `ring`, under the name of the ring module of Igor Ribeiro
    // Sucupira's posts, so that their readers find it.
    MnesiaScheme {
        erlang: "chash",
        state_code: 2,
        core: "ring",
    },
    MnesiaScheme {
        erlang: "jump",
        state_code: 3,
        core: "jump",
    },
    MnesiaScheme {
        erlang: "linear",
        state_code: 4,
        core: "linear",
    },
];

impl MnesiaScheme {
    /// The core scheme's spec (`ring` with its default points).
    pub fn spec(&self) -> SchemeSpec {
        // Every `core` above is a valid spec name; the test below holds it so.
        self.core.parse().unwrap_or(SchemeSpec::Slots)
    }

    /// The tag of the core scheme in a core state's envelope.
    pub fn core_tag(&self) -> u8 {
        self.spec().state_tag()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fraghash::{AnyScheme, FragmentScheme};

    #[test]
    fn names_and_codes_are_distinct_and_name_real_schemes() {
        for (i, a) in SCHEMES.iter().enumerate() {
            assert_eq!(a.core.parse::<SchemeSpec>().unwrap().name(), a.core);
            for b in &SCHEMES[i + 1..] {
                assert_ne!(a.erlang, b.erlang);
                assert_ne!(a.state_code, b.state_code);
                assert_ne!(a.core, b.core);
            }
        }
    }

    /// The core tags are the persisted ones: linear 1, ring 2, jump 3,
    /// slots 4, the tag byte of a state the core writes.
    #[test]
    fn core_tags_are_the_ones_core_states_carry() {
        let tags: Vec<(&str, u8)> = SCHEMES.iter().map(|s| (s.core, s.core_tag())).collect();
        assert_eq!(
            tags,
            [("slots", 4), ("ring", 2), ("jump", 3), ("linear", 1)]
        );
        for s in SCHEMES {
            let bytes = AnyScheme::new(s.core, 3).unwrap().to_state_bytes();
            // Magic (4 bytes), version (2), then the tag.
            assert_eq!(bytes[6], s.core_tag(), "{}", s.core);
        }
    }
}
