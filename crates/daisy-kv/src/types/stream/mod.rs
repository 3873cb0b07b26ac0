//! Streams (Redis's t_stream.c): layout, invariants, crash reasoning, and (in `commands`) the
//! X commands.
//!
//! **Layout** (record type 6, `Type::Stream`, encoding `Enc::Stream`; docs/FORMAT.md section
//! 8e). The record's payload is 8 bytes: the offset of the stream's [`StreamMeta`], which the
//! record owns with everything below it:
//!
//! * [`StreamMeta`] (128 bytes): Redis's `stream` struct (length, last ID, first ID, maximal
//!   deleted ID, entries added) plus the offsets of two ordered maps and a cache of the last
//!   node;
//! * `entries`: a `PTreeMap` from a node's master ID (16 big-endian bytes, so key order is ID
//!   order) to the offset of a *block*: an object holding an 8-byte header (capacity, tag)
//!   and the node, a Redis stream listpack byte for byte (`node`), filled up to
//!   `stream-node-max-bytes` / `stream-node-max-entries` exactly as Redis fills its nodes, so
//!   XINFO's node count, approximate trimming and DUMP match Redis's. A block has room to
//!   grow: XADD appends the new entry's elements in place (its bytes and a few header words go
//!   through the redo log, not the node), a full block is moved into a larger object, and a
//!   block left behind when a new one starts is shrunk to its node's size;
//! * `groups` (0 until the first XGROUP CREATE): a `PTreeMap` from a group's name to the
//!   offset of its [`GroupMeta`] (80 bytes: last delivered ID, entries read, the highest pending
//!   ID ever added, and three more
//!   ordered maps: the group's pending entries list (ID -> delivery time, delivery count,
//!   consumer), its consumers (name -> the offset of a consumer object: seen time, name), and
//!   each consumer's own pending list (consumer offset ++ ID -> nothing): `group`).
//!
//! **Invariants** (`check`, run by `daisy pool check` through the keyspace): the meta's magic;
//! every tree sound; every block's tag, capacity and node sound (`node::validate`), its first
//! entry's ID its key, IDs strictly ascending across blocks; `length` the sum of the live
//! entries; `first` the first live entry's ID (0-0 when empty); `last` at least every entry's
//! ID; `entries_added` at least `length`; the cached last node the last key and its block;
//! each group's pending list names consumers of the group, and the consumers' own lists hold
//! exactly the group's entries, each under its owner; no pending ID is above the group's PEL
//! top; every consumer object's name is its key.
//!
//! **Crash reasoning.** As every type (module `types`): every change of a command goes
//! through the command's transaction, so a crash leaves it whole or absent. In detail: an
//! append writes the new elements past the node's end, the node's header words and count
//! element, and the meta's words, all through the redo log (a block's bytes past the node
//! belong to nobody, but an older record may still be replayed over them: they are logged
//! like any write); a block moved into a larger or smaller object is a fresh object written
//! in place (made durable no later than the commit record, section 4 of FORMAT.md) whose
//! offset replaces the old one in the tree and the meta in the same transaction, the old
//! block freed there (reusable only after the watermark passes it); a node edited in the
//! middle (XDEL, exact trimming) is rewritten through the log word by word where it changed;
//! a removed node's tree entry and block go together. Consumer group state (last IDs,
//! entries read, pending entries with their delivery counts and times, consumers and their
//! seen times) lives in the same pool and changes in the same transaction as the entries:
//! after a crash an XREADGROUP is wholly there (its entries delivered, pending, the group's
//! last ID moved) or wholly absent, and so is an XACK or XCLAIM. (Redis with an AOF
//! `everysec` can lose the last second of both, or keep an XREADGROUP's delivery while
//! losing the XACK that followed.)
//!
//! **Freeing.** A deleted or overwritten stream is freed by [`free_step`] in bounded steps:
//! inside the command when it is small, else queued on the keyspace's lazyfree queue
//! (`LazyKind::Stream`) in the command's transaction. The meta's magic changes to
//! [`META_FREEING`] at the first step; each step frees whole objects and unlinks them in the
//! same transaction (groups' maps, consumers, groups, blocks, then the maps and the meta), so
//! a crash between steps leaves every object still owned reachable and nothing freed
//! reachable. A destroyed group (XGROUP DESTROY) is unlinked from its stream and freed the
//! same way (`LazyKind::StreamGroup` when large).

pub mod commands;
pub mod group;
pub mod id;
pub mod node;
pub mod seek;

pub use commands::*;

use super::{DataType, Value};
use crate::commands::Ctx;
use crate::keyspace::{sim_fault, Enc, SimFault, Val};
use bytemuck::{Pod, Zeroable};
use daisy::{PPtr, PTreeMap, Pool, TreeMapView, Tx};
use group::GroupMeta;
use id::StreamId;
use seek::{Seek, SeekHints};
use std::collections::BTreeMap;

/// The meta's magic while the stream is live, and once it is being freed.
pub const META_MAGIC: u64 = u64::from_le_bytes(*b"DAISYSTM");
pub const META_FREEING: u64 = u64::from_le_bytes(*b"DAISYSTF");
/// A block's tag (its header's second word).
pub const BLOCK_TAG: u32 = u32::from_le_bytes(*b"XLP1");
/// Bytes of a block's header: capacity (u32, bytes of node the block can hold), tag.
pub const BLOCK_HDR: u64 = 8;
/// Redis's STREAM_LISTPACK_MAX_SIZE: no node grows past it, whatever the configuration.
pub const NODE_MAX_SIZE: usize = 1 << 30;

/// A stream's metadata (the record's payload names it).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq)]
pub struct StreamMeta {
    /// [`META_MAGIC`], or [`META_FREEING`] once freeing started.
    pub magic: u64,
    /// The nodes: `PTreeMap` master ID (16 bytes BE) -> block offset (8 bytes LE).
    pub entries: u64,
    /// The consumer groups: `PTreeMap` name -> `GroupMeta` offset (8 bytes LE); 0: none yet.
    pub groups: u64,
    /// Live entries.
    pub length: u64,
    pub last_ms: u64,
    pub last_seq: u64,
    /// Entries ever added. (The four words XADD changes are one run: one log entry.)
    pub entries_added: u64,
    /// The first live entry's ID (0-0 when empty): Redis's `first_id`.
    pub first_ms: u64,
    pub first_seq: u64,
    /// The largest ID ever deleted (XDEL) or set by XSETID MAXDELETEDID.
    pub maxdel_ms: u64,
    pub maxdel_seq: u64,
    /// The last node: its block (0 when there is none) and master ID.
    pub tail: u64,
    pub tail_ms: u64,
    pub tail_seq: u64,
    /// While freeing: which maps are already empty and being freed themselves
    /// (`FREE_ENTRIES_TREE`, `FREE_GROUPS_TREE`). 0 while live.
    pub free_phase: u64,
    pub reserved: u64,
}

const _: () = assert!(
    std::mem::size_of::<StreamMeta>() == 128,
    "docs/FORMAT.md 8f"
);

/// `free_phase` bits: the entries map holds no blocks any more and is being freed; the groups
/// map holds no groups any more and is being freed.
const FREE_ENTRIES_TREE: u64 = 1;
const FREE_GROUPS_TREE: u64 = 2;

impl StreamMeta {
    pub fn last_id(&self) -> StreamId {
        StreamId::new(self.last_ms, self.last_seq)
    }
    pub fn set_last_id(&mut self, id: StreamId) {
        (self.last_ms, self.last_seq) = (id.ms, id.seq);
    }
    pub fn first_id(&self) -> StreamId {
        StreamId::new(self.first_ms, self.first_seq)
    }
    pub fn set_first_id(&mut self, id: StreamId) {
        (self.first_ms, self.first_seq) = (id.ms, id.seq);
    }
    pub fn max_deleted(&self) -> StreamId {
        StreamId::new(self.maxdel_ms, self.maxdel_seq)
    }
    pub fn set_max_deleted(&mut self, id: StreamId) {
        (self.maxdel_ms, self.maxdel_seq) = (id.ms, id.seq);
    }
    fn tail_id(&self) -> StreamId {
        StreamId::new(self.tail_ms, self.tail_seq)
    }
}

