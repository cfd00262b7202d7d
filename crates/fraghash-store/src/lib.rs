//! A durable fragmented table on redb (work in progress).
