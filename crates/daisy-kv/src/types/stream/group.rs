//! Consumer groups (Redis's `streamCG`, `streamConsumer`, `streamNACK`) in the pool.
//!
//! A group is a [`GroupMeta`] (80 bytes) named by the stream's groups map, owning three
//! ordered maps:
//! * `pel`: the pending entries list, ID (16 bytes BE) -> [`Nack`] (24 bytes: last delivery
//!   time in ms, delivery count, the owning consumer's object offset);
//! * `consumers`: name -> the offset of a consumer object (`seen_time` i64 LE, the name's
//!   length u64 LE, the name);
//! * `cpel`: each consumer's own pending list, consumer offset (8 bytes BE) ++ ID (16 bytes
//!   BE) -> nothing, so a consumer's entries are one key range, in ID order.
//!
//! Invariants (`GroupSnapshot::problems`): every NACK names a consumer of the group; the keys
//! of `cpel` are exactly (owner, ID) for every entry of `pel`; consumers are distinct objects
//! whose names are their keys; `entries_read` is -1 or more; no key of `pel` is above the
//! meta's PEL top (so a delivery of an ID above it skips the look for an earlier owner).
//!
//! Crash reasoning: every change goes through the command's transaction, the NACK and its
//! `cpel` key together (an XACK removes both, an XCLAIM moves the `cpel` key and rewrites the
//! NACK in place), so after a crash the group is as before or after the whole command. A
//! deleted consumer's pending entries go with it in its command. A destroyed group is
//! unlinked from its stream and freed by [`free_step`] (in the command when small, else on
//! the lazyfree queue), which frees its maps, then its consumers, then the group, each step
//! unlinking what it freed in the same transaction.

use super::id::StreamId;
use super::{damaged, word, write_changed, Stream};
use crate::commands::Ctx;
use bytemuck::{Pod, Zeroable};
use daisy::{PPtr, PTreeMap, Pool, TreeMapView, Tx};
use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};
use std::ops::Bound;

/// Redis's SCG_INVALID_ENTRIES_READ.
pub const INVALID_ENTRIES_READ: i64 = -1;
/// In a `GroupDump` read from an old payload (RDB_TYPE_STREAM_LISTPACKS): the read counter is
/// to be estimated from the stream once it is built, as Redis 7.0 does when it loads one.
pub const ESTIMATE_ENTRIES_READ: i64 = i64::MIN;

/// A consumer group.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq)]
pub struct GroupMeta {
    /// The last delivered ID.
    pub last_ms: u64,
    pub last_seq: u64,
    /// The logical read counter (-1: unknown).
    pub entries_read: i64,
    pub pel: u64,
    pub consumers: u64,
    pub cpel: u64,
    /// No pending entry's ID is above this (raised when one is added above it, never
    /// lowered): a delivery of a newer ID needs no look into the PEL for an earlier owner.
    pub pel_top_ms: u64,
    pub pel_top_seq: u64,
    /// While freeing: the consumers map holds no consumers any more (bit 0).
    pub free_phase: u64,
    pub reserved: u64,
}

const _: () = assert!(std::mem::size_of::<GroupMeta>() == 80, "docs/FORMAT.md 8f");

impl GroupMeta {
    pub fn last_id(&self) -> StreamId {
        StreamId::new(self.last_ms, self.last_seq)
    }
    pub fn set_last_id(&mut self, id: StreamId) {
        (self.last_ms, self.last_seq) = (id.ms, id.seq);
    }
    pub fn pel_top(&self) -> StreamId {
        StreamId::new(self.pel_top_ms, self.pel_top_seq)
    }
}

/// A pending entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nack {
    /// Last delivery, ms since the epoch.
    pub time: i64,
    pub count: u64,
    /// The owner's consumer object.
    pub consumer: u64,
}

impl Nack {
    pub fn to_bytes(self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..8].copy_from_slice(&self.time.to_le_bytes());
        b[8..16].copy_from_slice(&self.count.to_le_bytes());
        b[16..].copy_from_slice(&self.consumer.to_le_bytes());
        b
    }
    pub fn from_bytes(b: &[u8]) -> Option<Nack> {
        if b.len() != 24 {
            return None;
        }
        Some(Nack {
            time: word(&b[..8]) as i64,
            count: word(&b[8..16]),
            consumer: word(&b[16..]),
        })
    }
}