pub fn damaged(why: impl std::fmt::Display) -> daisy::Error {
    daisy::Error::Unsupported(format!("damaged stream: {why} (run `daisy pool check`)"))
}

fn word(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

/// Write `new` over `old` at `off` through `tx`, only the 8-byte words that differ (runs of
/// them), so an edit logs what changed rather than the whole object.
pub fn write_changed(tx: &mut Tx, off: u64, old: &[u8], new: &[u8]) -> daisy::Result<()> {
    debug_assert_eq!(old.len(), new.len());
    let n = new.len();
    let mut i = 0;
    while i < n {
        let w = (i + 8).min(n);
        let same = if w - i == 8 {
            word(&old[i..w]) == word(&new[i..w])
        } else {
            old[i..w] == new[i..w]
        };
        if same {
            i = w;
            continue;
        }
        // A run of differing words; gaps of one equal word are logged too (a record entry
        // costs more than 8 bytes).
        let start = i;
        let mut end = w;
        let mut j = w;
        while j < n {
            let wj = (j + 8).min(n);
            if old[j..wj] != new[j..wj] {
                end = wj;
                j = wj;
                continue;
            }
            let wk = (wj + 8).min(n);
            if wj < n && old[wj..wk] != new[wj..wk] {
                end = wk;
                j = wk;
                continue;
            }
            break;
        }
        tx.write_bytes(off + start as u64, &new[start..end])?;
        i = end;
    }
    Ok(())
}

/// The canary's durable store (feature `sim` only; never reached otherwise).
#[cfg(feature = "sim")]
fn store_durable_now(pool: &Pool, off: u64, data: &[u8]) -> daisy::Result<()> {
    daisy::sim::store_durable_now(pool, off, data)
}

#[cfg(not(feature = "sim"))]
fn store_durable_now(_: &Pool, _: u64, _: &[u8]) -> daisy::Result<()> {
    unreachable!("canaries exist only in the simulator's build")
}

// ---- blocks ---------------------------------------------------------------------------------

/// A block's capacity for a node of `need` bytes: powers of two from 64 bytes (a small
/// stream stays small), whole 4 KiB pages past 4 KiB.
fn block_cap(need: usize) -> usize {
    if need <= 4096 {
        need.next_power_of_two().max(64)
    } else {
        need.div_ceil(4096) * 4096
    }
}

/// A block's capacity from its header (its tag checked).
fn block_capacity(tx: &Tx, off: u64) -> daisy::Result<usize> {
    let mut h = [0u8; 8];
    tx.read_bytes(off, &mut h)?;
    let cap = u32::from_le_bytes(h[..4].try_into().expect("4")) as usize;
    if u32::from_le_bytes(h[4..].try_into().expect("4")) != BLOCK_TAG {
        return Err(damaged(format!("block {off:#x} has a bad tag")));
    }
    Ok(cap)
}

/// The node held by the block at `off`.
pub fn read_node(tx: &Tx, off: u64) -> daisy::Result<Vec<u8>> {
    let cap = block_capacity(tx, off)?;
    let mut h = [0u8; 4];
    tx.read_bytes(off + BLOCK_HDR, &mut h)?;
    let len = u32::from_le_bytes(h) as usize;
    if !(crate::listpack::EMPTY_BYTES..=cap).contains(&len) {
        return Err(damaged(format!("block {off:#x}: node of {len} bytes")));
    }
    let mut lp = vec![0u8; len];
    tx.read_bytes(off + BLOCK_HDR, &mut lp)?;
    Ok(lp)
}

/// A new block holding `lp`, with room for `cap` bytes of node.
fn new_block(tx: &mut Tx, lp: &[u8], cap: usize) -> daisy::Result<u64> {
    let cap = cap.max(lp.len());
    let off = tx.alloc_uninit(BLOCK_HDR + cap as u64)?;
    let mut img = Vec::with_capacity(BLOCK_HDR as usize + lp.len());
    img.extend_from_slice(&(cap as u32).to_le_bytes());
    img.extend_from_slice(&BLOCK_TAG.to_le_bytes());
    img.extend_from_slice(lp);
    tx.write_bytes(off, &img)?;
    Ok(off)
}

// ---- the stream ---------------------------------------------------------------------------

/// A stream opened for a command: its meta (changed in DRAM, written back by
/// [`Stream::flush`]) and a view of its nodes' map.
pub struct Stream {
    pool: Pool,
    /// The meta's offset.
    pub at: u64,
    pub m: StreamMeta,
    orig: StreamMeta,
    /// The nodes' map, opened the first time a command needs it (an append to the last node
    /// does not: see [`Stream::tree`]).
    entries: std::cell::OnceCell<TreeMapView>,
}

/// What `Stream::walk` hands its callback: a node and one of its entries.
pub struct NodeRef<'a> {
    pub lp: &'a [u8],
    pub master: &'a node::Master,
    pub block: u64,
}

/// How a trim is asked for (XADD's and XTRIM's MAXLEN / MINID options).
#[derive(Clone, Copy, Debug)]
pub enum TrimTo {
    MaxLen(u64),
    MinId(StreamId),
}

#[derive(Clone, Copy, Debug)]
pub struct Trim {
    pub to: TrimTo,
    /// `~`: only whole nodes go.
    pub approx: bool,
    /// At most this many entries go (0: no limit).
    pub limit: i64,
}

/// A forward walk's bounds (see [`Stream::walk_all`]).
struct Forward {
    start: StreamId,
    end: StreamId,
    skip_tombstones: bool,
}

impl Forward {
    /// Walk node `nr` (master ID `master_id`) forward, calling `f` for each entry in bounds
    /// until it returns false; false when the walk is over (`f` said so, or an entry past
    /// `end`). With `seek` (the transaction's serial and its hints), start at the node's hint
    /// when it is at or before `start`, and leave the last entry handed to `f` as the hint.
    fn node(
        &self,
        nr: &NodeRef,
        master_id: StreamId,
        seek: Option<(u64, u64, &mut SeekHints)>,
        f: &mut impl FnMut(&NodeRef, &node::EntryAt) -> daisy::Result<bool>,
    ) -> daisy::Result<bool> {
        let (lp, m) = (nr.lp, nr.master);
        let last = lp.len() - 1;
        let mut p = m.first_entry;
        let hint = seek
            .as_ref()
            .and_then(|(tx, stream, h)| h.get(*tx, *stream))
            .filter(|h| h.block == nr.block && h.master == master_id && h.id <= self.start);
        if let Some(h) = hint {
            // Checked all the same (see `seek`): a hint that does not name an entry of this
            // node is not followed.
            let q = m.first_entry.saturating_add(h.rel);
            if q < last && node::entry_fast(lp, m, master_id, q).is_ok_and(|e| e.id == h.id) {
                p = q;
            } else {
                debug_assert!(false, "a stream seek hint that names no entry");
            }
        }
        let mut handed = None;
        let mut go = true;
        while p < last {
            let e = node::entry_fast(lp, m, master_id, p).map_err(damaged)?;
            p = e.end;
            if (self.skip_tombstones && e.deleted()) || e.id < self.start {
                continue;
            }
            if e.id > self.end {
                go = false;
                break;
            }
            handed = Some((e.id, e.flags_pos - m.first_entry));
            if !f(nr, &e)? {
                go = false;
                break;
            }
        }
        if go && p != last {
            return Err(damaged("entries run past a node's terminator"));
        }
        if let (Some((tx, stream, h)), Some((id, rel))) = (seek, handed) {
            let block = nr.block;
            h.put(
                tx,
                stream,
                Seek {
                    master: master_id,
                    block,
                    id,
                    rel,
                },
            );
        }
        Ok(go)
    }
}

