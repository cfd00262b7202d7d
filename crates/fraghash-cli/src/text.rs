//! Wording shared by the subcommands: counts with the right plural, and the
//! one rule for carriage returns in line-based input (`table load` files and
//! `experiment --keys-from` files).

/// `n` followed by the singular or plural noun: "1 record", "2 records",
/// "0 records". Numbers are printed plainly (scripts parse them).
pub fn count(n: u64, singular: &str, plural: &str) -> String {
    if n == 1 {
        format!("1 {singular}")
    } else {
        format!("{n} {plural}")
    }
}

/// Input lines end in `\n` alone. A `\r` anywhere in a line is refused, with
/// its line number, rather than stripped or kept: a CRLF file kept as is
/// would store keys ending in `\r` (other keys than the user meant), and
/// stripping would change data silently. Returns the error text when `line`
/// (without its `\n`) holds a `\r`.
pub fn carriage_return(line: &[u8], source: &str, number: u64) -> Option<String> {
    line.contains(&b'\r').then(|| {
        format!(
            "{source}, line {number}: carriage return (\\r); lines must end in \\n alone, \
             convert CRLF files first (dos2unix, or tr -d '\\r')"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_the_plural_except_for_one() {
        assert_eq!(count(0, "key", "keys"), "0 keys");
        assert_eq!(count(1, "key", "keys"), "1 key");
        assert_eq!(count(2, "range", "ranges"), "2 ranges");
        assert_eq!(count(10_000, "record", "records"), "10000 records");
    }

    #[test]
    fn a_carriage_return_anywhere_is_refused() {
        assert_eq!(carriage_return(b"a\tb", "f", 1), None);
        for line in [&b"a\tb\r"[..], b"a\rb", b"\r"] {
            let e = carriage_return(line, "f", 7).unwrap();
            assert!(e.starts_with("f, line 7: carriage return"), "{e}");
        }
    }
}