/// A consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumer {
    pub off: u64,
    pub seen_ms: i64,
    pub name: Vec<u8>,
}

/// Bytes of a consumer object's header (seen time, name length).
const CONSUMER_HDR: usize = 16;

fn read_consumer(tx: &Tx, off: u64) -> daisy::Result<Consumer> {
    let mut h = [0u8; CONSUMER_HDR];
    tx.read_bytes(off, &mut h)?;
    let len = word(&h[8..]);
    if len > 1 << 32 {
        return Err(damaged(format!(
            "consumer {off:#x} has a name of {len} bytes"
        )));
    }
    let mut name = vec![0u8; len as usize];
    tx.read_bytes(off + CONSUMER_HDR as u64, &mut name)?;
    Ok(Consumer {
        off,
        seen_ms: word(&h[..8]) as i64,
        name,
    })
}

fn cpel_key(consumer: u64, id: StreamId) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..8].copy_from_slice(&consumer.to_be_bytes());
    k[8..].copy_from_slice(&id.key());
    k
}

/// A group opened for a command: its meta (written back by [`Group::flush`]) and its maps.
pub struct Group {
    pool: Pool,
    pub name: Vec<u8>,
    pub at: u64,
    pub g: GroupMeta,
    orig: GroupMeta,
    /// The three maps, each opened the first time the command needs it (a view claims its
    /// map, which costs a lock).
    pel_v: OnceCell<TreeMapView>,
    consumers_v: OnceCell<TreeMapView>,
    cpel_v: OnceCell<TreeMapView>,
}

impl Group {
    fn open_at(pool: &Pool, tx: &Tx, name: &[u8], at: u64) -> daisy::Result<Group> {
        let g: GroupMeta = tx.read(PPtr::from_offset(at))?;
        Ok(Group {
            pool: pool.clone(),
            name: name.to_vec(),
            at,
            g,
            orig: g,
            pel_v: OnceCell::new(),
            consumers_v: OnceCell::new(),
            cpel_v: OnceCell::new(),
        })
    }

    /// Open a group for a command: its maps' views that earlier commands of the transaction
    /// gave back ([`Group::release`]) are taken over, since a map whose view is kept cannot be
    /// opened again (every command path opens groups here, never with `open_at`).
    pub fn open_in(c: &mut Ctx, name: &[u8], at: u64) -> daisy::Result<Group> {
        let g = Group::open_at(c.ks.pool(), c.tx, name, at)?;
        for (cell, off) in [
            (&g.pel_v, g.g.pel),
            (&g.consumers_v, g.g.consumers),
            (&g.cpel_v, g.g.cpel),
        ] {
            if let Some(view) = c.ks.views.kept_tree(c.tx, off) {
                let _ = cell.set(view);
            }
        }
        Ok(g)
    }