impl Stream {
    /// The meta a record's payload names (8 bytes).
    pub fn meta_of(payload: &[u8]) -> Result<u64, String> {
        let b: [u8; 8] = payload
            .try_into()
            .map_err(|_| format!("stream payload of {} bytes (want 8)", payload.len()))?;
        let off = u64::from_le_bytes(b);
        if off == 0 {
            return Err("stream payload names no meta".into());
        }
        Ok(off)
    }

    /// Open the stream whose record is `v`.
    pub fn open(c: &mut Ctx, v: &Val) -> daisy::Result<Stream> {
        let mut p = [0u8; 8];
        if v.len != 8 {
            return Err(damaged(format!(
                "stream payload of {} bytes (want 8)",
                v.len
            )));
        }
        v.entry.read_tx(c.tx, v.off, &mut p)?;
        let at = Stream::meta_of(&p).map_err(damaged)?;
        Stream::open_at(c.ks.pool(), c.tx, at)
    }

    /// Open the stream whose meta is at `at`.
    pub fn open_at(pool: &Pool, tx: &Tx, at: u64) -> daisy::Result<Stream> {
        let m: StreamMeta = tx.read(PPtr::from_offset(at))?;
        if m.magic != META_MAGIC {
            return Err(damaged(format!("meta {at:#x} has a bad magic")));
        }
        Ok(Stream {
            pool: pool.clone(),
            at,
            m,
            orig: m,
            entries: std::cell::OnceCell::new(),
        })
    }

    /// A new empty stream (its record still to be written: [`Stream::payload`]).
    pub fn create(c: &mut Ctx) -> daisy::Result<Stream> {
        let entries = PTreeMap::create_in(c.tx)?;
        let m = StreamMeta {
            magic: META_MAGIC,
            entries: entries.offset(),
            ..Zeroable::zeroed()
        };
        let at = c.tx.alloc(&m)?.offset();
        Ok(Stream {
            pool: c.ks.pool().clone(),
            at,
            m,
            orig: m,
            entries: std::cell::OnceCell::new(),
        })
    }

    /// The record's payload naming this stream.
    pub fn payload(&self) -> [u8; 8] {
        self.at.to_le_bytes()
    }

    /// Write the meta's changed words back.
    pub fn flush(&mut self, tx: &mut Tx) -> daisy::Result<()> {
        if self.m != self.orig {
            write_changed(
                tx,
                self.at,
                bytemuck::bytes_of(&self.orig),
                bytemuck::bytes_of(&self.m),
            )?;
            self.orig = self.m;
        }
        Ok(())
    }

    /// The nodes' map (opened on first use: a view claims the map, which costs a lock).
    pub fn tree(&self, tx: &Tx) -> daisy::Result<&TreeMapView> {
        if self.entries.get().is_none() {
            let v = PTreeMap::view(&self.pool, tx, PPtr::from_offset(self.m.entries))?;
            let _ = self.entries.set(v);
        }
        Ok(self.entries.get().expect("just set"))
    }

    fn tree_mut(&mut self, tx: &Tx) -> daisy::Result<&mut TreeMapView> {
        self.tree(tx)?;
        Ok(self.entries.get_mut().expect("opened"))
    }

    /// Number of nodes.
    pub fn nodes(&self, tx: &Tx) -> daisy::Result<u64> {
        self.tree(tx)?.len(tx)
    }

    /// The node of rank `r`: (master ID, block).
    fn node_at(&self, tx: &Tx, r: u64) -> daisy::Result<Option<(StreamId, u64)>> {
        match self.tree(tx)?.entry_at_rank(tx, r)? {
            None => Ok(None),
            Some((k, v)) => {
                let id = StreamId::from_key(&k).ok_or_else(|| damaged("a node key's length"))?;
                if v.len() != 8 {
                    return Err(damaged("a node value's length"));
                }
                Ok(Some((id, word(&v))))
            }
        }
    }

    /// Rank of the last node whose master ID is at most `id` (None: every node is after it).
    fn node_rank_at_or_before(&self, tx: &Tx, id: StreamId) -> daisy::Result<Option<u64>> {
        let (r, found) = self.tree(tx)?.rank(tx, &id.key())?;
        Ok(if found { Some(r) } else { r.checked_sub(1) })
    }

    // ---- appending ----------------------------------------------------------------------

    /// Append entry `id` with `fields` (field, value, ...): Redis's streamAppendItem once the
    /// ID is settled (it must be above the last ID). Starts a new node when the last one is
    /// full by `stream-node-max-bytes` / `stream-node-max-entries` (0: no limit).
    pub fn append(
        &mut self,
        tx: &mut Tx,
        id: StreamId,
        fields: &[&[u8]],
        max_bytes: usize,
        max_entries: usize,
    ) -> daisy::Result<()> {
        let totelelen: usize = fields.iter().map(|f| f.len()).sum();
        let node_max = if max_bytes == 0 || max_bytes > NODE_MAX_SIZE {
            NODE_MAX_SIZE
        } else {
            max_bytes
        };
        let tail = self.m.tail;
        let mut appended = false;
        if tail != 0 {
            appended = self.append_to_tail(tx, id, fields, totelelen, node_max, max_entries)?;
        }
        if !appended {
            if tail != 0 {
                self.shrink_tail(tx)?;
            }
            let lp = node::new_node(id, fields);
            // Room as Redis preallocates a new node (STREAM_LISTPACK_MAX_PRE_ALLOCATE, or
            // stream-node-max-bytes when smaller): appends then go in place until the node
            // is full, and the block is shrunk to its node when the next one starts.
            let prealloc = if max_bytes > 0 && max_bytes < 4096 {
                max_bytes
            } else {
                4096
            };
            let off = new_block(tx, &lp, block_cap(lp.len().max(prealloc)))?;
            self.tree_mut(tx)?
                .insert(tx, &id.key(), &off.to_le_bytes())?;
            self.m.tail = off;
            (self.m.tail_ms, self.m.tail_seq) = (id.ms, id.seq);
        }
        self.m.length += 1;
        self.m.entries_added += 1;
        self.m.set_last_id(id);
        if self.m.length == 1 {
            self.m.set_first_id(id);
        }
        Ok(())
    }

