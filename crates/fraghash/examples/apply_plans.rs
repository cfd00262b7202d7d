//! Applies migration plans to storage of one's own: a `HashMap` per
//! fragment, kept in step with a scheme through adds, removals (with the
//! renumbering they bring), a split and a weight change, for a range-plan
//! scheme (`slots`, `ring`) and a filter-plan scheme (`jump`, `linear`).
//! After every step it checks that each key sits in the fragment `locate`
//! names, with its value, and that no key was lost.
//!
//! `cargo run --release -p fraghash --example apply_plans [KEYS]`
//!
//! How a plan is applied (see `Store::apply`):
//!
//! 1. Bring the storage to the new numbering, as the scheme already is: an
//!    add or split appends an empty fragment; a removal takes the removed
//!    fragment out with `Vec::swap_remove`, which moves the last fragment
//!    into its place, exactly the renumbering the plan states.
//! 2. For each move (it names fragments in the old numbering): read the
//!    keys of its source that the move covers, ask the plan where each goes
//!    in the new numbering (`MigrationPlan::destination`; a filter move
//!    leaves that to the new scheme's `locate`), and move those whose
//!    fragment changed.

use std::collections::HashMap;
use std::error::Error;

use fraghash::keys::ShortKeys;
use fraghash::{key_hash, AnyScheme, FragmentScheme, MigrationPlan, PlanKind, SchemeError};

/// One fragment of the user's storage.
type Fragment = HashMap<Vec<u8>, Vec<u8>>;

/// A table of one's own: a scheme and one map per fragment.
struct Store {
    scheme: AnyScheme,
    fragments: Vec<Fragment>,
}

/// What applying one plan did.
struct Applied {
    /// Keys read from sources (a range move reads only its ranges; a
    /// filter move reads its whole fragment).
    examined: usize,
    /// Keys that changed fragment.
    moved: usize,
}

impl Store {
    fn new(spec: &str, fragments: u32) -> Result<Store, fraghash::Error> {
        let scheme = AnyScheme::new(spec, fragments)?;
        Ok(Store {
            scheme,
            fragments: vec![Fragment::new(); fragments as usize],
        })
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        let f = self.scheme.locate(key_hash(key));
        self.fragments[f as usize].insert(key.to_vec(), value.to_vec());
    }

    fn get(&self, key: &[u8]) -> Option<&Vec<u8>> {
        self.fragments[self.scheme.locate(key_hash(key)) as usize].get(key)
    }

    /// Runs one scheme operation and moves the records its plan says.
    fn change(
        &mut self,
        what: &str,
        op: impl FnOnce(&mut AnyScheme) -> Result<MigrationPlan, SchemeError>,
    ) -> Result<(), Box<dyn Error>> {
        let plan = op(&mut self.scheme)?;
        let applied = self.apply(&plan);
        let renumbered = match plan.renumber {
            Some(r) => format!(", fragment {} is now {}", r.from, r.to),
            None => String::new(),
        };
        println!(
            "{:<8} {:<14} {:>2} -> {:>2} fragments, {} plan, {} moves: examined {:>6}, moved {:>6}{renumbered}",
            self.scheme.spec(),
            what,
            plan.fragments_before,
            plan.fragments_after,
            if plan.is_range_plan() { "range" } else { "filter" },
            plan.moves.len(),
            applied.examined,
            applied.moved,
        );
        Ok(())
    }

