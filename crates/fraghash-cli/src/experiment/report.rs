//! The experiment's results: the JSON document, the terminal tables and
//! report.md.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::growth::Curve;
use super::keys::KeySource;
use super::run::{Change, SchemeReport};

/// The JSON schema's version: bumped when a field changes meaning or goes.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole result, as `--json` prints it and report.json holds it.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// fraghash version.
    pub fraghash_version: &'static str,
    /// Where the keys came from.
    pub key_source: KeySource,
    /// Key count M.
    pub keys: u64,
    /// Fragment count N.
    pub fragments: u32,
    /// M / N.
    pub mean: f64,
    /// The binomial floor at N.
    pub floor: f64,
    /// Per scheme, in `--schemes` order.
    pub schemes: Vec<SchemeReport>,
    /// With `--growth`.
    pub growth: Option<Growth>,
}

/// Growth curves from 1 to `max` fragments.
#[derive(Debug, Clone, Serialize)]
pub struct Growth {
    /// The last fragment count.
    pub max: u32,
    /// One per scheme.
    pub curves: Vec<Curve>,
}

impl Growth {
    /// (worst max/mean over 2..=max, the N where, the average over 2..=max).
    pub fn summary(c: &Curve) -> (f64, u32, f64) {
        let mut worst = (0.0f64, 1u32);
        let mut sum = 0.0;
        let mut k = 0.0;
        for (i, &x) in c.max_over_mean.iter().enumerate().skip(1) {
            if x > worst.0 {
                worst = (x, c.fragments[i]);
            }
            sum += x;
            k += 1.0;
        }
        (worst.0, worst.1, if k > 0.0 { sum / k } else { 1.0 })
    }
}