    /// Append to the last node if it has room by Redis's rules; false when a new node must
    /// start.
    fn append_to_tail(
        &mut self,
        tx: &mut Tx,
        id: StreamId,
        fields: &[&[u8]],
        totelelen: usize,
        node_max: usize,
        max_entries: usize,
    ) -> daisy::Result<bool> {
        let tail = self.m.tail;
        // The block's header and the node's front (its header, counts and master fields) in
        // one read; the node is read whole below when its master fields are longer.
        let mut buf = [0u8; 256];
        tx.read_bytes(tail, &mut buf[..64])?;
        let cap = u32::from_le_bytes(buf[..4].try_into().expect("4")) as usize;
        if u32::from_le_bytes(buf[4..8].try_into().expect("4")) != BLOCK_TAG {
            return Err(damaged(format!("block {tail:#x} has a bad tag")));
        }
        let lp_bytes = u32::from_le_bytes(buf[8..12].try_into().expect("4")) as usize;
        if lp_bytes < crate::listpack::EMPTY_BYTES || lp_bytes > cap {
            return Err(damaged(format!(
                "block {tail:#x}: node of {lp_bytes} bytes"
            )));
        }
        if lp_bytes + totelelen >= node_max {
            return Ok(false);
        }
        let flen = lp_bytes.min(248);
        if flen > 56 {
            tx.read_bytes(tail + 64, &mut buf[64..8 + flen])?;
        }
        let mut whole = None;
        // `buf` holds the master entry unless its fields are long: then read the node.
        let m = match node::master_at(&buf[8..8 + flen]) {
            Ok(m) => m,
            _ => {
                let lp = whole.insert(read_node(tx, tail)?);
                node::master(lp).map_err(damaged)?
            }
        };
        let front: &[u8] = match &whole {
            Some(lp) => lp,
            None => &buf[8..8 + flen],
        };
        if max_entries != 0 && (m.count + m.deleted) as u64 >= max_entries as u64 {
            return Ok(false);
        }
        let same = node::same_fields(front, &m, fields);
        let (entry, elems) = node::entry_bytes(self.m.tail_id(), id, fields, same);
        let new_len = lp_bytes + entry.len();
        let count_len = crate::listpack::int_elem_bytes(m.count);
        let same_count_len = crate::listpack::int_elem_bytes(m.count + 1) == count_len;
        if new_len <= cap && same_count_len {
            // In place: the header words and the count element, then the new elements over
            // the terminator and a new terminator.
            let mut headb = [0u8; 16];
            let head = &mut headb[..crate::listpack::HDR + count_len];
            let numele = node::numele_after(front, elems);
            head[..4].copy_from_slice(&(new_len as u32).to_le_bytes());
            head[4..6].copy_from_slice(&numele.to_le_bytes());
            let mut cnt = [0u8; 16];
            let cl = node::int_elem(&mut cnt, m.count + 1);
            head[crate::listpack::HDR..].copy_from_slice(&cnt[..cl]);
            let head = &*head;
            let mut tail_bytes = entry;
            tail_bytes.push(crate::listpack::EOF);
            let end_at = tail + BLOCK_HDR + lp_bytes as u64 - 1;
            if sim_fault(SimFault::StreamAppendOutsideTx) {
                // The canary: the node's new bytes reach the media at once, outside the log
                // (see `daisy::sim::Fault::StreamAppendOutsideTx`).
                store_durable_now(&self.pool, tail + BLOCK_HDR, head)?;
                store_durable_now(&self.pool, end_at, &tail_bytes)?;
                return Ok(true);
            }
            tx.write_bytes(tail + BLOCK_HDR, head)?;
            tx.write_bytes(end_at, &tail_bytes)?;
            return Ok(true);
        }
        // The general way: edit the whole node in DRAM and store it back.
        let old = read_node(tx, tail)?;
        let mut lp = old.clone();
        node::replace_int(&mut lp, crate::listpack::HDR, m.count + 1);
        node::append(&mut lp, &entry, elems);
        self.store_node(tx, self.m.tail_id(), tail, &old, &lp)?;
        Ok(true)
    }

    /// Shrink the last block to its node's size before a new node starts after it (Redis's
    /// lpShrinkToFit), so a stream holds little slack.
    fn shrink_tail(&mut self, tx: &mut Tx) -> daisy::Result<()> {
        let tail = self.m.tail;
        let cap = block_capacity(tx, tail)?;
        let lp = read_node(tx, tail)?;
        let fit = lp.len().div_ceil(16) * 16;
        if cap >= fit + 64 {
            let off = new_block(tx, &lp, fit)?;
            self.relink(tx, self.m.tail_id(), tail, off)?;
        }
        Ok(())
    }

    /// Replace block `old_off` (node `key`) by `new_off` in the map and the tail cache, and
    /// free it.
    fn relink(
        &mut self,
        tx: &mut Tx,
        key: StreamId,
        old_off: u64,
        new_off: u64,
    ) -> daisy::Result<()> {
        self.tree_mut(tx)?
            .insert(tx, &key.key(), &new_off.to_le_bytes())?;
        if self.m.tail == old_off {
            self.m.tail = new_off;
        }
        tx.free(PPtr::<u8>::from_offset(old_off))
    }

    /// Store an edited node `lp` of node `key` over its block (whose node was `old`): the
    /// changed words through the log when it fits, else a larger block.
    fn store_node(
        &mut self,
        tx: &mut Tx,
        key: StreamId,
        block: u64,
        old: &[u8],
        lp: &[u8],
    ) -> daisy::Result<()> {
        let cap = block_capacity(tx, block)?;
        if lp.len() <= cap {
            let n = old.len().min(lp.len());
            write_changed(tx, block + BLOCK_HDR, &old[..n], &lp[..n])?;
            if lp.len() > n {
                tx.write_bytes(block + BLOCK_HDR + n as u64, &lp[n..])?;
            }
            return Ok(());
        }
        let off = new_block(tx, lp, block_cap(lp.len()))?;
        self.relink(tx, key, block, off)
    }

    /// Remove node `key` (block `block`) whole.
    fn remove_node(&mut self, tx: &mut Tx, key: StreamId, block: u64) -> daisy::Result<()> {
        self.tree_mut(tx)?.remove(tx, &key.key())?;
        tx.free(PPtr::<u8>::from_offset(block))?;
        if self.m.tail == block {
            match self.tree(tx)?.last(tx)? {
                None => {
                    self.m.tail = 0;
                    (self.m.tail_ms, self.m.tail_seq) = (0, 0);
                }
                Some((k, v)) => {
                    let id = StreamId::from_key(&k).ok_or_else(|| damaged("a node key"))?;
                    self.m.tail = word(&v);
                    (self.m.tail_ms, self.m.tail_seq) = (id.ms, id.seq);
                }
            }
        }
        Ok(())
    }

    // ---- reading ------------------------------------------------------------------------

    /// Walk the live entries with IDs in `start..=end` in order (or reverse order), calling
    /// `f` for each until it returns false (Redis's stream iterator: skip tombstones).
    pub fn walk(
        &self,
        tx: &Tx,
        start: StreamId,
        end: StreamId,
        rev: bool,
        f: impl FnMut(&NodeRef, &node::EntryAt) -> daisy::Result<bool>,
    ) -> daisy::Result<()> {
        self.walk_all(tx, start, end, rev, true, f)
    }

    /// [`Stream::walk`], tombstones included when `skip_tombstones` is false.
    pub fn walk_all(
        &self,
        tx: &Tx,
        start: StreamId,
        end: StreamId,
        rev: bool,
        skip_tombstones: bool,
        f: impl FnMut(&NodeRef, &node::EntryAt) -> daisy::Result<bool>,
    ) -> daisy::Result<()> {
        self.walk_inner(tx, None, start, end, rev, skip_tombstones, f)
    }

    /// [`Stream::walk`] forward from `start` to the end, starting inside a node where an
    /// earlier read of the transaction left off (`hints`, see `seek`), and remembering where
    /// this one leaves off.
    pub fn walk_seek(
        &self,
        tx: &Tx,
        hints: &mut SeekHints,
        start: StreamId,
        f: impl FnMut(&NodeRef, &node::EntryAt) -> daisy::Result<bool>,
    ) -> daisy::Result<()> {
        self.walk_inner(tx, Some(hints), start, StreamId::MAX, false, true, f)
    }