    fn view<'v>(
        pool: &Pool,
        cell: &'v OnceCell<TreeMapView>,
        tx: &Tx,
        off: u64,
    ) -> daisy::Result<&'v TreeMapView> {
        if cell.get().is_none() {
            let _ = cell.set(PTreeMap::view(pool, tx, PPtr::from_offset(off))?);
        }
        Ok(cell.get().expect("just set"))
    }

    /// The pending entries list.
    pub fn pel(&self, tx: &Tx) -> daisy::Result<&TreeMapView> {
        Self::view(&self.pool, &self.pel_v, tx, self.g.pel)
    }

    /// The consumers.
    pub fn consumers(&self, tx: &Tx) -> daisy::Result<&TreeMapView> {
        Self::view(&self.pool, &self.consumers_v, tx, self.g.consumers)
    }

    /// The consumers' own pending lists.
    pub fn cpel(&self, tx: &Tx) -> daisy::Result<&TreeMapView> {
        Self::view(&self.pool, &self.cpel_v, tx, self.g.cpel)
    }

    fn pel_mut(&mut self, tx: &Tx) -> daisy::Result<&mut TreeMapView> {
        self.pel(tx)?;
        Ok(self.pel_v.get_mut().expect("opened"))
    }

    fn consumers_mut(&mut self, tx: &Tx) -> daisy::Result<&mut TreeMapView> {
        self.consumers(tx)?;
        Ok(self.consumers_v.get_mut().expect("opened"))
    }

    fn cpel_mut(&mut self, tx: &Tx) -> daisy::Result<&mut TreeMapView> {
        self.cpel(tx)?;
        Ok(self.cpel_v.get_mut().expect("opened"))
    }

    /// Give the maps' views this command opened back to the keyspace's cache, for the next
    /// commands of the transaction (`crate::views`; every kept view is dropped before a stream
    /// or a group is freed: `Keyspace::free_owned`, `Keyspace::free_group`).
    pub fn release(self, c: &mut Ctx) {
        for view in [self.pel_v, self.consumers_v, self.cpel_v]
            .into_iter()
            .filter_map(OnceCell::into_inner)
        {
            c.ks.views.keep_tree(c.tx, view);
        }
    }

    /// Write the meta's changed words back.
    pub fn flush(&mut self, tx: &mut Tx) -> daisy::Result<()> {
        if self.g != self.orig {
            write_changed(
                tx,
                self.at,
                bytemuck::bytes_of(&self.orig),
                bytemuck::bytes_of(&self.g),
            )?;
            self.orig = self.g;
        }
        Ok(())
    }

    // ---- consumers ----------------------------------------------------------------------

    /// The consumer named `name` (streamLookupConsumer without refreshing its seen time).
    pub fn consumer(&self, tx: &Tx, name: &[u8]) -> daisy::Result<Option<Consumer>> {
        match self.consumers(tx)?.get(tx, name)? {
            None => Ok(None),
            Some(v) if v.len() == 8 => Ok(Some(read_consumer(tx, word(&v))?)),
            Some(_) => Err(damaged("a consumer value's length")),
        }
    }

    /// Set a consumer's seen time (streamLookupConsumer's refresh).
    pub fn touch(&self, tx: &mut Tx, c: &mut Consumer, now_ms: i64) -> daisy::Result<()> {
        if c.seen_ms != now_ms {
            c.seen_ms = now_ms;
            tx.write_bytes(c.off, &now_ms.to_le_bytes())?;
        }
        Ok(())
    }

    /// Create consumer `name` seen now; None when it exists.
    pub fn create_consumer(
        &mut self,
        tx: &mut Tx,
        name: &[u8],
        now_ms: i64,
    ) -> daisy::Result<Option<Consumer>> {
        if self.consumers(tx)?.contains_key(tx, name)? {
            return Ok(None);
        }
        let mut obj = Vec::with_capacity(CONSUMER_HDR + name.len());
        obj.extend_from_slice(&now_ms.to_le_bytes());
        obj.extend_from_slice(&(name.len() as u64).to_le_bytes());
        obj.extend_from_slice(name);
        let off = tx.alloc_bytes(&obj)?.offset();
        self.consumers_mut(tx)?
            .insert(tx, name, &off.to_le_bytes())?;
        Ok(Some(Consumer {
            off,
            seen_ms: now_ms,
            name: name.to_vec(),
        }))
    }

    /// Every consumer, in name order.
    pub fn all_consumers(&self, tx: &Tx) -> daisy::Result<Vec<Consumer>> {
        let n = self.consumers(tx)?.len(tx)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(n as usize);
        for (_, v) in self.consumers(tx)?.range_by_rank(tx, 0, n - 1, false)? {
            if v.len() != 8 {
                return Err(damaged("a consumer value's length"));
            }
            out.push(read_consumer(tx, word(&v))?);
        }
        Ok(out)
    }

    fn cpel_bounds(consumer: u64) -> ([u8; 24], [u8; 24]) {
        (
            cpel_key(consumer, StreamId::MIN),
            cpel_key(consumer, StreamId::MAX),
        )
    }

    /// How many entries consumer `off` has pending.
    pub fn pending_of(&self, tx: &Tx, consumer: u64) -> daisy::Result<u64> {
        let (lo, hi) = Self::cpel_bounds(consumer);
        self.cpel(tx)?
            .count_range(tx, Bound::Included(&lo[..]), Bound::Included(&hi[..]))
    }

    /// The IDs consumer `off` has pending from `start` to `end`, at most `limit` (0: all).
    pub fn pending_ids(
        &self,
        tx: &Tx,
        consumer: u64,
        start: StreamId,
        end: StreamId,
        limit: u64,
    ) -> daisy::Result<Vec<StreamId>> {
        if start > end {
            return Ok(Vec::new());
        }
        let (lo, hi) = (cpel_key(consumer, start), cpel_key(consumer, end));
        let limit = if limit == 0 { u64::MAX } else { limit };
        let keys = self.cpel(tx)?.range(
            tx,
            Bound::Included(&lo[..]),
            Bound::Included(&hi[..]),
            false,
            0,
            limit,
        )?;
        keys.iter()
            .map(|(k, _)| StreamId::from_key(&k[8..]).ok_or_else(|| damaged("a cpel key")))
            .collect()
    }

    /// Delete consumer `c` and its pending entries (streamDelConsumer); how many were
    /// pending.
    pub fn delete_consumer(&mut self, tx: &mut Tx, c: &Consumer) -> daisy::Result<u64> {
        let ids = self.pending_ids(tx, c.off, StreamId::MIN, StreamId::MAX, 0)?;
        for id in &ids {
            self.pel_mut(tx)?.remove(tx, &id.key())?;
        }
        let (lo, hi) = Self::cpel_bounds(c.off);
        self.cpel_mut(tx)?
            .remove_range(tx, Bound::Included(&lo[..]), Bound::Included(&hi[..]))?;
        self.consumers_mut(tx)?.remove(tx, &c.name)?;
        tx.free(PPtr::<u8>::from_offset(c.off))?;
        Ok(ids.len() as u64)
    }

    // ---- the pending entries list ---------------------------------------------------------

    pub fn nack(&self, tx: &Tx, id: StreamId) -> daisy::Result<Option<Nack>> {
        match self.pel(tx)?.get(tx, &id.key())? {
            None => Ok(None),
            Some(v) => Ok(Some(
                Nack::from_bytes(&v).ok_or_else(|| damaged("a NACK's length"))?,
            )),
        }
    }

    /// Store `n` as entry `id`'s NACK; `old_owner` is its owner before (None: a new entry,
    /// or one whose owner was already moved): the owner's pending list follows.
    pub fn put_nack(
        &mut self,
        tx: &mut Tx,
        id: StreamId,
        n: &Nack,
        old_owner: Option<u64>,
    ) -> daisy::Result<()> {
        self.pel_mut(tx)?.insert(tx, &id.key(), &n.to_bytes())?;
        if id > self.g.pel_top() {
            (self.g.pel_top_ms, self.g.pel_top_seq) = (id.ms, id.seq);
        }
        if old_owner != Some(n.consumer) {
            if let Some(o) = old_owner {
                self.cpel_mut(tx)?.remove(tx, &cpel_key(o, id))?;
            }
            self.cpel_mut(tx)?
                .insert(tx, &cpel_key(n.consumer, id), &[])?;
        }
        Ok(())
    }

    /// Remove entry `id` from the pending lists (XACK); its NACK when it was there.
    pub fn remove_nack(&mut self, tx: &mut Tx, id: StreamId) -> daisy::Result<Option<Nack>> {
        let Some(v) = self.pel_mut(tx)?.remove(tx, &id.key())? else {
            return Ok(None);
        };
        let n = Nack::from_bytes(&v).ok_or_else(|| damaged("a NACK's length"))?;
        self.cpel_mut(tx)?.remove(tx, &cpel_key(n.consumer, id))?;
        Ok(Some(n))
    }

    /// Pending entries from `start` to `end`, in order, at most `limit` (0: all).
    pub fn pel_range(
        &self,
        tx: &Tx,
        start: StreamId,
        end: StreamId,
        limit: u64,
    ) -> daisy::Result<Vec<(StreamId, Nack)>> {
        if start > end {
            return Ok(Vec::new());
        }
        let limit = if limit == 0 { u64::MAX } else { limit };
        let (lo, hi) = (start.key(), end.key());
        self.pel(tx)?
            .range(
                tx,
                Bound::Included(&lo[..]),
                Bound::Included(&hi[..]),
                false,
                0,
                limit,
            )?
            .iter()
            .map(|(k, v)| {
                Ok((
                    StreamId::from_key(k).ok_or_else(|| damaged("a PEL key"))?,
                    Nack::from_bytes(v).ok_or_else(|| damaged("a NACK's length"))?,
                ))
            })
            .collect()
    }

    /// The first pending entry at or after `start`, if any.
    pub fn pel_next(&self, tx: &Tx, start: StreamId) -> daisy::Result<Option<(StreamId, Nack)>> {
        Ok(self.pel_range(tx, start, StreamId::MAX, 1)?.pop())
    }

    /// A consumer's name by its object, remembered in `cache`.
    pub fn name_of<'c>(
        tx: &Tx,
        off: u64,
        cache: &'c mut HashMap<u64, Vec<u8>>,
    ) -> daisy::Result<&'c [u8]> {
        if let std::collections::hash_map::Entry::Vacant(e) = cache.entry(off) {
            e.insert(read_consumer(tx, off)?.name);
        }
        Ok(&cache[&off])
    }
}

