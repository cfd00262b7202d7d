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
/// `slots`. Parsing is case-sensitive and ignores surrounding whitespace.
///
/// ```
/// use fraghash::SchemeSpec;
/// assert_eq!("ring:1000".parse::<SchemeSpec>().unwrap(), SchemeSpec::Ring { points: 1000 });
/// assert_eq!("ring".parse::<SchemeSpec>().unwrap().to_string(), "ring");
/// assert!("rings".parse::<SchemeSpec>().is_err());
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