    #[allow(clippy::too_many_arguments)]
    fn walk_inner(
        &self,
        tx: &Tx,
        mut hints: Option<&mut SeekHints>,
        start: StreamId,
        end: StreamId,
        rev: bool,
        skip_tombstones: bool,
        mut f: impl FnMut(&NodeRef, &node::EntryAt) -> daisy::Result<bool>,
    ) -> daisy::Result<()> {
        if start > end {
            return Ok(());
        }
        // Reading forward from inside the last node (a consumer keeping up with producers):
        // only that node can hold the entries, and the nodes' map is not needed.
        if !rev && self.m.tail != 0 && start >= self.m.tail_id() {
            let lp = read_node(tx, self.m.tail)?;
            let m = node::master(&lp).map_err(damaged)?;
            let nr = NodeRef {
                lp: &lp,
                master: &m,
                block: self.m.tail,
            };
            let seek = hints.as_deref_mut().map(|h| (tx.serial(), self.at, h));
            let fw = Forward {
                start,
                end,
                skip_tombstones,
            };
            fw.node(&nr, self.m.tail_id(), seek, &mut f)?;
            return Ok(());
        }
        // Forward from where the transaction's last read of the stream left off, when its
        // node is still the stream's (see `seek`): then from the nodes after it.
        let mut after_hint = None;
        if let Some(h) = hints
            .as_deref()
            .and_then(|h| h.get(tx.serial(), self.at))
            .filter(|h| !rev && h.id <= start)
        {
            let named = self.tree(tx)?.get(tx, &h.master.key())?;
            if named.is_some_and(|v| v.len() == 8 && word(&v) == h.block) {
                let lp = read_node(tx, h.block)?;
                let m = node::master(&lp).map_err(damaged)?;
                let nr = NodeRef {
                    lp: &lp,
                    master: &m,
                    block: h.block,
                };
                let seek = hints.as_deref_mut().map(|hs| (tx.serial(), self.at, hs));
                let fw = Forward {
                    start,
                    end,
                    skip_tombstones,
                };
                if !fw.node(&nr, h.master, seek, &mut f)? {
                    return Ok(());
                }
                after_hint = Some(self.tree(tx)?.rank(tx, &h.master.key())?.0 + 1);
            }
        }
        let n = self.nodes(tx)?;
        if n == 0 {
            return Ok(());
        }
        let from = if rev { end } else { start };
        let mut r = match after_hint {
            Some(r) if r >= n => return Ok(()),
            Some(r) => r,
            None => match self.node_rank_at_or_before(tx, from)? {
                Some(r) => r,
                None if rev => return Ok(()),
                None => 0,
            },
        };
        loop {
            let Some((master_id, block)) = self.node_at(tx, r)? else {
                return Ok(());
            };
            if !rev && master_id > end {
                return Ok(());
            }
            let lp = read_node(tx, block)?;
            let m = node::master(&lp).map_err(damaged)?;
            let nr = NodeRef {
                lp: &lp,
                master: &m,
                block,
            };
            if rev {
                let all = node::entries_fast(&lp, &m, master_id).map_err(damaged)?;
                for e in all.iter().rev() {
                    if skip_tombstones && e.deleted() {
                        continue;
                    }
                    if e.id < start {
                        return Ok(());
                    }
                    if e.id > end {
                        continue;
                    }
                    if !f(&nr, e)? {
                        return Ok(());
                    }
                }
                if r == 0 {
                    return Ok(());
                }
                r -= 1;
            } else {
                // Forward, one entry at a time: a read that starts inside the node stops as
                // soon as it has what it wants.
                let seek = hints.as_deref_mut().map(|h| (tx.serial(), self.at, h));
                let fw = Forward {
                    start,
                    end,
                    skip_tombstones,
                };
                if !fw.node(&nr, master_id, seek, &mut f)? {
                    return Ok(());
                }
                r += 1;
                if r >= n {
                    return Ok(());
                }
            }
        }
    }

    /// The entry `id` if it is live: its fields.
    pub fn get(&self, tx: &Tx, id: StreamId) -> daisy::Result<Option<node::Fields>> {
        let mut out = None;
        self.walk(tx, id, id, false, |n, e| {
            out = Some(node::fields_of(n.lp, n.master, e).map_err(damaged)?);
            Ok(false)
        })?;
        Ok(out)
    }

    /// Whether a live entry `id` exists (streamEntryExists).
    pub fn exists(&self, tx: &Tx, id: StreamId) -> daisy::Result<bool> {
        let mut found = false;
        self.walk(tx, id, id, false, |_, _| {
            found = true;
            Ok(false)
        })?;
        Ok(found)
    }

    /// The first or last entry's ID, tombstones skipped or not (streamGetEdgeID): None when
    /// there is none.
    pub fn edge_id(
        &self,
        tx: &Tx,
        first: bool,
        skip_tombstones: bool,
    ) -> daisy::Result<Option<StreamId>> {
        let mut out = None;
        self.walk_all(
            tx,
            StreamId::MIN,
            StreamId::MAX,
            !first,
            skip_tombstones,
            |_, e| {
                out = Some(e.id);
                Ok(false)
            },
        )?;
        Ok(out)
    }

    /// The last live entry's ID (streamLastValidID); 0-0 for an empty stream.
    pub fn last_valid_id(&self, tx: &Tx) -> daisy::Result<StreamId> {
        Ok(self.edge_id(tx, false, true)?.unwrap_or(StreamId::MIN))
    }

    // ---- deleting -----------------------------------------------------------------------

    /// Delete the live entry `id` (streamDeleteItem); whether it was there. The node goes
    /// when it was its last live entry.
    pub fn delete(&mut self, tx: &mut Tx, id: StreamId) -> daisy::Result<bool> {
        let Some(r) = self.node_rank_at_or_before(tx, id)? else {
            return Ok(false);
        };
        let Some((master_id, block)) = self.node_at(tx, r)? else {
            return Ok(false);
        };
        let old = read_node(tx, block)?;
        let m = node::master(&old).map_err(damaged)?;
        let all = node::entries_fast(&old, &m, master_id).map_err(damaged)?;
        let Some(e) = all.iter().find(|e| e.id == id && !e.deleted()) else {
            return Ok(false);
        };
        if m.count == 1 {
            self.remove_node(tx, master_id, block)?;
        } else {
            let mut lp = old.clone();
            // Flags first: the counts before it keep their places.
            node::replace_int(&mut lp, e.flags_pos, e.flags | node::F_DELETED);
            let d = node::replace_int(&mut lp, m.count_pos, m.count - 1);
            let deleted_pos = (m.deleted_pos as isize + d) as usize;
            node::replace_int(&mut lp, deleted_pos, m.deleted + 1);
            self.store_node(tx, master_id, block, &old, &lp)?;
        }
        self.m.length -= 1;
        Ok(true)
    }

    /// Trim (streamTrim): whole nodes from the head while they may go, then, unless `approx`,
    /// entries of the first remaining node flagged deleted; at most `limit` entries (0: any).
    /// Returns how many went.
    pub fn trim(&mut self, tx: &mut Tx, t: &Trim) -> daisy::Result<u64> {
        let mut deleted: u64 = 0;
        loop {
            if let TrimTo::MaxLen(max) = t.to {
                if self.m.length <= max {
                    break;
                }
            }
            let Some((master_id, block)) = self.node_at(tx, 0)? else {
                break;
            };
            let old = read_node(tx, block)?;
            let m = node::master(&old).map_err(damaged)?;
            let entries = m.count.max(0) as u64;
            if t.limit != 0 && (deleted + entries) as i64 > t.limit {
                break;
            }
            let all = node::entries_fast(&old, &m, master_id).map_err(damaged)?;
            let remove = match t.to {
                TrimTo::MaxLen(max) => self.m.length - entries >= max,
                TrimTo::MinId(min) => all.last().is_some_and(|e| e.id < min),
            };
            if remove {
                self.remove_node(tx, master_id, block)?;
                self.m.length -= entries;
                deleted += entries;
                continue;
            }
            if t.approx {
                break;
            }
            // Flag entries deleted from the node's start.
            let mut lp = old.clone();
            let mut shift: isize = 0;
            let mut from_node = 0i64;
            for e in &all {
                let stop = match t.to {
                    TrimTo::MaxLen(max) => self.m.length <= max,
                    TrimTo::MinId(min) => e.id >= min,
                };
                if stop {
                    break;
                }
                if !e.deleted() {
                    let at = (e.flags_pos as isize + shift) as usize;
                    shift += node::replace_int(&mut lp, at, e.flags | node::F_DELETED);
                    from_node += 1;
                    self.m.length -= 1;
                }
            }
            let d = node::replace_int(&mut lp, m.count_pos, m.count - from_node);
            let deleted_pos = (m.deleted_pos as isize + d) as usize;
            node::replace_int(&mut lp, deleted_pos, m.deleted + from_node);
            self.store_node(tx, master_id, block, &old, &lp)?;
            deleted += from_node as u64;
            break;
        }
        if self.m.length == 0 {
            self.m.set_first_id(StreamId::MIN);
        } else if deleted > 0 {
            let first = self.edge_id(tx, true, true)?.unwrap_or(StreamId::MAX);
            self.m.set_first_id(first);
        }
        Ok(deleted)
    }