impl Stream {
    /// The group named `name`.
    pub fn group(&mut self, c: &mut Ctx, name: &[u8]) -> daisy::Result<Option<Group>> {
        let Some(v) = self.groups_view(c, false)? else {
            return Ok(None);
        };
        let Some(val) = v.get(c.tx, name)? else {
            return Ok(None);
        };
        if val.len() != 8 {
            return Err(damaged("a group value's length"));
        }
        c.ks.views.keep_tree(c.tx, v);
        Ok(Some(Group::open_in(c, name, word(&val))?))
    }

    /// Every group's name and meta offset, in name order.
    pub fn group_list(&mut self, c: &mut Ctx) -> daisy::Result<Vec<(Vec<u8>, u64)>> {
        let Some(v) = self.groups_view(c, false)? else {
            return Ok(Vec::new());
        };
        let n = v.len(c.tx)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        v.range_by_rank(c.tx, 0, n - 1, false)?
            .into_iter()
            .map(|(k, val)| {
                if val.len() != 8 {
                    return Err(damaged("a group value's length"));
                }
                Ok((k, word(&val)))
            })
            .collect()
    }

    /// Open a group from [`Stream::group_list`].
    pub fn open_group(&self, c: &mut Ctx, name: &[u8], at: u64) -> daisy::Result<Group> {
        Group::open_in(c, name, at)
    }

