//! The changes a batch is made of: below the log, which stores them, and
//! the writer, which applies them.

/// One change in a [`Db::write`](super::Db::write) batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// Sets `key` to `value` in `table`.
    Put {
        /// The table.
        table: &'a str,
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Removes `key` from `table`, if there.
    Delete {
        /// The table.
        table: &'a str,
        /// The key.
        key: &'a [u8],
    },
    /// Removes every record of `table`.
    Clear {
        /// The table.
        table: &'a str,
    },
}

impl Op<'_> {
    /// The table it changes.
    pub(super) fn table(&self) -> &str {
        match self {
            Op::Put { table, .. } | Op::Delete { table, .. } | Op::Clear { table } => table,
        }
    }

    /// The bytes of key and value it writes (0 for a clear).
    pub fn bytes(&self) -> usize {
        match self {
            Op::Put { key, value, .. } => key.len() + value.len(),
            Op::Delete { key, .. } => key.len(),
            Op::Clear { .. } => 0,
        }
    }
}