    // ---- consumer groups ------------------------------------------------------------------

    /// The groups' map, if the stream has one (`create`: make it when missing).
    pub fn groups_view(&mut self, c: &mut Ctx, create: bool) -> daisy::Result<Option<TreeMapView>> {
        if self.m.groups == 0 {
            if !create {
                return Ok(None);
            }
            self.m.groups = PTreeMap::create_in(c.tx)?.offset();
        }
        // A view an earlier command of the transaction gave back, if any (`crate::views`).
        Ok(Some(c.ks.tree_view(c.tx, self.m.groups)?))
    }

    /// Number of consumer groups.
    pub fn group_count(&mut self, c: &mut Ctx) -> daisy::Result<u64> {
        match self.groups_view(c, false)? {
            Some(v) => v.len(c.tx),
            None => Ok(0),
        }
    }

    // ---- lag (streamEstimateDistanceFromFirstEverEntry & co) ------------------------------

    /// Whether `start..=end` (or `start..`) may hold a tombstone (streamRangeHasTombstones).
    pub fn range_has_tombstones(&self, start: StreamId, end: Option<StreamId>) -> bool {
        let maxdel = self.m.max_deleted();
        if self.m.length == 0 || maxdel.is_zero() {
            return false;
        }
        if self.m.first_id() > maxdel {
            return false;
        }
        let end = end.unwrap_or(StreamId::MAX);
        start <= maxdel && maxdel <= end
    }

    /// The logical read counter of `id`, or None when it cannot be known.
    pub fn estimate_distance(&self, id: StreamId) -> Option<u64> {
        let s = &self.m;
        if s.entries_added == 0 {
            return Some(0);
        }
        if s.length == 0 && id <= s.last_id() {
            return Some(s.entries_added);
        }
        if id == s.last_id() {
            return Some(s.entries_added);
        } else if id > s.last_id() {
            return None;
        }
        let maxdel = s.max_deleted();
        if maxdel.is_zero() || maxdel < s.first_id() {
            if id < s.first_id() {
                return Some(s.entries_added - s.length);
            } else if id == s.first_id() {
                return Some(s.entries_added - s.length + 1);
            }
        }
        None
    }

    /// A group's lag (streamReplyWithCGLag): None when it cannot be known.
    pub fn lag(&self, g: &GroupMeta) -> Option<i64> {
        let added = self.m.entries_added as i64;
        if self.m.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != group::INVALID_ENTRIES_READ
            && !self.range_has_tombstones(g.last_id(), None)
        {
            return Some(added.wrapping_sub(g.entries_read));
        }
        self.estimate_distance(g.last_id())
            .map(|read| added.wrapping_sub(read as i64))
    }
}

// ---- what the keyspace and checkers need ----------------------------------------------------

pub struct Streams;

/// A stream as a checker reads it, committed and read-only.
pub struct Snapshot {
    pub meta: StreamMeta,
    /// (master ID, block, node bytes), in order.
    pub nodes: Vec<(StreamId, u64, Vec<u8>)>,
    pub groups: Vec<group::GroupSnapshot>,
    /// Objects the stream owns (meta, maps, blocks, groups, consumers).
    pub objects: Vec<u64>,
}

fn read_meta(pool: &Pool, at: u64) -> Result<StreamMeta, String> {
    pool.try_read(PPtr::<StreamMeta>::from_offset(at))
        .map_err(|e| format!("stream meta {at:#x}: {e}"))
}

/// Read the stream whose meta is at `at` (live or being freed) as a checker: what it owns,
/// and, for a live one, its nodes and groups.
pub fn snapshot(pool: &Pool, at: u64) -> Result<Snapshot, String> {
    let meta = read_meta(pool, at)?;
    if meta.magic != META_MAGIC && meta.magic != META_FREEING {
        return Err(format!("stream meta {at:#x} has a bad magic"));
    }
    let mut objects = vec![at];
    let mut nodes = Vec::new();
    if meta.entries != 0 {
        objects.extend(daisy::tree_objects(pool, meta.entries).map_err(|e| e.to_string())?);
        if meta.free_phase & FREE_ENTRIES_TREE == 0 {
            for (k, v) in daisy::tree_entries(pool, meta.entries).map_err(|e| e.to_string())? {
                let id = StreamId::from_key(&k).ok_or("a node key is not 16 bytes")?;
                if v.len() != 8 {
                    return Err("a node value is not 8 bytes".into());
                }
                let block = word(&v);
                objects.push(block);
                let mut h = [0u8; 12];
                pool.try_read_bytes(block, &mut h)
                    .map_err(|e| format!("block {block:#x}: {e}"))?;
                let cap = u32::from_le_bytes(h[..4].try_into().expect("4")) as usize;
                if u32::from_le_bytes(h[4..8].try_into().expect("4")) != BLOCK_TAG {
                    return Err(format!("block {block:#x} has a bad tag"));
                }
                let len = u32::from_le_bytes(h[8..].try_into().expect("4")) as usize;
                if len > cap || len < crate::listpack::EMPTY_BYTES {
                    return Err(format!(
                        "block {block:#x}: node of {len} bytes, capacity {cap}"
                    ));
                }
                let mut lp = vec![0u8; len];
                pool.try_read_bytes(block + BLOCK_HDR, &mut lp)
                    .map_err(|e| format!("block {block:#x}: {e}"))?;
                nodes.push((id, block, lp));
            }
        }
    }
    let mut groups = Vec::new();
    if meta.groups != 0 {
        objects.extend(daisy::tree_objects(pool, meta.groups).map_err(|e| e.to_string())?);
        if meta.free_phase & FREE_GROUPS_TREE == 0 {
            for (k, v) in daisy::tree_entries(pool, meta.groups).map_err(|e| e.to_string())? {
                if v.len() != 8 {
                    return Err("a group value is not 8 bytes".into());
                }
                let g = group::snapshot(pool, k, word(&v))?;
                objects.extend(g.objects.iter().copied());
                groups.push(g);
            }
        }
    }
    Ok(Snapshot {
        meta,
        nodes,
        groups,
        objects,
    })
}