    /// Create group `name` (streamCreateCG); false when it exists.
    pub fn create_group(
        &mut self,
        c: &mut Ctx,
        name: &[u8],
        last: StreamId,
        entries_read: i64,
    ) -> daisy::Result<bool> {
        let mut v = self.groups_view(c, true)?.expect("created");
        if v.contains_key(c.tx, name)? {
            return Ok(false);
        }
        let g = GroupMeta {
            last_ms: last.ms,
            last_seq: last.seq,
            entries_read,
            pel: PTreeMap::create_in(c.tx)?.offset(),
            consumers: PTreeMap::create_in(c.tx)?.offset(),
            cpel: PTreeMap::create_in(c.tx)?.offset(),
            pel_top_ms: 0,
            pel_top_seq: 0,
            free_phase: 0,
            reserved: 0,
        };
        let at = c.tx.alloc(&g)?.offset();
        v.insert(c.tx, name, &at.to_le_bytes())?;
        Ok(true)
    }

    /// Unlink group `name` from the stream (XGROUP DESTROY); its meta's offset, for freeing.
    pub fn unlink_group(&mut self, c: &mut Ctx, name: &[u8]) -> daisy::Result<Option<u64>> {
        let Some(mut v) = self.groups_view(c, false)? else {
            return Ok(None);
        };
        match v.remove(c.tx, name)? {
            None => Ok(None),
            Some(val) if val.len() == 8 => Ok(Some(word(&val))),
            Some(_) => Err(damaged("a group value's length")),
        }
    }
}

