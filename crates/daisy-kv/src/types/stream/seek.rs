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
//! A hint says: "in the node held by block `block`, the entry with ID `id` starts `rel` bytes
//! after the node's master entry". Why it stays true for the rest of the transaction that
//! learned it, and is never used in another:
//! * Entries never move inside a node once written: an append writes after the last entry; a
//!   deletion (XDEL, exact trimming) only flags an entry (`node::F_DELETED`: the flags stay a
//!   one-byte element, 0..=3) and changes the master entry's counts, whose elements may change
//!   length, which moves every entry by the same amount: so the hint counts from the end of
//!   the master entry (`node::Master::first_entry`), not from the node's start. A node is
//!   otherwise rewritten only into a new block (moved to a larger or smaller one, RESTORE, a
//!   new stream): under another offset.
//! * Within one transaction a block's offset names one node: a block freed by the transaction
//!   (its node removed, moved, its stream deleted) is not handed out again before the
//!   transaction commits (FORMAT.md section 7, "Reuse after free"; `crate::views` relies on
//!   the same), and a read reaches a block only through its stream's map or tail, so a freed
//!   block is never looked up again.
//! * Across transactions none of this holds (a block freed and committed can hold another
//!   node, of another stream, the next time; a transaction that failed may have written the
//!   node the hint was learned from), so each hint carries its transaction's
//!   [`daisy::Tx::serial`] and is never handed to another transaction: a failed one, and the
//!   commands run again after it, get a new serial.
//!
//! The reader still checks what it is given (the entry at the hint parses and has the hint's
//! ID) and walks from the node's first entry when not: a hint can only save work.

use super::id::StreamId;

/// Hints kept at most (a few streams' consumer groups read in one round).
const KEEP: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hint {
    block: u64,
    id: StreamId,
    rel: usize,
}

/// The hints of one transaction (see the module's comment).
#[derive(Debug, Default)]
pub struct SeekHints {
    /// The transaction that learned them ([`daisy::Tx::serial`]).
    tx: u64,
    hints: Vec<Hint>,
}

impl SeekHints {
    /// Where an entry of the node in `block` starts, learned by transaction `tx`: its ID and
    /// its offset after the master entry. None for another transaction's hints.
    pub fn get(&self, tx: u64, block: u64) -> Option<(StreamId, usize)> {
        if self.tx != tx {
            return None;
        }
        self.hints
            .iter()
            .find(|h| h.block == block)
            .map(|h| (h.id, h.rel))
    }

    /// Remember that in the node of `block` entry `id` starts `rel` bytes after the master
    /// entry (transaction `tx`): replaces that block's hint; other transactions' hints go.
    pub fn put(&mut self, tx: u64, block: u64, id: StreamId, rel: usize) {
        if self.tx != tx {
            self.hints.clear();
            self.tx = tx;
        }
        let h = Hint { block, id, rel };
        if let Some(old) = self.hints.iter_mut().find(|h| h.block == block) {
            *old = h;
            return;
        }
        if self.hints.len() == KEEP {
            self.hints.remove(0);
        }
        self.hints.push(h);
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

    #[test]
    fn hints_are_kept_within_their_transaction_only() {
        let mut h = SeekHints::default();
        let id = StreamId::new(5, 1);
        h.put(7, 0x1000, id, 40);
        assert_eq!(h.get(7, 0x1000), Some((id, 40)));
        assert_eq!(h.get(7, 0x2000), None);
        // Another transaction (the next group, or the one after a failed one) gets nothing,
        // and its first hint drops the old ones.
        assert_eq!(h.get(8, 0x1000), None);
        h.put(8, 0x2000, id, 10);
        assert_eq!(h.get(7, 0x1000), None);
        assert_eq!(h.get(8, 0x1000), None);
        assert_eq!(h.get(8, 0x2000), Some((id, 10)));
        // A block's newer hint replaces its older one; the oldest block goes past KEEP.
        h.put(8, 0x2000, StreamId::new(6, 0), 30);
        assert_eq!(h.get(8, 0x2000), Some((StreamId::new(6, 0), 30)));
        for b in 0..KEEP as u64 {
            h.put(8, 0x10_000 + b, id, 0);
        }
        assert_eq!(h.get(8, 0x2000), None);
        assert_eq!(h.get(8, 0x10_000), Some((id, 0)));
    }
}