impl Report {
    /// Assembles the report.
    pub fn new(
        key_source: KeySource,
        keys: u64,
        fragments: u32,
        schemes: Vec<SchemeReport>,
        growth: Option<Growth>,
    ) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            fraghash_version: env!("CARGO_PKG_VERSION"),
            key_source,
            keys,
            fragments,
            mean: keys as f64 / f64::from(fragments),
            floor: fraghash::stats::binomial_floor(keys, fragments as usize),
            schemes,
            growth,
        }
    }

    /// The JSON document (pretty-printed).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serialises")
    }

    fn headline(&self) -> String {
        format!(
            "{} into {} fragments ({}): mean {} a fragment, binomial floor {} \
             (the stddev a perfect scheme still shows by chance)",
            keys(self.keys),
            self.fragments,
            self.key_source.describe(),
            keys(self.mean.round() as u64),
            thousands(self.floor.round() as u64),
        )
    }

    fn distribution_rows(&self) -> Table {
        let mut t = Table::new(&["scheme", "stddev", "/floor", "min", "max", "max/mean"]);
        for s in &self.schemes {
            t.row(vec![
                s.scheme.clone(),
                thousands(s.stddev.round() as u64),
                format!("{:.1}", s.stddev_over_floor),
                thousands(s.min),
                thousands(s.max),
                format!("{:.3}", s.max_over_mean),
            ]);
        }
        t
    }

    fn change_rows(&self, pick: impl Fn(&SchemeReport) -> &Change, removal: bool) -> Table {
        let mut head = vec!["scheme"];
        if removal {
            head.push("removed");
        }
        head.extend([
            "plan", "moved", "moved %", "/ideal", "scanned", "sources", "touched", "exact",
        ]);
        let mut t = Table::new(&head);
        for s in &self.schemes {
            let c = pick(s);
            let mut row = vec![s.scheme.clone()];
            if removal {
                row.push(c.fragment.to_string());
            }
            row.extend([
                c.plan.to_string(),
                thousands(c.moved),
                format!("{:.2}%", 100.0 * c.moved as f64 / self.keys as f64),
                format!("{:.2}", c.moved_over_ideal),
                thousands(c.scanned),
                c.sources.to_string(),
                c.fragments_touched.to_string(),
                if c.plan_exact { "yes" } else { "NO" }.to_string(),
            ]);
            t.row(row);
        }
        t
    }

    fn growth_rows(g: &Growth) -> Table {
        let mut t = Table::new(&[
            "scheme",
            "worst max/mean",
            "at N",
            "average",
            "max/mean at MAX",
        ]);
        for c in &g.curves {
            let (worst, at, avg) = Growth::summary(c);
            t.row(vec![
                c.scheme.clone(),
                format!("{worst:.3}"),
                at.to_string(),
                format!("{avg:.3}"),
                format!("{:.3}", c.max_over_mean.last().copied().unwrap_or(0.0)),
            ]);
        }
        t
    }

    fn captions(&self) -> [String; 3] {
        let n = self.fragments;
        let m = self.keys as f64;
        [
            format!("Distribution over {n} fragments"),
            format!(
                "Add fragment {n} ({} fragments): ideal move M/(N+1) = {} ({:.2}%)",
                n + 1,
                keys((m / f64::from(n + 1)).round() as u64),
                100.0 / f64::from(n + 1)
            ),
            format!(
                "Remove one fragment ({n} -> {}; the last for schemes that can only remove \
                 the last, the middle one for the others): ideal move M/N = {} ({:.2}%)",
                n - 1,
                keys((m / f64::from(n)).round() as u64),
                100.0 / f64::from(n)
            ),
        ]
    }

    fn growth_caption(g: &Growth) -> String {
        format!(
            "Growth from 1 to {} fragments, one add at a time (every step exact: no sampling)",
            g.max
        )
    }

    /// The terminal output.
    pub fn terminal(&self, elapsed: Duration) -> String {
        let mut o = String::new();
        let [dist, add, remove] = self.captions();
        let _ = writeln!(o, "{}\n", self.headline());
        let _ = writeln!(o, "{dist}\n{}", self.distribution_rows().text());
        let _ = writeln!(o, "{add}\n{}", self.change_rows(|s| &s.add, false).text());
        let _ = writeln!(
            o,
            "{remove}\n{}",
            self.change_rows(|s| &s.remove, true).text()
        );
        if let Some(g) = &self.growth {
            let _ = writeln!(
                o,
                "{}\n{}",
                Self::growth_caption(g),
                Self::growth_rows(g).text()
            );
        }
        let _ = writeln!(
            o,
            "scanned: keys the plan reads; sources: fragments it reads; touched: fragments \
             that lose or gain keys; exact: the plan covers exactly the keys that moved.\n\
             Done in {:.1} s.",
            elapsed.as_secs_f64()
        );
        o
    }

    /// report.md.
    pub fn markdown(&self) -> String {
        let mut o = String::new();
        let [dist, add, remove] = self.captions();
        let _ = writeln!(o, "# fraghash experiment\n\n{}.\n", self.headline());
        let _ = writeln!(
            o,
            "## {dist}\n\n![fragment sizes](distribution.png)\n\n{}",
            self.distribution_rows().markdown()
        );
        let _ = writeln!(
            o,
            "## {add}\n\n{}",
            self.change_rows(|s| &s.add, false).markdown()
        );
        let _ = writeln!(
            o,
            "## {remove}\n\n{}",
            self.change_rows(|s| &s.remove, true).markdown()
        );
        if let Some(g) = &self.growth {
            let _ = writeln!(
                o,
                "## {}\n\n![max/mean as the table grows](growth.png)\n\n{}",
                Self::growth_caption(g),
                Self::growth_rows(g).markdown()
            );
            for c in &g.curves {
                let _ = writeln!(o, "- {}: {}", c.scheme, c.method);
            }
            o.push('\n');
        }
        let _ = writeln!(
            o,
            "*scanned*: keys the plan reads; *sources*: fragments it reads; *touched*: \
             fragments that lose or gain keys; *exact*: the plan covers exactly the keys \
             that moved (checked on every key).\n\n\
             For comparison, the figures published in Igor Ribeiro Sucupira, \"Consistent \
             hashing for Mnesia fragments\" (2009), at 10,000,000 random short strings and \
             50 fragments in Mnesia (`erlang:phash2`): `mnesia_frag_hash` stddev 70,122, \
             biggest 313,462; the post's ring with 100 points per fragment stddev 21,275, \
             biggest 257,371."
        );
        o
    }
}

/// A plain text table: first column left-aligned, the rest right-aligned.
struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, r: Vec<String>) {
        self.rows.push(r);
    }

    fn text(&self) -> String {
        let mut w: Vec<usize> = self.head.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut o = String::new();
        for r in std::iter::once(&self.head).chain(&self.rows) {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate() {
                if i == 0 {
                    let _ = write!(line, "{c:<width$}", width = w[0]);
                } else {
                    let _ = write!(line, "  {c:>width$}", width = w[i]);
                }
            }
            let _ = writeln!(o, "{}", line.trim_end());
        }
        o
    }

    fn markdown(&self) -> String {
        let mut o = format!("| {} |\n|", self.head.join(" | "));
        for i in 0..self.head.len() {
            o.push_str(if i == 0 { "---|" } else { "---:|" });
        }
        o.push('\n');
        for r in &self.rows {
            let _ = writeln!(o, "| {} |", r.join(" | "));
        }
        o
    }
}

/// A key count in words: "1 key", "0 keys", "10,000,000 keys".
pub fn keys(n: u64) -> String {
    format!("{} {}", thousands(n), if n == 1 { "key" } else { "keys" })
}

/// 1234567 -> "1,234,567".
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut o = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            o.push(',');
        }
        o.push(ch);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(10_000_000), "10,000,000");
        assert_eq!(keys(1), "1 key");
        assert_eq!(keys(0), "0 keys");
        assert_eq!(keys(1000), "1,000 keys");
    }
}