/// Free the group whose meta is at `at` (unlinked from its stream), about `budget` objects,
/// inside `tx`; true once it is gone. Nothing may have a view of its maps.
pub fn free_step(pool: &Pool, tx: &mut Tx, at: u64, budget: &mut i64) -> daisy::Result<bool> {
    let gp = PPtr::<GroupMeta>::from_offset(at);
    let mut g: GroupMeta = tx.read(gp)?;
    let orig = g;
    let low = |tx: &Tx| tx.log_room() < 16 * 1024;
    for which in [0, 1] {
        let off = if which == 0 { g.pel } else { g.cpel };
        if off != 0 && *budget > 0 && !low(tx) {
            if PTreeMap::free_step(pool, tx, PPtr::from_offset(off), (*budget).max(1) as u32)? {
                if which == 0 {
                    g.pel = 0;
                } else {
                    g.cpel = 0;
                }
            }
            *budget -= 32;
        }
    }
    if g.consumers != 0 && g.free_phase & 1 == 0 {
        let mut v = PTreeMap::view(pool, tx, PPtr::from_offset(g.consumers))?;
        while *budget > 0 && !low(tx) {
            let n = v.len(tx)?;
            if n == 0 {
                g.free_phase |= 1;
                break;
            }
            let k = (*budget as u64).min(n).min(64);
            for (_, val) in v.range_by_rank(tx, n - k, n - 1, false)? {
                if val.len() != 8 {
                    return Err(damaged("a consumer value's length"));
                }
                tx.free(PPtr::<u8>::from_offset(word(&val)))?;
            }
            v.remove_range_by_rank(tx, n - k, n - 1)?;
            *budget -= k as i64;
        }
    }
    if g.consumers != 0 && g.free_phase & 1 != 0 && *budget > 0 && !low(tx) {
        if PTreeMap::free_step(
            pool,
            tx,
            PPtr::from_offset(g.consumers),
            (*budget).max(1) as u32,
        )? {
            g.consumers = 0;
        }
        *budget -= 32;
    }
    if g.pel == 0 && g.cpel == 0 && g.consumers == 0 {
        tx.free(gp)?;
        return Ok(true);
    }
    if g != orig {
        write_changed(tx, at, bytemuck::bytes_of(&orig), bytemuck::bytes_of(&g))?;
    }
    Ok(false)
}

/// Whether a group is small enough to free inside its command.
pub fn is_small(pool: &Pool, tx: &Tx, at: u64, threshold: u64) -> daisy::Result<bool> {
    let g: GroupMeta = tx.read(PPtr::from_offset(at))?;
    let len = |off: u64| -> daisy::Result<u64> {
        PTreeMap::view(pool, tx, PPtr::from_offset(off))?.len(tx)
    };
    Ok(len(g.pel)? + len(g.consumers)? <= threshold)
}

// ---- checkers ----------------------------------------------------------------------------

/// A group as a checker reads it (committed, read-only).
pub struct GroupSnapshot {
    pub name: Vec<u8>,
    pub at: u64,
    pub meta: GroupMeta,
    pub pel: Vec<(StreamId, Nack)>,
    pub consumers: Vec<Consumer>,
    pub cpel: Vec<(u64, StreamId)>,
    /// The group's objects (meta, maps, consumers).
    pub objects: Vec<u64>,
    /// Problems met while reading.
    pub read_problems: Vec<String>,
}

fn read_consumer_pool(pool: &Pool, off: u64) -> Result<Consumer, String> {
    let mut h = [0u8; CONSUMER_HDR];
    pool.try_read_bytes(off, &mut h)
        .map_err(|e| format!("consumer {off:#x}: {e}"))?;
    let len = word(&h[8..]);
    if len > 1 << 32 {
        return Err(format!("consumer {off:#x}: a name of {len} bytes"));
    }
    let mut name = vec![0u8; len as usize];
    pool.try_read_bytes(off + CONSUMER_HDR as u64, &mut name)
        .map_err(|e| format!("consumer {off:#x}: {e}"))?;
    Ok(Consumer {
        off,
        seen_ms: word(&h[..8]) as i64,
        name,
    })
}