    /// Applies a plan the scheme has just returned (`self.scheme` is the
    /// new scheme).
    fn apply(&mut self, plan: &MigrationPlan) -> Applied {
        // 1. The storage in the new numbering, with a removed fragment
        // taken out (its keys all leave below).
        let mut removed: Option<Fragment> = None;
        match plan.kind {
            PlanKind::Remove { fragment } => {
                removed = Some(self.fragments.swap_remove(fragment as usize));
            }
            PlanKind::Add { .. } | PlanKind::Split { .. } => {
                self.fragments.push(Fragment::new());
            }
            PlanKind::Rebalance => {}
        }
        assert_eq!(self.fragments.len(), plan.fragments_after as usize);

        // 2. The moves.
        let mut applied = Applied {
            examined: 0,
            moved: 0,
        };
        for m in &plan.moves {
            let from = m.from();
            // The source's id now (`None`: the removed fragment).
            let here = plan.old_to_new(from);
            let source = match here {
                Some(id) => &self.fragments[id as usize],
                None => removed
                    .as_ref()
                    .expect("only a removed fragment has no new id"),
            };
            let mut leaving: Vec<(Vec<u8>, u32)> = Vec::new();
            for key in source.keys() {
                let h = key_hash(key);
                // A store ordered by hash would read only a range move's
                // ranges; a HashMap must look at every key to find them.
                if !m.covers(h) {
                    continue;
                }
                applied.examined += 1;
                let to = match plan.destination(h, from) {
                    Some(to) => to,
                    // A filter move: the new scheme says where the key is.
                    None => self.scheme.locate(h),
                };
                if Some(to) != here {
                    leaving.push((key.clone(), to));
                }
            }
            for (key, to) in leaving {
                let value = match here {
                    Some(id) => self.fragments[id as usize].remove(&key),
                    None => removed.as_mut().and_then(|r| r.remove(&key)),
                }
                .expect("the key was just read");
                self.fragments[to as usize].insert(key, value);
                applied.moved += 1;
            }
        }
        if let Some(r) = removed {
            assert!(r.is_empty(), "every key of a removed fragment leaves it");
        }
        applied
    }

    /// Every key sits in the fragment `locate` names, with its value, and
    /// the store holds exactly `keys`.
    fn check(&self, keys: &[Vec<u8>]) -> Result<(), String> {
        let held: usize = self.fragments.iter().map(HashMap::len).sum();
        if held != keys.len() {
            return Err(format!("{} keys held, {} written", held, keys.len()));
        }
        for (id, fragment) in self.fragments.iter().enumerate() {
            for key in fragment.keys() {
                let at = self.scheme.locate(key_hash(key));
                if at as usize != id {
                    return Err(format!("{key:?} is in fragment {id}, locate says {at}"));
                }
            }
        }
        for key in keys {
            if self.get(key) != Some(&value_of(key)) {
                return Err(format!("{key:?} lost or changed"));
            }
        }
        Ok(())
    }
}

fn value_of(key: &[u8]) -> Vec<u8> {
    key.iter().rev().copied().collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    let count: usize = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .map_err(|_| format!("KEYS must be a whole number, not {a:?}"))?,
        None => 50_000,
    };
    let mut gen = ShortKeys::new(7);
    let mut buf = Vec::new();
    let mut keys: Vec<Vec<u8>> = (0..count)
        .map(|_| {
            gen.next_into(&mut buf);
            buf.clone()
        })
        .collect();
    // Random short keys repeat now and then; a map holds each once.
    keys.sort_unstable();
    keys.dedup();
    let fill = |spec: &str, n: u32| -> Result<Store, Box<dyn Error>> {
        let mut store = Store::new(spec, n)?;
        for k in &keys {
            store.put(k, &value_of(k));
        }
        store.check(&keys)?;
        Ok(store)
    };
    println!("{} distinct keys\n", keys.len());

    // Range plans, with a removal in the middle that renumbers.
    let mut slots = fill("slots", 8)?;
    slots.change("add", |s| s.add_fragment())?;
    slots.check(&keys)?;
    slots.change("remove 2", |s| s.remove_fragment(2))?;
    slots.check(&keys)?;
    slots.change("split 0", |s| s.split(0))?;
    slots.check(&keys)?;
    slots.change("weight 1 = 3", |s| s.set_weight(1, 3))?;
    slots.check(&keys)?;
    slots.change("remove last", |s| {
        let last = s.fragments() - 1;
        s.remove_fragment(last)
    })?;
    slots.check(&keys)?;

    let mut ring = fill("ring", 6)?;
    ring.change("remove 0", |s| s.remove_fragment(0))?;
    ring.check(&keys)?;
    ring.change("add", |s| s.add_fragment())?;
    ring.check(&keys)?;

    // Filter plans: every fragment scanned on a jump add; one on linear's.
    for spec in ["jump", "linear"] {
        let mut store = fill(spec, 6)?;
        store.change("add", |s| s.add_fragment())?;
        store.check(&keys)?;
        store.change("remove last", |s| s.remove_fragment(6))?;
        store.check(&keys)?;
    }

    println!("\nevery key sits where locate says, with its value");
    Ok(())
}