impl Snapshot {
    /// The stream's invariants that do not hold.
    pub fn problems(&self, pool: &Pool) -> Vec<String> {
        let mut p = Vec::new();
        let m = &self.meta;
        if m.magic != META_MAGIC {
            return p; // being freed: only ownership matters
        }
        if m.free_phase != 0 {
            p.push("a live stream has a freeing phase".into());
        }
        for (what, off) in [("nodes", m.entries), ("groups", m.groups)] {
            if off == 0 {
                if what == "nodes" {
                    p.push("stream has no nodes' map".into());
                }
                continue;
            }
            match PTreeMap::open(pool, PPtr::from_offset(off)) {
                Ok(t) => p.extend(
                    t.check()
                        .problems
                        .into_iter()
                        .map(|x| format!("stream {what} map: {x}")),
                ),
                Err(e) => p.push(format!("stream {what} map: {e}")),
            }
        }
        let mut live = 0u64;
        let mut prev_last: Option<StreamId> = None;
        let mut first_live = None;
        let mut max_id = StreamId::MIN;
        for (id, block, lp) in &self.nodes {
            match node::validate(lp, *id) {
                Err(e) => p.push(format!("node {id}: {e}")),
                Ok(s) => {
                    if prev_last.is_some_and(|l| s.first <= l) {
                        p.push(format!("node {id} does not come after the node before it"));
                    }
                    prev_last = Some(s.last);
                    max_id = max_id.max(s.last);
                    live += s.live;
                    if first_live.is_none() {
                        first_live = s.first_live;
                    }
                }
            }
            let _ = block;
        }
        if live != m.length {
            p.push(format!(
                "stream length {} but {live} live entries",
                m.length
            ));
        }
        let want_first = first_live.unwrap_or(StreamId::MIN);
        if m.first_id() != want_first {
            p.push(format!(
                "stream first ID {} but the first live entry is {want_first}",
                m.first_id()
            ));
        }
        if !self.nodes.is_empty() && m.last_id() < max_id {
            p.push(format!(
                "stream last ID {} below entry {max_id}",
                m.last_id()
            ));
        }
        if m.entries_added < m.length {
            p.push("stream entries-added below its length".into());
        }
        match self.nodes.last() {
            None if m.tail != 0 => p.push("stream caches a last node but has none".into()),
            Some((id, block, _)) if m.tail != *block || m.tail_id() != *id => {
                p.push("stream's cached last node is not its last node".into())
            }
            _ => {}
        }
        for g in &self.groups {
            p.extend(
                g.problems(pool)
                    .into_iter()
                    .map(|x| format!("group {:?}: {x}", String::from_utf8_lossy(&g.name))),
            );
        }
        // Owned once.
        let mut seen = std::collections::HashSet::new();
        if self.objects.iter().any(|o| !seen.insert(*o)) {
            p.push("an object is owned twice inside the stream".into());
        }
        p
    }

    /// The entries (live ones) with their fields, in order.
    pub fn entries(&self) -> Result<Vec<(StreamId, node::Fields)>, String> {
        let mut out = Vec::new();
        for (id, _, lp) in &self.nodes {
            let m = node::master(lp)?;
            for e in node::entries(lp, &m, *id)? {
                if !e.deleted() {
                    out.push((e.id, node::fields_of(lp, &m, &e)?));
                }
            }
        }
        Ok(out)
    }
}

/// A stream as the tests' models see it: entries, the meta's counters and IDs, and the
/// groups (name -> last ID, entries read, pending (ID -> consumer, delivery count), consumer
/// names). Delivery and seen times are left out (they depend on the clock).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StreamValue {
    pub entries: Vec<(StreamId, node::Fields)>,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Vec<u8>, GroupValue>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupValue {
    pub last_id: StreamId,
    pub entries_read: i64,
    pub pending: BTreeMap<StreamId, (Vec<u8>, u64)>,
    pub consumers: Vec<Vec<u8>>,
}

impl DataType for Streams {
    fn owned(&self, pool: &Pool, _enc: Enc, payload: &[u8]) -> Result<Vec<u64>, String> {
        Ok(snapshot(pool, Stream::meta_of(payload)?)?.objects)
    }

    fn check(&self, pool: &Pool, _enc: Enc, payload: &[u8]) -> Vec<String> {
        let at = match Stream::meta_of(payload) {
            Ok(a) => a,
            Err(e) => return vec![e],
        };
        match snapshot(pool, at) {
            Err(e) => vec![e],
            Ok(s) if s.meta.magic != META_MAGIC => {
                vec!["a live stream's meta is being freed".into()]
            }
            Ok(s) => s.problems(pool),
        }
    }

    fn dump(&self, pool: &Pool, _enc: Enc, payload: &[u8]) -> Result<Value, String> {
        let s = snapshot(pool, Stream::meta_of(payload)?)?;
        let m = &s.meta;
        let mut groups = BTreeMap::new();
        for g in &s.groups {
            let names: std::collections::HashMap<u64, Vec<u8>> = g
                .consumers
                .iter()
                .map(|c| (c.off, c.name.clone()))
                .collect();
            groups.insert(
                g.name.clone(),
                GroupValue {
                    last_id: g.meta.last_id(),
                    entries_read: g.meta.entries_read,
                    pending: g
                        .pel
                        .iter()
                        .map(|(id, n)| {
                            let who = names.get(&n.consumer).cloned().unwrap_or_default();
                            (*id, (who, n.count))
                        })
                        .collect(),
                    consumers: g.consumers.iter().map(|c| c.name.clone()).collect(),
                },
            );
        }
        Ok(Value::Stream(Box::new(StreamValue {
            entries: s.entries()?,
            last_id: m.last_id(),
            first_id: m.first_id(),
            max_deleted: m.max_deleted(),
            entries_added: m.entries_added,
            groups,
        })))
    }
}

// ---- freeing -------------------------------------------------------------------------------

/// Free the stream whose meta is at `at` (its record is gone), about `budget` objects per
/// call, inside `tx`: true once everything is freed. See the module's "Freeing".
pub fn free_step(pool: &Pool, tx: &mut Tx, at: u64, budget: u32) -> daisy::Result<bool> {
    let mp = PPtr::<StreamMeta>::from_offset(at);
    let mut m: StreamMeta = tx.read(mp)?;
    if m.magic != META_MAGIC && m.magic != META_FREEING {
        return Err(damaged(format!("meta {at:#x} has a bad magic")));
    }
    let orig = m;
    m.magic = META_FREEING;
    let mut budget = budget.max(1) as i64;
    let low = |tx: &Tx| tx.log_room() < 16 * 1024;
    // Groups first, one at a time.
    if m.groups != 0 && m.free_phase & FREE_GROUPS_TREE == 0 {
        let mut v = PTreeMap::view(pool, tx, PPtr::from_offset(m.groups))?;
        while budget > 0 && !low(tx) {
            let Some((name, val)) = v.last(tx)? else {
                m.free_phase |= FREE_GROUPS_TREE;
                break;
            };
            if val.len() != 8 {
                return Err(damaged("a group value's length"));
            }
            let g = word(&val);
            if !group::free_step(pool, tx, g, &mut budget)? {
                break;
            }
            v.remove(tx, &name)?;
            budget -= 1;
        }
    }
    if m.groups != 0 && m.free_phase & FREE_GROUPS_TREE != 0 && budget > 0 && !low(tx) {
        if PTreeMap::free_step(pool, tx, PPtr::from_offset(m.groups), budget as u32)? {
            m.groups = 0;
        }
        budget -= 32;
    }
    // Then the nodes, from the end, a batch at a time.
    if m.groups == 0 && m.entries != 0 && m.free_phase & FREE_ENTRIES_TREE == 0 {
        let mut v = PTreeMap::view(pool, tx, PPtr::from_offset(m.entries))?;
        while budget > 0 && !low(tx) {
            let n = v.len(tx)?;
            if n == 0 {
                m.free_phase |= FREE_ENTRIES_TREE;
                break;
            }
            let k = (budget as u64).min(n).min(64);
            let batch = v.range_by_rank(tx, n - k, n - 1, false)?;
            for (_, val) in &batch {
                if val.len() != 8 {
                    return Err(damaged("a node value's length"));
                }
                tx.free(PPtr::<u8>::from_offset(word(val)))?;
            }
            v.remove_range_by_rank(tx, n - k, n - 1)?;
            budget -= k as i64;
        }
    }
    if m.groups == 0
        && m.entries != 0
        && m.free_phase & FREE_ENTRIES_TREE != 0
        && budget > 0
        && PTreeMap::free_step(pool, tx, PPtr::from_offset(m.entries), budget as u32)?
    {
        m.entries = 0;
    }
    if m.groups == 0 && m.entries == 0 {
        tx.free(mp)?;
        return Ok(true);
    }
    if m != orig {
        write_changed(tx, at, bytemuck::bytes_of(&orig), bytemuck::bytes_of(&m))?;
    }
    Ok(false)
}