/// Read the group `name` at `at` (live, or being freed: then only what it owns).
pub fn snapshot(pool: &Pool, name: Vec<u8>, at: u64) -> Result<GroupSnapshot, String> {
    let meta: GroupMeta = pool
        .try_read(PPtr::from_offset(at))
        .map_err(|e| format!("group {at:#x}: {e}"))?;
    let mut s = GroupSnapshot {
        name,
        at,
        meta,
        pel: Vec::new(),
        consumers: Vec::new(),
        cpel: Vec::new(),
        objects: vec![at],
        read_problems: Vec::new(),
    };
    let tree = |off: u64| -> Result<(Vec<u64>, super::node::Fields), String> {
        Ok((
            daisy::tree_objects(pool, off).map_err(|e| e.to_string())?,
            daisy::tree_entries(pool, off).map_err(|e| e.to_string())?,
        ))
    };
    if meta.pel != 0 {
        let (o, e) = tree(meta.pel)?;
        s.objects.extend(o);
        for (k, v) in e {
            match (StreamId::from_key(&k), Nack::from_bytes(&v)) {
                (Some(id), Some(n)) => s.pel.push((id, n)),
                _ => s.read_problems.push("a PEL entry of the wrong size".into()),
            }
        }
    }
    if meta.cpel != 0 {
        let (o, e) = tree(meta.cpel)?;
        s.objects.extend(o);
        for (k, v) in e {
            match StreamId::from_key(k.get(8..).unwrap_or(&[])) {
                Some(id) if v.is_empty() => s
                    .cpel
                    .push((u64::from_be_bytes(k[..8].try_into().expect("8 bytes")), id)),
                _ => s
                    .read_problems
                    .push("a consumer PEL key of the wrong size".into()),
            }
        }
    }
    if meta.consumers != 0 {
        let (o, e) = tree(meta.consumers)?;
        s.objects.extend(o);
        if meta.free_phase & 1 == 0 {
            for (k, v) in e {
                if v.len() != 8 {
                    s.read_problems.push("a consumer value's length".into());
                    continue;
                }
                let c = read_consumer_pool(pool, word(&v))?;
                s.objects.push(c.off);
                if c.name != k {
                    s.read_problems
                        .push("a consumer's name is not its key".to_string());
                }
                s.consumers.push(c);
            }
        }
    }
    Ok(s)
}

impl GroupSnapshot {
    /// The group's invariants that do not hold.
    pub fn problems(&self, pool: &Pool) -> Vec<String> {
        let mut p = self.read_problems.clone();
        if self.meta.free_phase != 0 {
            p.push("a live group has a freeing phase".into());
        }
        if self.meta.entries_read < INVALID_ENTRIES_READ {
            p.push("entries read below -1".into());
        }
        for (what, off) in [
            ("PEL", self.meta.pel),
            ("consumers", self.meta.consumers),
            ("consumer PEL", self.meta.cpel),
        ] {
            if off == 0 {
                p.push(format!("no {what} map"));
                continue;
            }
            match PTreeMap::open(pool, PPtr::from_offset(off)) {
                Ok(t) => p.extend(
                    t.check()
                        .problems
                        .into_iter()
                        .map(|x| format!("{what} map: {x}")),
                ),
                Err(e) => p.push(format!("{what} map: {e}")),
            }
        }
        let owners: HashSet<u64> = self.consumers.iter().map(|c| c.off).collect();
        if owners.len() != self.consumers.len() {
            p.push("two consumers share an object".into());
        }
        let mut want: Vec<(u64, StreamId)> = Vec::with_capacity(self.pel.len());
        if self.pel.iter().any(|(id, _)| *id > self.meta.pel_top()) {
            p.push("a pending entry above the group's PEL top".into());
        }
        for (id, n) in &self.pel {
            if !owners.contains(&n.consumer) {
                p.push(format!("pending entry {id} names no consumer of the group"));
            }
            want.push((n.consumer, *id));
        }
        want.sort_unstable();
        let mut got = self.cpel.clone();
        got.sort_unstable();
        if want != got {
            p.push(format!(
                "the consumers' pending lists ({} entries) do not match the group's ({})",
                got.len(),
                want.len()
            ));
        }
        p
    }
}

