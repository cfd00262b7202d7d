//! [`AnyScheme`]: one type for every scheme, chosen at run time by a spec.

use std::fmt;
use std::str::FromStr;

use crate::error::{SchemeError, SpecError, StateError};
use crate::plan::MigrationPlan;
use crate::scheme::jump::Jump;
use crate::scheme::linear::Linear;
use crate::scheme::ring::Ring;
use crate::scheme::slots::Slots;
use crate::scheme::FragmentScheme;
use crate::state::{self, tag};

/// A parsed scheme spec: which scheme, with which parameters.
///
/// The accepted forms are listed in [`crate::error::VALID_SPECS`]:
/// `linear`, `ring` (100 points per fragment), `ring:<points>`, `jump`,
/// `slots`. Parsing is case-sensitive and ignores surrounding whitespace
/// (so a list like `"linear, slots"` splits on commas alone). The points
/// are written in plain decimal: no sign, no leading zero, 1 to 10,000.
/// `ring:100` is accepted and displays as `ring`. Weighted `slots` are
/// built with [`AnyScheme::with_weights`].
///
/// ```
/// use fraghash::SchemeSpec;
/// assert_eq!("ring:1000".parse::<SchemeSpec>().unwrap(), SchemeSpec::Ring { points: 1000 });
/// assert_eq!("ring".parse::<SchemeSpec>().unwrap().to_string(), "ring");
/// assert!("rings".parse::<SchemeSpec>().is_err());
/// assert!("ring:+100".parse::<SchemeSpec>().is_err());
/// assert!("ring:0100".parse::<SchemeSpec>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemeSpec {
    /// Mnesia's linear hashing.
    Linear,
    /// Consistent-hash ring with `points` points per fragment.
    Ring {
        /// Points per fragment.
        points: u32,
    },
    /// Jump consistent hashing.
    Jump,
    /// Balanced slot table.
    Slots,
}

impl SchemeSpec {
    /// The scheme's name (`"ring"` for every ring).
    pub fn name(&self) -> &'static str {
        match self {
            SchemeSpec::Linear => "linear",
            SchemeSpec::Ring { .. } => "ring",
            SchemeSpec::Jump => "jump",
            SchemeSpec::Slots => "slots",
        }
    }

    /// The tag that names this scheme in a state's envelope
    /// ([`FragmentScheme::to_state_bytes`]): part of the on-disc format,
    /// never renumbered.
    pub fn state_tag(&self) -> u8 {
        match self {
            SchemeSpec::Linear => tag::LINEAR,
            SchemeSpec::Ring { .. } => tag::RING,
            SchemeSpec::Jump => tag::JUMP,
            SchemeSpec::Slots => tag::SLOTS,
        }
    }

    /// The most fragments this scheme supports.
    pub fn max_fragments(&self) -> u32 {
        match self {
            SchemeSpec::Linear => Linear::MAX_FRAGMENTS,
            SchemeSpec::Ring { points } => Ring::max_fragments(*points),
            SchemeSpec::Jump => Jump::MAX_FRAGMENTS,
            SchemeSpec::Slots => Slots::MAX_FRAGMENTS,
        }
    }

    /// Whether the scheme can remove any fragment (not only the last).
    pub fn removes_any(&self) -> bool {
        matches!(self, SchemeSpec::Ring { .. } | SchemeSpec::Slots)
    }

    /// Whether adds and removes give range plans (else filter plans).
    pub fn range_plans(&self) -> bool {
        self.removes_any()
    }
}

impl FromStr for SchemeSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<SchemeSpec, SpecError> {
        let err = || SpecError {
            spec: s.to_string(),
        };
        let t = s.trim();
        match t {
            "linear" => Ok(SchemeSpec::Linear),
            "ring" => Ok(SchemeSpec::Ring {
                points: Ring::DEFAULT_POINTS,
            }),
            "jump" => Ok(SchemeSpec::Jump),
            "slots" => Ok(SchemeSpec::Slots),
            _ => {
                let p = t.strip_prefix("ring:").ok_or_else(err)?;
                // Canonical decimal only: `u32::from_str` would also take a
                // sign and leading zeros, so one ring would have many names.
                let canonical =
                    !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && !p.starts_with('0');
                if !canonical {
                    return Err(err());
                }
                let points: u32 = p.parse().map_err(|_| err())?;
                if points == 0 || points > Ring::MAX_POINTS {
                    return Err(err());
                }
                Ok(SchemeSpec::Ring { points })
            }
        }
    }
}

impl fmt::Display for SchemeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemeSpec::Ring { points } if *points != Ring::DEFAULT_POINTS => {
                write!(f, "ring:{points}")
            }
            other => f.write_str(other.name()),
        }
    }
}

