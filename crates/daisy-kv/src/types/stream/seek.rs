//! Where entries start inside stream nodes, remembered between the commands of one
//! transaction, so that a forward read starting inside a node (XREADGROUP `>` and XREAD of a
//! consumer that reads one entry at a time) starts at the last entry an earlier read of the
//! same node handed out instead of walking the node from its first entry.
//!
//! Why: a node holds up to `stream-node-max-entries` (100) entries, and a listpack can only be
//! walked from a known element, so without this every `XREADGROUP ... COUNT 1` parses half a
//! node on average before it reaches its entry (Redis walks the same way, but in C and without
//! copying the node out of the pool). A round of pipelined reads of one group (one
//! transaction under group commit) reads consecutive entries of the same node.
//!
//! A hint says: "in stream `stream` (its meta's offset), the node of master ID `master` is
//! held by block `block`, and in it the entry with ID `id` starts `rel` bytes after the
//! node's master entry". A read follows it only when its start is at or after `id` and the
//! stream's map still names `block` for `master` (looked up exactly: one descent of the map
//! instead of finding the node by rank, two). Why the rest of it stays true for the rest of
//! the transaction that learned it, and is never used in another:
//! * Entries never move inside a node once written: an append writes after the last entry; a
//!   deletion (XDEL, exact trimming) only flags an entry (`node::F_DELETED`: the flags stay a
//!   one-byte element, 0..=3) and changes the master entry's counts, whose elements may change
//!   length, which moves every entry by the same amount: so the hint counts from the end of
//!   the master entry (`node::Master::first_entry`), not from the node's start. A node is
//!   otherwise rewritten only into a new block (moved to a larger or smaller one, RESTORE, a
//!   new stream): under another offset.
//! * Within one transaction an offset names one object: a block or a stream meta freed by the
//!   transaction (a node removed or moved, a stream deleted) is not handed out again before
//!   the transaction commits (FORMAT.md section 7, "Reuse after free"; `crate::views` relies
//!   on the same). A freed block is no longer named by its stream's map, so the exact lookup
//!   above refuses its hint; a deleted stream's meta offset names no stream the transaction
//!   can open again.
//! * Starting in the hint's node skips only entries before `id`, which are before the read's
//!   start; nodes before it hold smaller IDs still. When the node has nothing at or after the
//!   start, the read goes on with the next node of the map, as any forward read does.
//! * Across transactions none of this holds (a block freed and committed can hold another
//!   node, of another stream, the next time; a transaction that failed may have written the
//!   node the hint was learned from), so each hint carries its transaction's
//!   [`daisy::Tx::serial`] and is never handed to another transaction: a failed one, and the
//!   commands run again after it, get a new serial. (The keyspace also empties the hints at
//!   the end of every transaction: `Keyspace::committed`, `Keyspace::resync`.)
//!
//! The reader still checks what it is given (the entry at the hint parses and has the hint's
//! ID) and walks from the node's first entry when not: a hint can only save work.

use super::id::StreamId;

/// Hints kept at most (a few streams' consumer groups read in one round).
const KEEP: usize = 8;

/// Where a read of a stream left off: in the node of master ID `master`, held by `block`,
/// entry `id` starts `rel` bytes after the master entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seek {
    pub master: StreamId,
    pub block: u64,
    pub id: StreamId,
    pub rel: usize,
}

/// The hints of one transaction, one per stream (by its meta's offset; see the module's
/// comment).
#[derive(Debug, Default)]
pub struct SeekHints {
    /// The transaction that learned them ([`daisy::Tx::serial`]).
    tx: u64,
    hints: Vec<(u64, Seek)>,
}

impl SeekHints {
    /// Where the last read of the stream whose meta is at `stream` left off, learned by
    /// transaction `tx`. None for another transaction's hints.
    pub fn get(&self, tx: u64, stream: u64) -> Option<Seek> {
        if self.tx != tx {
            return None;
        }
        self.hints
            .iter()
            .find(|(s, _)| *s == stream)
            .map(|(_, h)| *h)
    }

    /// Remember where a read of transaction `tx` left off in stream `stream`: replaces the
    /// stream's hint; other transactions' hints go.
    pub fn put(&mut self, tx: u64, stream: u64, seek: Seek) {
        if self.tx != tx {
            self.hints.clear();
            self.tx = tx;
        }
        if let Some(old) = self.hints.iter_mut().find(|(s, _)| *s == stream) {
            old.1 = seek;
            return;
        }
        if self.hints.len() == KEEP {
            self.hints.remove(0);
        }
        self.hints.push((stream, seek));
    }

    /// Forget every hint (the end of a transaction; needed only to free the memory: a later
    /// transaction never gets them anyway).
    pub fn clear(&mut self) {
        self.hints.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(block: u64, id: StreamId, rel: usize) -> Seek {
        Seek {
            master: StreamId::new(1, 0),
            block,
            id,
            rel,
        }
    }

    #[test]
    fn hints_are_kept_within_their_transaction_only() {
        let mut h = SeekHints::default();
        let id = StreamId::new(5, 1);
        h.put(7, 0x100, at(0x1000, id, 40));
        assert_eq!(h.get(7, 0x100), Some(at(0x1000, id, 40)));
        assert_eq!(h.get(7, 0x200), None);
        // Another transaction (the next group, or the one after a failed one) gets nothing,
        // and its first hint drops the old ones.
        assert_eq!(h.get(8, 0x100), None);
        h.put(8, 0x200, at(0x2000, id, 10));
        assert_eq!(h.get(7, 0x100), None);
        assert_eq!(h.get(8, 0x100), None);
        assert_eq!(h.get(8, 0x200), Some(at(0x2000, id, 10)));
        // A stream's newer hint replaces its older one; the oldest stream goes past KEEP.
        h.put(8, 0x200, at(0x3000, StreamId::new(6, 0), 30));
        assert_eq!(h.get(8, 0x200), Some(at(0x3000, StreamId::new(6, 0), 30)));
        for s in 0..KEEP as u64 {
            h.put(8, 0x10_000 + s, at(s, id, 0));
        }
        assert_eq!(h.get(8, 0x200), None);
        assert_eq!(h.get(8, 0x10_000), Some(at(0, id, 0)));
    }
}