// ---- DUMP, RESTORE, COPY ----------------------------------------------------------------------

/// A group as DUMP serializes it.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupDump {
    pub name: Vec<u8>,
    pub last_id: StreamId,
    pub entries_read: i64,
    /// (ID, delivery time, delivery count), in ID order.
    pub pel: Vec<(StreamId, i64, u64)>,
    /// (name, seen time, pending IDs in order), in name order.
    pub consumers: Vec<(Vec<u8>, i64, Vec<StreamId>)>,
}

/// Every group of a stream whose groups map is `groups_off` (0: none), in name order.
pub fn read_all(c: &mut Ctx, groups_off: u64) -> daisy::Result<Vec<GroupDump>> {
    if groups_off == 0 {
        return Ok(Vec::new());
    }
    let list: Vec<(Vec<u8>, u64)> = {
        let v = c.ks.tree_view(c.tx, groups_off)?;
        let n = v.len(c.tx)?;
        if n == 0 {
            Vec::new()
        } else {
            v.range_by_rank(c.tx, 0, n - 1, false)?
                .into_iter()
                .map(|(k, val)| (k, word(&val)))
                .collect()
        }
    };
    let mut out = Vec::with_capacity(list.len());
    for (name, at) in list {
        let g = Group::open_in(c, &name, at)?;
        let pel = g.pel_range(c.tx, StreamId::MIN, StreamId::MAX, 0)?;
        let mut consumers = Vec::new();
        for cons in g.all_consumers(c.tx)? {
            let ids = g.pending_ids(c.tx, cons.off, StreamId::MIN, StreamId::MAX, 0)?;
            consumers.push((cons.name, cons.seen_ms, ids));
        }
        out.push(GroupDump {
            name,
            last_id: g.g.last_id(),
            entries_read: g.g.entries_read,
            pel: pel.iter().map(|(id, n)| (*id, n.time, n.count)).collect(),
            consumers,
        });
    }
    Ok(out)
}

/// Create group `d` in stream `s` with its consumers and pending entries (COPY, RESTORE).
pub fn create_from(c: &mut Ctx, s: &mut Stream, d: &GroupDump) -> daisy::Result<()> {
    if !s.create_group(c, &d.name, d.last_id, d.entries_read)? {
        return Err(damaged("a group twice"));
    }
    let mut g = s.group(c, &d.name)?.expect("just created");
    let mut owner: HashMap<StreamId, u64> = HashMap::new();
    for (name, seen, ids) in &d.consumers {
        let cons = g
            .create_consumer(c.tx, name, *seen)?
            .ok_or_else(|| damaged("a consumer twice"))?;
        for id in ids {
            owner.insert(*id, cons.off);
        }
    }
    for (id, time, count) in &d.pel {
        let consumer = *owner
            .get(id)
            .ok_or_else(|| damaged("a pending entry without owner"))?;
        let n = Nack {
            time: *time,
            count: *count,
            consumer,
        };
        g.put_nack(c.tx, *id, &n, None)?;
    }
    g.flush(c.tx)
}

/// Check restored groups (Redis's checks under `sanitize-dump-payload yes`, and that every
/// pending entry has exactly one owner).
pub fn validate_dumps(groups: &[GroupDump]) -> Result<(), &'static str> {
    const E: &str = "ERR Bad data format";
    let mut names = HashSet::new();
    for g in groups {
        if !names.insert(&g.name)
            || (g.entries_read < INVALID_ENTRIES_READ && g.entries_read != ESTIMATE_ENTRIES_READ)
        {
            return Err(E);
        }
        let pel: HashSet<StreamId> = g.pel.iter().map(|p| p.0).collect();
        if pel.len() != g.pel.len() {
            return Err(E);
        }
        let mut owned = HashSet::new();
        let mut cnames = HashSet::new();
        for (name, _, ids) in &g.consumers {
            if !cnames.insert(name) {
                return Err(E);
            }
            for id in ids {
                if !pel.contains(id) || !owned.insert(*id) {
                    return Err(E);
                }
            }
        }
        if owned.len() != pel.len() {
            return Err(E);
        }
    }
    Ok(())
}