/// Objects a stream owns, counted cheaply as Redis's lazyfreeGetFreeEffort counts them: its
/// nodes, plus per consumer group one object and the first group's pending entries (an
/// estimate for all groups). Whether freeing it may wait for the lazyfree queue: a stream
/// whose groups were all destroyed is as small as its nodes (Redis's "lazy free a stream
/// with deleted cgroup").
pub fn is_small(tx: &Tx, pool: &Pool, at: u64, threshold: u64) -> daisy::Result<bool> {
    let m: StreamMeta = tx.read(PPtr::from_offset(at))?;
    if m.magic != META_MAGIC {
        return Ok(false);
    }
    let mut effort = PTreeMap::view(pool, tx, PPtr::from_offset(m.entries))?.len(tx)?;
    if m.groups != 0 {
        let groups = PTreeMap::view(pool, tx, PPtr::from_offset(m.groups))?;
        let count = groups.len(tx)?;
        if let Some((_, val)) = groups.first(tx)? {
            if val.len() != 8 {
                return Err(damaged("a group value's length"));
            }
            let g: group::GroupMeta = tx.read(PPtr::from_offset(word(&val)))?;
            let pel = PTreeMap::view(pool, tx, PPtr::from_offset(g.pel))?.len(tx)?;
            effort = effort.saturating_add(count.saturating_mul(1 + pel));
        }
    }
    Ok(effort <= threshold)
}

// ---- COPY ------------------------------------------------------------------------------------

/// A copy of the stream whose payload is `payload` (COPY: Redis's streamDup): the same nodes,
/// counters and groups in new objects. Returns the new payload.
pub fn copy(c: &mut Ctx, payload: &[u8]) -> daisy::Result<Vec<u8>> {
    let at = Stream::meta_of(payload).map_err(damaged)?;
    let (m, nodes) = {
        let src = Stream::open_at(c.ks.pool(), c.tx, at)?;
        let n = src.nodes(c.tx)?;
        let mut nodes = Vec::with_capacity(n as usize);
        for r in 0..n {
            let (id, block) = src
                .node_at(c.tx, r)?
                .ok_or_else(|| damaged("a node vanished"))?;
            nodes.push((id, read_node(c.tx, block)?));
        }
        (src.m, nodes)
    };
    let groups = group::read_all(c, m.groups)?;
    let mut dst = Stream::create(c)?;
    for (id, lp) in &nodes {
        let off = new_block(c.tx, lp, lp.len())?;
        dst.tree_mut(c.tx)?
            .insert(c.tx, &id.key(), &off.to_le_bytes())?;
        dst.m.tail = off;
        (dst.m.tail_ms, dst.m.tail_seq) = (id.ms, id.seq);
    }
    dst.m.length = m.length;
    dst.m.set_last_id(m.last_id());
    dst.m.set_first_id(m.first_id());
    dst.m.set_max_deleted(m.max_deleted());
    dst.m.entries_added = m.entries_added;
    for g in &groups {
        group::create_from(c, &mut dst, g)?;
    }
    dst.flush(c.tx)?;
    Ok(dst.payload().to_vec())
}

pub use group::GroupDump;

/// Everything of a stream as DUMP serializes it (and RESTORE rebuilds it from).
#[derive(Clone, Debug, PartialEq)]
pub struct StreamDump {
    /// (master ID, node), in order.
    pub nodes: Vec<(StreamId, Vec<u8>)>,
    pub length: u64,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    pub groups: Vec<GroupDump>,
}

/// The stream of record `v` as DUMP serializes it.
pub fn dump_of(c: &mut Ctx, v: &Val) -> daisy::Result<StreamDump> {
    let s = Stream::open(c, v)?;
    let n = s.nodes(c.tx)?;
    let mut nodes = Vec::with_capacity(n as usize);
    for r in 0..n {
        let (id, block) = s
            .node_at(c.tx, r)?
            .ok_or_else(|| damaged("a node vanished"))?;
        nodes.push((id, read_node(c.tx, block)?));
    }
    let m = s.m;
    drop(s);
    Ok(StreamDump {
        nodes,
        length: m.length,
        last_id: m.last_id(),
        first_id: m.first_id(),
        max_deleted: m.max_deleted(),
        entries_added: m.entries_added,
        groups: group::read_all(c, m.groups)?,
    })
}

/// Check a restored stream before it is built (what Daisy relies on, beyond what Redis
/// checks under `sanitize-dump-payload yes`); Redis's error text on failure.
pub fn validate_dump(d: &StreamDump) -> Result<(), &'static str> {
    const E: &str = "ERR Bad data format";
    let mut live = 0u64;
    let mut prev: Option<StreamId> = None;
    let mut first_live = None;
    for (id, lp) in &d.nodes {
        let s = node::validate(lp, *id).map_err(|_| E)?;
        if prev.is_some_and(|p| s.first <= p) {
            return Err(E);
        }
        prev = Some(s.last);
        live += s.live;
        if first_live.is_none() {
            first_live = s.first_live;
        }
        if lp.len() > NODE_MAX_SIZE {
            return Err(E);
        }
    }
    if live != d.length || d.entries_added < d.length {
        return Err(E);
    }
    if prev.is_some_and(|p| p > d.last_id) {
        return Err(E);
    }
    let _ = first_live;
    group::validate_dumps(&d.groups)
}

/// Build a stream from a validated dump (RESTORE); returns the record's payload. The first
/// ID is computed from the entries (Redis keeps the payload's; a payload made by Redis holds
/// the same).
pub fn restore(c: &mut Ctx, d: &StreamDump) -> daisy::Result<Vec<u8>> {
    let mut s = Stream::create(c)?;
    let mut first_live = None;
    for (id, lp) in &d.nodes {
        let sum = node::validate(lp, *id).map_err(damaged)?;
        if first_live.is_none() {
            first_live = sum.first_live;
        }
        let off = new_block(c.tx, lp, lp.len())?;
        s.tree_mut(c.tx)?
            .insert(c.tx, &id.key(), &off.to_le_bytes())?;
        s.m.tail = off;
        (s.m.tail_ms, s.m.tail_seq) = (id.ms, id.seq);
    }
    s.m.length = d.length;
    s.m.set_last_id(d.last_id);
    s.m.set_first_id(first_live.unwrap_or(StreamId::MIN));
    s.m.set_max_deleted(d.max_deleted);
    s.m.entries_added = d.entries_added;
    for g in &d.groups {
        let mut g = g.clone();
        if g.entries_read == group::ESTIMATE_ENTRIES_READ {
            g.entries_read = s
                .estimate_distance(g.last_id)
                .map_or(group::INVALID_ENTRIES_READ, |n| n as i64);
        }
        group::create_from(c, &mut s, &g)?;
    }
    s.flush(c.tx)?;
    Ok(s.payload().to_vec())
}

/// Redis's rax node count for a set of 16-byte keys (XINFO STREAM's `radix-tree-nodes`): the
/// root, every branching point, every child of one, every key's end.
pub fn rax_nodes(keys: &[[u8; 16]]) -> u64 {
    if keys.is_empty() {
        return 1;
    }
    let mut set: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    set.insert(&[]);
    for k in keys {
        set.insert(&k[..]);
    }
    for w in keys.windows(2) {
        let lcp = w[0]
            .iter()
            .zip(w[1].iter())
            .take_while(|(a, b)| a == b)
            .count();
        set.insert(&w[0][..lcp]);
        set.insert(&w[0][..lcp + 1]);
        set.insert(&w[1][..lcp + 1]);
    }
    set.len() as u64
}