/// Any scheme, chosen at run time. Implements [`FragmentScheme`] by
/// delegation (one predictable branch per call), and offers the slot-only
/// operations with a typed error for the other schemes.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyScheme {
    /// `linear`.
    Linear(Linear),
    /// `ring` / `ring:<points>`.
    Ring(Ring),
    /// `jump`.
    Jump(Jump),
    /// `slots`.
    Slots(Slots),
}

macro_rules! each {
    ($self:expr, $s:ident => $e:expr) => {
        match $self {
            AnyScheme::Linear($s) => $e,
            AnyScheme::Ring($s) => $e,
            AnyScheme::Jump($s) => $e,
            AnyScheme::Slots($s) => $e,
        }
    };
}

impl AnyScheme {
    /// A scheme from a spec string, with `fragments` fragments.
    ///
    /// ```
    /// use fraghash::{AnyScheme, FragmentScheme};
    /// let s = AnyScheme::new("slots", 50).unwrap();
    /// assert_eq!(s.fragments(), 50);
    /// assert!(AnyScheme::new("nope", 50).is_err());
    /// assert!(AnyScheme::new("slots", 0).is_err());
    /// ```
    pub fn new(spec: &str, fragments: u32) -> Result<AnyScheme, crate::Error> {
        let spec: SchemeSpec = spec.parse()?;
        Ok(AnyScheme::from_spec(spec, fragments)?)
    }

    /// A weighted scheme: one fragment per weight, each with a share of the
    /// keys in proportion to its weight. Only `slots` has weights; another
    /// spec gives [`SchemeError::Unsupported`], a weight of 0 or an empty
    /// list [`SchemeError::InvalidArgument`] or
    /// [`SchemeError::ZeroFragments`]. See [`Slots::with_weights`].
    ///
    /// ```
    /// use fraghash::{AnyScheme, FragmentScheme};
    ///
    /// let s = AnyScheme::with_weights("slots", &[2, 1, 1])?;
    /// assert_eq!(s.fragments(), 3);
    /// assert_eq!(s.as_slots().unwrap().weights(), &[2, 1, 1]);
    /// // The state keeps the weights: a decoded copy is the same scheme.
    /// assert_eq!(AnyScheme::from_state_bytes(&s.to_state_bytes())?, s);
    /// assert!(AnyScheme::with_weights("ring", &[2, 1]).is_err());
    /// # Ok::<(), fraghash::Error>(())
    /// ```
    pub fn with_weights(spec: &str, weights: &[u32]) -> Result<AnyScheme, crate::Error> {
        match spec.parse::<SchemeSpec>()? {
            SchemeSpec::Slots => Ok(AnyScheme::Slots(Slots::with_weights(weights)?)),
            other => Err(SchemeError::Unsupported {
                scheme: other.name(),
                operation: "weights",
            }
            .into()),
        }
    }

    /// A scheme from a parsed spec, with `fragments` fragments.
    pub fn from_spec(spec: SchemeSpec, fragments: u32) -> Result<AnyScheme, SchemeError> {
        Ok(match spec {
            SchemeSpec::Linear => AnyScheme::Linear(Linear::new(fragments)?),
            SchemeSpec::Ring { points } => AnyScheme::Ring(Ring::new(fragments, points)?),
            SchemeSpec::Jump => AnyScheme::Jump(Jump::new(fragments)?),
            SchemeSpec::Slots => AnyScheme::Slots(Slots::new(fragments)?),
        })
    }

    /// Decodes a state written by [`FragmentScheme::to_state_bytes`].
    pub fn from_state_bytes(bytes: &[u8]) -> Result<AnyScheme, StateError> {
        let (t, body) = state::open(bytes)?;
        match t {
            tag::LINEAR => Linear::decode(body).map(AnyScheme::Linear),
            tag::RING => Ring::decode(body).map(AnyScheme::Ring),
            tag::JUMP => Jump::decode(body).map(AnyScheme::Jump),
            tag::SLOTS => Slots::decode(body).map(AnyScheme::Slots),
            other => Err(StateError::UnknownScheme(other)),
        }
    }

    /// The parsed spec of this scheme.
    pub fn scheme_spec(&self) -> SchemeSpec {
        match self {
            AnyScheme::Linear(_) => SchemeSpec::Linear,
            AnyScheme::Ring(r) => SchemeSpec::Ring {
                points: r.points_per_fragment(),
            },
            AnyScheme::Jump(_) => SchemeSpec::Jump,
            AnyScheme::Slots(_) => SchemeSpec::Slots,
        }
    }

    /// The slot table, for the `slots` scheme.
    pub fn as_slots(&self) -> Option<&Slots> {
        match self {
            AnyScheme::Slots(s) => Some(s),
            _ => None,
        }
    }

    /// Bytes of memory the lookup structures take (0 for `linear`, `jump`).
    pub fn memory_bytes(&self) -> usize {
        match self {
            AnyScheme::Linear(_) | AnyScheme::Jump(_) => 0,
            AnyScheme::Ring(r) => r.memory_bytes(),
            AnyScheme::Slots(s) => s.memory_bytes(),
        }
    }

    fn slots_mut(&mut self, operation: &'static str) -> Result<&mut Slots, SchemeError> {
        match self {
            AnyScheme::Slots(s) => Ok(s),
            other => Err(SchemeError::Unsupported {
                scheme: other.scheme_spec().name(),
                operation,
            }),
        }
    }

    /// `slots` only: see [`Slots::split`].
    pub fn split(&mut self, fragment: u32) -> Result<MigrationPlan, SchemeError> {
        self.slots_mut("split")?.split(fragment)
    }

    /// `slots` only: see [`Slots::rebalance`].
    pub fn rebalance(&mut self, slot_sizes: &[u64]) -> Result<MigrationPlan, SchemeError> {
        self.slots_mut("rebalance")?.rebalance(slot_sizes)
    }

    /// `slots` only: see [`Slots::set_weight`].
    pub fn set_weight(&mut self, fragment: u32, weight: u32) -> Result<MigrationPlan, SchemeError> {
        self.slots_mut("weights")?.set_weight(fragment, weight)
    }

    /// `slots` only: see [`Slots::add_limited`].
    pub fn add_limited(
        &mut self,
        weight: u32,
        max_donors: u32,
    ) -> Result<MigrationPlan, SchemeError> {
        self.slots_mut("limited adds")?
            .add_limited(weight, max_donors)
    }

    /// `slots` only: see [`Slots::add_weighted`].
    pub fn add_weighted(&mut self, weight: u32) -> Result<MigrationPlan, SchemeError> {
        self.slots_mut("weights")?.add_weighted(weight)
    }
}

impl FragmentScheme for AnyScheme {
    fn spec(&self) -> String {
        each!(self, s => s.spec())
    }

    fn fragments(&self) -> u32 {
        each!(self, s => s.fragments())
    }

    #[inline]
    fn locate(&self, h: u64) -> u32 {
        each!(self, s => s.locate(h))
    }

    fn add_fragment(&mut self) -> Result<MigrationPlan, SchemeError> {
        each!(self, s => s.add_fragment())
    }

    fn remove_fragment(&mut self, which: u32) -> Result<MigrationPlan, SchemeError> {
        each!(self, s => s.remove_fragment(which))
    }

    fn to_state_bytes(&self) -> Vec<u8> {
        each!(self, s => s.to_state_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One name per scheme: signs, leading zeros, empty or out-of-range
    /// point counts are refused; surrounding whitespace is not part of the
    /// spec.
    #[test]
    fn only_canonical_specs_parse() {
        for bad in [
            "ring:+100",
            "ring:0100",
            "ring:00",
            "ring:0",
            "ring:",
            "ring:-1",
            "ring: 100",
            "ring:1e3",
            "ring:10001",
            "ring:4294967296",
            "Ring",
            "slots:1",
            "ring:١٠٠",
        ] {
            assert!(bad.parse::<SchemeSpec>().is_err(), "{bad:?} parsed");
        }
        for (good, points) in [
            ("ring:1", 1),
            ("ring:100", 100),
            ("ring:10000", 10_000),
            (" ring:7 ", 7),
        ] {
            assert_eq!(good.parse::<SchemeSpec>(), Ok(SchemeSpec::Ring { points }));
        }
        for spec in ["linear", "ring", "ring:7", "jump", "slots"] {
            let parsed: SchemeSpec = spec.parse().unwrap();
            assert_eq!(parsed.to_string(), spec);
        }
    }

    #[test]
    fn weighted_slots_only() {
        let s = AnyScheme::with_weights("slots", &[3, 1]).unwrap();
        let c = s.as_slots().unwrap().slots_per_fragment();
        assert_eq!(c[0], 3 * c[1]);
        for spec in ["linear", "ring", "jump"] {
            assert!(matches!(
                AnyScheme::with_weights(spec, &[1, 1]),
                Err(crate::Error::Scheme(SchemeError::Unsupported { .. }))
            ));
        }
        assert!(matches!(
            AnyScheme::with_weights("slots", &[]),
            Err(crate::Error::Scheme(SchemeError::ZeroFragments))
        ));
        assert!(matches!(
            AnyScheme::with_weights("slots", &[1, 0]),
            Err(crate::Error::Scheme(SchemeError::InvalidArgument(_)))
        ));
        assert!(AnyScheme::with_weights("nope", &[1]).is_err());
    }
}
