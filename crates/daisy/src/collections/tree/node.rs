//! The node format of [`super::PTreeMap`] (docs/FORMAT.md section 8c): slotted nodes whose
//! items live unsorted in a heap at the node's end, reached through a sorted one-byte index.
//!
//! ```text
//! node (256, 512, 1024 or 2048 bytes; one allocation, cache-line aligned)
//!   0  u8  level       0 = leaf; an internal node is one above its children
//!   1  u8  count       items
//!   2  u16 heap        lowest heap byte in use (the node size when empty)
//!   4  u16 0
//!   6  [u8; 2] tag     "Tn"
//!   8  index           `count` bytes, item i's offset / 8, in key order
//!   ... free ...
//!   heap .. end        items, 8-aligned, in no order; bytes no item uses are dead
//! leaf item (entry)
//!   inline:  u8 klen (< 255), u8 vlen, key, value, padded to 8
//!   outline: u8 0xFF, u8 plen, u16 0, u32 klen, u64 obj, 16-byte key prefix (plen bytes used)
//!            obj = item object: u64 klen, u64 vlen, key, value
//! internal item
//!   u64 child, u64 count (entries in the child's subtree), separator entry (an entry with
//!   vlen 0, inline or outline); item 0's separator is empty (inline, klen 0)
//! ```
//!
//! Why this layout: an insert that fits writes the new item into free heap space, shifts the
//! index tail one byte and rewrites the header word, so its redo log holds the item plus a
//! few dozen bytes (not the node); a removal only shifts the index. Every change is computed
//! on a DRAM copy and written as the word runs that differ ([`write_diff`]).

use super::super::table::Src;
use super::ops::T;
use crate::error::{Error, Result};
use crate::tx::Tx;
use std::cell::RefCell;

/// Node sizes a tree may use. The largest is 2048 bytes: index bytes hold offset / 8.
pub const NODE_SIZES: [u32; 4] = [256, 512, 1024, 2048];
pub const NODE_HDR: usize = 8;
pub const NODE_TAG: [u8; 2] = *b"Tn";
/// First byte of an outline entry.
pub const OUT: u8 = 0xFF;
/// Key bytes an outline entry keeps inline for comparisons.
pub const PREFIX: usize = 16;
pub const OUT_ENTRY: usize = 32;
/// An item object's header: u64 klen, u64 vlen.
pub const OBJ_HDR: u64 = 16;
/// An internal item's child pointer and count.
pub const CHILD_HDR: usize = 16;
/// An internal item with an empty separator (item 0).
pub const EMPTY_SEP_ITEM: usize = CHILD_HDR + 8;
/// Deepest tree accepted (a damaged height is refused before anything is sized from it).
pub const MAX_HEIGHT: u64 = 40;

#[inline(always)]
pub fn pad8(x: usize) -> usize {
    (x + 7) & !7
}

/// A tree's node geometry (its node size), and the bounds that follow from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geo {
    pub n: usize,
}

impl Geo {
    pub fn new(node_size: u32) -> Option<Geo> {
        NODE_SIZES.contains(&node_size).then_some(Geo {
            n: node_size as usize,
        })
    }
    /// Bytes for the index and the items.
    #[inline(always)]
    pub fn cap(self) -> usize {
        self.n - NODE_HDR
    }
    /// Least `used` of a node other than the root.
    #[inline(always)]
    pub fn min_fill(self) -> usize {
        self.cap() / 4
    }
    /// Largest `2 + klen + vlen` stored inline in a leaf.
    #[inline(always)]
    pub fn inline_max(self) -> usize {
        (self.n / 8).min(248)
    }
    /// Largest `2 + len` of a separator stored inline.
    #[inline(always)]
    pub fn sep_inline_max(self) -> usize {
        self.n / 16
    }
}

pub fn damaged(off: u64, why: &'static str) -> Error {
    Error::InvalidPointer { offset: off, why }
}

/// A key as an entry holds it.
#[derive(Clone, Copy, Debug)]
pub enum KeyRef<'a> {
    In(&'a [u8]),
    /// In the item object at `obj`; `prefix` is its first min(klen, 16) bytes.
    Out {
        obj: u64,
        klen: u64,
        prefix: &'a [u8],
    },
}

impl KeyRef<'_> {
    pub fn len(&self) -> u64 {
        match self {
            KeyRef::In(k) => k.len() as u64,
            KeyRef::Out { klen, .. } => *klen,
        }
    }
    /// The object the entry owns, if outline.
    pub fn obj(&self) -> Option<u64> {
        match self {
            KeyRef::In(_) => None,
            KeyRef::Out { obj, .. } => Some(*obj),
        }
    }
    /// The key bytes known without reading the object (all of them when inline or short).
    pub fn known(&self) -> &[u8] {
        match self {
            KeyRef::In(k) => k,
            KeyRef::Out { prefix, .. } => prefix,
        }
    }
    pub fn complete(&self) -> bool {
        self.known().len() as u64 == self.len()
    }
}

/// A value as an entry holds it.
#[derive(Clone, Copy, Debug)]
pub enum ValRef<'a> {
    In(&'a [u8]),
    /// After the key in the item object.
    Out {
        obj: u64,
        klen: u64,
    },
}

/// Parse the entry at `at` of `b` (a node image): key, value, encoded size.
#[inline]
pub fn entry_at(b: &[u8], at: usize) -> Option<(KeyRef<'_>, ValRef<'_>, usize)> {
    let t = *b.get(at)?;
    if t == OUT {
        let e = b.get(at..at + OUT_ENTRY)?;
        let plen = e[1] as usize;
        let klen = u32::from_le_bytes(e[4..8].try_into().unwrap()) as u64;
        let obj = u64::from_le_bytes(e[8..16].try_into().unwrap());
        if plen > PREFIX || plen as u64 != klen.min(PREFIX as u64) || e[2..4] != [0, 0] {
            return None;
        }
        let prefix = &e[16..16 + plen];
        Some((
            KeyRef::Out { obj, klen, prefix },
            ValRef::Out { obj, klen },
            OUT_ENTRY,
        ))
    } else {
        let kl = t as usize;
        let vl = *b.get(at + 1)? as usize;
        let size = pad8(2 + kl + vl);
        if at + size > b.len() {
            return None;
        }
        Some((
            KeyRef::In(&b[at + 2..at + 2 + kl]),
            ValRef::In(&b[at + 2 + kl..at + 2 + kl + vl]),
            size,
        ))
    }
}

/// Size of the item at `at` (leaf entry, or internal item), if it fits the image.
#[inline]
pub fn item_size(b: &[u8], at: usize, leaf: bool) -> Option<usize> {
    if leaf {
        entry_at(b, at).map(|e| e.2)
    } else {
        entry_at(b, at + CHILD_HDR).map(|e| CHILD_HDR + e.2)
    }
}

/// The bytes the item at `at` takes, from its first two bytes only (no check of an outline
/// entry's inside): what [`item_size`] answers for an item that parses. For sums over a
/// node's items (its fill, its dead runs), where parsing every entry cost more than the rest.
#[inline(always)]
pub fn item_len(b: &[u8], at: usize, leaf: bool) -> Option<usize> {
    let e = if leaf { at } else { at + CHILD_HDR };
    let size = match *b.get(e)? {
        OUT => OUT_ENTRY,
        kl => pad8(2 + kl as usize + *b.get(e + 1)? as usize),
    };
    let end = e + size;
    (end <= b.len()).then_some(end - at)
}

/// Encode an inline entry.
pub fn inline_entry(key: &[u8], val: &[u8]) -> Vec<u8> {
    debug_assert!(key.len() < OUT as usize && val.len() <= u8::MAX as usize);
    let mut e = vec![0u8; pad8(2 + key.len() + val.len())];
    e[0] = key.len() as u8;
    e[1] = val.len() as u8;
    e[2..2 + key.len()].copy_from_slice(key);
    e[2 + key.len()..2 + key.len() + val.len()].copy_from_slice(val);
    e
}

/// Encode an outline entry for the item object `obj` holding `key`.
pub fn outline_entry(key: &[u8], obj: u64) -> Vec<u8> {
    let plen = key.len().min(PREFIX);
    let mut e = vec![0u8; OUT_ENTRY];
    e[0] = OUT;
    e[1] = plen as u8;
    e[4..8].copy_from_slice(&(key.len() as u32).to_le_bytes());
    e[8..16].copy_from_slice(&obj.to_le_bytes());
    e[16..16 + plen].copy_from_slice(&key[..plen]);
    e
}

/// An internal item: child, count, separator entry.
pub fn internal_item(child: u64, count: u64, sep_entry: &[u8]) -> Vec<u8> {
    let mut it = Vec::with_capacity(CHILD_HDR + sep_entry.len());
    it.extend_from_slice(&child.to_le_bytes());
    it.extend_from_slice(&count.to_le_bytes());
    it.extend_from_slice(sep_entry);
    it
}

/// The empty separator entry of item 0.
pub const EMPTY_ENTRY: [u8; 8] = [0; 8];

thread_local! {
    /// Buffers of dropped node images, reused by the next images of this thread: a descent
    /// copies a node per level, and an allocation (zeroed) per copy cost more than the copy.
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Buffers [`SPARE`] keeps at most (a split or a merge holds a handful of images at once).
const SPARE_MAX: usize = 16;

/// A buffer of `n` bytes, contents unspecified (a reused one, or a new one).
fn take_buf(n: usize) -> Vec<u8> {
    let b = SPARE.try_with(|s| s.borrow_mut().pop()).ok().flatten();
    match b {
        Some(mut b) => {
            b.resize(n, 0);
            b
        }
        None => vec![0u8; n],
    }
}

/// Check a node's header (`b` holds at least its first 8 bytes; the node has `n` bytes with
/// `n` = `b.len()` for a whole image): tag, level, heap bounds, index within them.
fn check_header_n(off: u64, b: &[u8], n: usize, level: u64) -> Result<()> {
    if b[6..8] != NODE_TAG || b[4..6] != [0, 0] {
        return Err(damaged(off, "ordered map node has no node tag"));
    }
    if b[0] as u64 != level {
        return Err(damaged(off, "ordered map node is at the wrong level"));
    }
    let heap = u16::from_le_bytes([b[2], b[3]]) as usize;
    if !heap.is_multiple_of(8) || heap > n || NODE_HDR + b[1] as usize > heap {
        return Err(damaged(off, "ordered map node's heap bounds are invalid"));
    }
    Ok(())
}

fn check_header(off: u64, b: &[u8], level: u64) -> Result<()> {
    check_header_n(off, b, b.len(), level)
}

/// The internal item at byte `at` of `b` (the node at `off`, or a piece of it that holds the
/// item whole, `at` relative to it): child, count, separator key.
#[inline]
fn parse_child(off: u64, b: &[u8], at: usize) -> Result<(u64, u64, KeyRef<'_>)> {
    let (k, v, _) = entry_at(b, at + CHILD_HDR)
        .ok_or_else(|| damaged(off, "ordered map separator is damaged"))?;
    if !matches!(v, ValRef::In(v) if v.is_empty()) && !matches!(v, ValRef::Out { .. }) {
        return Err(damaged(off, "ordered map separator carries a value"));
    }
    // The entry parsed, so the item's first 16 bytes lie inside `b`.
    let child = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let count = u64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap());
    Ok((child, count, k))
}

/// Bytes an internal item's first read takes: the child, the count and a short separator
/// (a sorted set's are a score and a byte or two), so one read usually holds the item.
const PROBE_FIRST: usize = 32;

/// Largest internal item: child and count, then an inline separator of up to 2048 / 16
/// bytes (an outline one takes 32).
const ITEM_MAX_INTERNAL: usize = CHILD_HDR + 2048 / 16;

/// An internal node read piecemeal: its header and index, then only the items a descent
/// probes, each read on its own (a binary search reads a handful of items, not the node's
/// kilobyte; through a transaction every byte read is also looked up in its own writes).
/// The header is checked as [`Img::read`] checks it, each item as [`Img::child`] does.
pub struct Inner {
    pub off: u64,
    n: usize,
    count: usize,
    heap: usize,
    /// Header and index (bytes 0..8 + count).
    head: [u8; NODE_HDR + 256],
}

/// A buffer for one internal item (see [`Inner::read_item`]).
pub type ItemBuf = [u8; ITEM_MAX_INTERNAL];

/// Child, count, separator key of the internal item [`Inner::read_item`] put in `b` (checked
/// as [`Img::child`] checks it).
#[inline]
pub fn probed_child(off: u64, b: &ItemBuf) -> Result<(u64, u64, KeyRef<'_>)> {
    parse_child(off, b, 0)
}

impl Inner {
    /// A reader for the internal nodes of a tree of geometry `geo`, to [`load`](Self::load)
    /// one node after another (a descent reuses it level by level).
    pub fn new(geo: Geo) -> Inner {
        Inner {
            off: 0,
            n: geo.n,
            count: 0,
            heap: geo.n,
            head: [0u8; NODE_HDR + 256],
        }
    }

    /// Read the header and index of the internal node at `off`, at `level` (1 or more).
    #[inline]
    pub fn load(&mut self, src: &Src, off: u64, level: u64) -> Result<()> {
        // Nothing of a node that fails its checks stays usable.
        self.count = 0;
        self.off = off;
        // A node is cache-line aligned: its first 64 bytes are one line, and they hold the
        // index of up to 56 items.
        src.read(off, &mut self.head[..64])?;
        check_header_n(off, &self.head, self.n, level)?;
        let count = self.head[1] as usize;
        let heap = u16::from_le_bytes([self.head[2], self.head[3]]) as usize;
        // The probes' lines, fetched together (a binary search would otherwise wait for
        // each one in turn).
        let pool = match src {
            Src::Pool(p) => *p,
            Src::Tx(tx) => tx.pool_inner(),
        };
        for line in (heap & !63..self.n).step_by(64) {
            pool.map.prefetch(off + line as u64);
        }
        if NODE_HDR + count > 64 {
            src.read(off + 64, &mut self.head[64..NODE_HDR + count])?;
        }
        self.count = count;
        self.heap = heap;
        Ok(())
    }

    #[inline(always)]
    pub fn count(&self) -> usize {
        self.count
    }

    /// Offset of item `i` in the node (checked against the heap, as [`Img::slot`]).
    #[inline(always)]
    fn slot(&self, i: usize) -> Result<usize> {
        let at = self.head[NODE_HDR + i] as usize * 8;
        if i >= self.count || at < self.heap || at + 8 > self.n {
            return Err(damaged(self.off, "ordered map node index names no item"));
        }
        Ok(at)
    }

    /// Read item `i` into `b` (bytes past the item are left as they were); its byte in the
    /// node.
    #[inline]
    pub fn read_item(&self, src: &Src, i: usize, b: &mut ItemBuf) -> Result<usize> {
        let at = self.slot(i)?;
        let avail = self.n - at;
        let first = avail.min(PROBE_FIRST);
        src.read(self.off + at as u64, &mut b[..first])?;
        if first < CHILD_HDR + 2 {
            return Err(damaged(self.off, "ordered map separator is damaged"));
        }
        let size = match b[CHILD_HDR] {
            OUT => CHILD_HDR + OUT_ENTRY,
            kl => CHILD_HDR + pad8(2 + kl as usize + b[CHILD_HDR + 1] as usize),
        };
        if size > first {
            if size > avail || size > ITEM_MAX_INTERNAL {
                return Err(damaged(self.off, "ordered map separator is damaged"));
            }
            src.read(self.off + (at + first) as u64, &mut b[first..size])?;
        }
        Ok(at)
    }

    /// Child and count of item `i`, and the item's byte (its separator is not read).
    #[inline]
    pub fn child_count(&self, src: &Src, i: usize) -> Result<(u64, u64, usize)> {
        let at = self.slot(i)?;
        if at + CHILD_HDR > self.n {
            return Err(damaged(self.off, "ordered map item runs past its node"));
        }
        let w: [u64; 2] = src.read_pod(self.off + at as u64)?;
        Ok((u64::from_le(w[0]), u64::from_le(w[1]), at))
    }
}

/// A node copied into DRAM. Its buffer goes back to this thread's spares when it drops.
pub struct Img {
    pub off: u64,
    pub b: Vec<u8>,
}

impl Drop for Img {
    fn drop(&mut self) {
        let b = std::mem::take(&mut self.b);
        if b.capacity() == 0 {
            return;
        }
        let _ = SPARE.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < SPARE_MAX {
                s.push(b);
            }
        });
    }
}

impl Clone for Img {
    fn clone(&self) -> Img {
        let mut b = take_buf(self.b.len());
        b.copy_from_slice(&self.b);
        Img { off: self.off, b }
    }
}

impl Img {
    /// Read the node at `off` and check its header (tag, index and heap bounds, level).
    pub fn read(src: &Src, off: u64, geo: Geo, level: u64) -> Result<Img> {
        let mut b = take_buf(geo.n);
        src.read(off, &mut b)?;
        let img = Img { off, b };
        img.validate(level)?;
        Ok(img)
    }

    /// A new, empty node image (not yet in the pool).
    pub fn empty(off: u64, geo: Geo, level: u8) -> Img {
        let mut b = take_buf(geo.n);
        b.fill(0);
        b[0] = level;
        b[2..4].copy_from_slice(&(geo.n as u16).to_le_bytes());
        b[6..8].copy_from_slice(&NODE_TAG);
        Img { off, b }
    }

    fn validate(&self, level: u64) -> Result<()> {
        check_header(self.off, &self.b, level)
    }

    #[inline(always)]
    pub fn n(&self) -> usize {
        self.b.len()
    }
    #[inline(always)]
    pub fn level(&self) -> u8 {
        self.b[0]
    }
    #[inline(always)]
    pub fn leaf(&self) -> bool {
        self.b[0] == 0
    }
    #[inline(always)]
    pub fn count(&self) -> usize {
        self.b[1] as usize
    }
    #[inline(always)]
    pub fn heap(&self) -> usize {
        u16::from_le_bytes([self.b[2], self.b[3]]) as usize
    }
    fn set_count(&mut self, c: usize) {
        self.b[1] = c as u8;
    }
    fn set_heap(&mut self, h: usize) {
        self.b[2..4].copy_from_slice(&(h as u16).to_le_bytes());
    }

    /// Offset of item `i` in the node (checked against the heap).
    #[inline(always)]
    pub fn slot(&self, i: usize) -> Result<usize> {
        let at = self.b[NODE_HDR + i] as usize * 8;
        if at < self.heap() || at + 8 > self.n() {
            return Err(damaged(self.off, "ordered map node index names no item"));
        }
        Ok(at)
    }

    /// Entry `i` of a leaf: key, value.
    #[inline]
    pub fn entry(&self, i: usize) -> Result<(KeyRef<'_>, ValRef<'_>)> {
        let at = self.slot(i)?;
        entry_at(&self.b, at)
            .map(|e| (e.0, e.1))
            .ok_or_else(|| damaged(self.off, "ordered map entry is damaged"))
    }

    /// Item `i` of an internal node: child, count, separator key.
    #[inline]
    pub fn child(&self, i: usize) -> Result<(u64, u64, KeyRef<'_>)> {
        parse_child(self.off, &self.b, self.slot(i)?)
    }

    /// The encoded bytes of item `i`.
    pub fn item(&self, i: usize) -> Result<&[u8]> {
        let at = self.slot(i)?;
        let size = item_size(&self.b, at, self.leaf())
            .ok_or_else(|| damaged(self.off, "ordered map item runs past its node"))?;
        Ok(&self.b[at..at + size])
    }

    /// Every item's bytes, in key order.
    pub fn items(&self) -> Result<Vec<Vec<u8>>> {
        (0..self.count())
            .map(|i| self.item(i).map(|s| s.to_vec()))
            .collect()
    }

    /// Index bytes plus the items' bytes, summed from each item's first bytes ([`item_len`]);
    /// None for an index or an item off the node.
    #[inline]
    pub fn used_quick(&self) -> Option<usize> {
        let (count, heap, n, leaf) = (self.count(), self.heap(), self.n(), self.leaf());
        let mut u = count;
        for &ix in self.b.get(NODE_HDR..NODE_HDR + count)? {
            let at = ix as usize * 8;
            if at < heap || at + 8 > n {
                return None;
            }
            u += item_len(&self.b, at, leaf)?;
        }
        Some(u)
    }

    /// Index bytes plus the items' bytes.
    pub fn used(&self) -> Result<usize> {
        let mut u = self.count();
        for i in 0..self.count() {
            u += self.item(i)?.len();
        }
        Ok(u)
    }

    /// Set the count word of internal item `i` (in the image).
    pub fn set_child_count(&mut self, i: usize, count: u64) -> Result<()> {
        let at = self.slot(i)?;
        self.b[at + 8..at + 16].copy_from_slice(&count.to_le_bytes());
        Ok(())
    }

    /// Set the child pointer and count of internal item `i` (in the image).
    pub fn set_child(&mut self, i: usize, child: u64, count: u64) -> Result<()> {
        let at = self.slot(i)?;
        self.b[at..at + 8].copy_from_slice(&child.to_le_bytes());
        self.b[at + 8..at + 16].copy_from_slice(&count.to_le_bytes());
        Ok(())
    }

    /// Insert `item` at index position `pos`; false when it does not fit the node. Writes it
    /// into free heap space (compacting the heap first when the free bytes are scattered).
    pub fn insert_item(&mut self, geo: Geo, pos: usize, item: &[u8]) -> Result<bool> {
        let count = self.count();
        if count >= u8::MAX as usize || self.used()? + item.len() + 1 > geo.cap() {
            return Ok(false);
        }
        if self.heap() < NODE_HDR + count + 1 + item.len() {
            self.compact(geo)?;
        }
        let at = self.heap() - item.len();
        self.b[at..at + item.len()].copy_from_slice(item);
        self.set_heap(at);
        let ix = NODE_HDR + pos;
        self.b.copy_within(ix..NODE_HDR + count, ix + 1);
        self.b[ix] = (at / 8) as u8;
        self.set_count(count + 1);
        Ok(true)
    }

    /// Where an item of `len` bytes goes at the heap's low end, if it fits the gap between
    /// the index and the heap (and the node has room for an index byte).
    #[inline]
    pub fn gap_for(&self, len: usize) -> Option<usize> {
        let count = self.count();
        if count >= u8::MAX as usize {
            return None;
        }
        // Every used byte lies in the index or the heap, so when the gap takes the item,
        // the node's used bytes plus the item fit its capacity (`insert_item`'s test).
        let at = self.heap().checked_sub(len)?;
        (at > NODE_HDR + count).then_some(at)
    }

    /// The start of the smallest run of dead bytes inside the heap (between its start and
    /// the lowest item, between two items, or after the highest) that takes an item of `len`
    /// bytes, when the index has room for one byte more; None when there is none, or when the
    /// items do not parse or overlap (a damaged node: the caller's other paths report it).
    ///
    /// Removals leave such runs (an item's bytes become dead where it lay), and a leaf whose
    /// gap below the heap is used up would otherwise be compacted: every item moved, so the
    /// whole node rewritten through the redo log, for one insert.
    pub fn hole_for(&self, len: usize) -> Option<usize> {
        let count = self.count();
        let heap = self.heap();
        if count >= u8::MAX as usize || NODE_HDR + count >= heap || len == 0 {
            return None;
        }
        let leaf = self.leaf();
        // One bit per 8-byte word of the node (2048 bytes at most: 256 words), set where an
        // item lies; items are 8-aligned and their sizes multiples of 8.
        let words = self.n() / 8;
        let mut used = [0u64; 4];
        for i in 0..count {
            let at = self.slot(i).ok()?;
            let size = item_len(&self.b, at, leaf)?;
            let (mut w, end) = (at / 8, (at + size).div_ceil(8));
            if end > words {
                return None;
            }
            while w < end {
                let k = (end - w).min(64 - w % 64);
                let mask = if k == 64 {
                    !0
                } else {
                    ((1u64 << k) - 1) << (w % 64)
                };
                if used[w / 64] & mask != 0 {
                    return None;
                }
                used[w / 64] |= mask;
                w += k;
            }
        }
        let bit = |w: usize| used[w / 64] >> (w % 64) & 1 == 1;
        let need = len.div_ceil(8);
        let mut best: Option<(usize, usize)> = None; // (run length, start word)
        let mut w = heap / 8;
        while w < words {
            if bit(w) {
                w += 1;
                continue;
            }
            let start = w;
            while w < words && !bit(w) {
                w += 1;
            }
            let run = w - start;
            if run >= need && best.is_none_or(|b| run < b.0) {
                best = Some((run, start));
                if run == need {
                    break;
                }
            }
        }
        best.map(|b| b.1 * 8)
    }

    /// Where [`Gap::insert`] puts an item of `len` bytes without moving any other: the gap
    /// between the index and the heap ([`gap_for`](Self::gap_for)), else the smallest dead
    /// run inside the heap ([`hole_for`](Self::hole_for)).
    #[inline]
    pub fn spot_for(&self, len: usize) -> Option<usize> {
        self.gap_for(len).or_else(|| self.hole_for(len))
    }

    /// Insert `item` at index position `pos`, its bytes at `at` (a [`spot_for`] answer for
    /// its length: free or dead bytes, the index with room for one byte more).
    ///
    /// [`spot_for`]: Self::spot_for
    #[inline]
    fn place_at(&mut self, pos: usize, at: usize, item: &[u8]) {
        let count = self.count();
        self.b[at..at + item.len()].copy_from_slice(item);
        if at < self.heap() {
            self.set_heap(at);
        }
        let ix = NODE_HDR + pos;
        self.b.copy_within(ix..NODE_HDR + count, ix + 1);
        self.b[ix] = (at / 8) as u8;
        self.set_count(count + 1);
    }

    /// Remove the item at `pos` from the index; its bytes become dead (reclaimed at once when
    /// it is the lowest item of the heap).
    pub fn remove_item(&mut self, pos: usize) -> Result<()> {
        let count = self.count();
        let at = self.slot(pos)?;
        let size = self.item(pos)?.len();
        let ix = NODE_HDR + pos;
        self.b.copy_within(ix + 1..NODE_HDR + count, ix);
        self.b[NODE_HDR + count - 1] = 0;
        self.set_count(count - 1);
        if count == 1 {
            self.set_heap(self.n());
        } else if at == self.heap() {
            self.set_heap(at + size);
        }
        Ok(())
    }

    /// Remove `m` items from `pos` on.
    pub fn remove_items(&mut self, pos: usize, m: usize) -> Result<()> {
        let count = self.count();
        let ix = NODE_HDR + pos;
        self.b.copy_within(ix + m..NODE_HDR + count, ix);
        for i in NODE_HDR + count - m..NODE_HDR + count {
            self.b[i] = 0;
        }
        self.set_count(count - m);
        if self.count() == 0 {
            self.set_heap(self.n());
        }
        Ok(())
    }

    /// Drop items from `keep` on (their bytes become dead): the left half of a split.
    pub fn truncate(&mut self, keep: usize) {
        let count = self.count();
        for i in NODE_HDR + keep..NODE_HDR + count {
            self.b[i] = 0;
        }
        self.set_count(keep);
    }

    /// Rewrite the heap without dead bytes (items keep their index order).
    pub fn compact(&mut self, geo: Geo) -> Result<()> {
        let items = self.items()?;
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        let level = self.level();
        *self = build(self.off, geo, level, &refs)
            .ok_or_else(|| damaged(self.off, "ordered map node overflows"))?;
        Ok(())
    }
}

/// A node's header and index (and the index byte after them) saved before an insert or a
/// removal, which change nothing else in place: afterwards only these bytes are compared
/// with the image to find what to write (not the whole node).
pub struct Head {
    b: [u8; NODE_HDR + 256],
    count: usize,
}

impl Head {
    pub fn save(img: &Img) -> Head {
        let mut b = [0u8; NODE_HDR + 256];
        let len = pad8(NODE_HDR + img.count() + 1).min(img.n());
        b[..len].copy_from_slice(&img.b[..len]);
        Head {
            b,
            count: img.count(),
        }
    }

    /// Write the header and index bytes of `img` that differ from the saved ones. `img` may
    /// hold at most one item more than when saved.
    pub fn write_changes(&self, tx: &mut Tx, t: &T, img: &Img) -> Result<()> {
        debug_assert!(img.count() <= self.count + 1);
        let len = pad8(NODE_HDR + self.count.max(img.count())).min(img.n());
        write_diff(tx, t, img.off, img.off, &self.b[..len], &img.b[..len])
    }
}

/// An item [`Gap::insert`] placed where no other item moves (at [`Img::spot_for`]), with the
/// bytes it covered (free or dead bytes as the transaction sees them), to write only the
/// words that differ.
pub struct Gap {
    at: usize,
    was: [u8; 256],
}

impl Gap {
    /// Where [`Gap::insert`] puts an item of `len` bytes into `img` (None: nowhere without
    /// moving items).
    #[inline]
    pub fn spot(img: &Img, len: usize) -> Option<usize> {
        if len > 256 {
            return None;
        }
        img.spot_for(len)
    }

    /// Insert `item` at index position `pos` of `img` where it moves no other item: into the
    /// gap between the index and the heap, else into the smallest dead run inside the heap
    /// that takes it (see [`Img::spot_for`]). None, `img` unchanged, when there is no such
    /// place or the item is over 256 bytes (then the node is compacted or split).
    #[inline]
    pub fn insert(img: &mut Img, pos: usize, item: &[u8]) -> Option<Gap> {
        let at = Gap::spot(img, item.len())?;
        Gap::insert_at(img, pos, at, item)
    }

    /// [`Gap::insert`] at `at`, what [`Gap::spot`] answered for the item's length on this
    /// image (None, `img` unchanged, for a position past the index or a spot off the node).
    #[inline]
    pub fn insert_at(img: &mut Img, pos: usize, at: usize, item: &[u8]) -> Option<Gap> {
        let len = item.len();
        if len > 256 || pos > img.count() {
            return None;
        }
        let mut was = [0u8; 256];
        was[..len].copy_from_slice(img.b.get(at..at + len)?);
        img.place_at(pos, at, item);
        Some(Gap { at, was })
    }

    /// Write the item's words that differ from the bytes it covered.
    pub fn write(&self, tx: &mut Tx, t: &T, img: &Img, item: &[u8]) -> Result<()> {
        write_diff(
            tx,
            t,
            img.off,
            img.off + self.at as u64,
            &self.was[..item.len()],
            item,
        )
    }
}

/// Bytes a node of `items` uses (index plus items).
pub fn used_of(items: &[&[u8]]) -> usize {
    items.iter().map(|i| i.len() + 1).sum()
}

/// A node image holding `items` in this order; None when they do not fit.
pub fn build(off: u64, geo: Geo, level: u8, items: &[&[u8]]) -> Option<Img> {
    if items.len() > u8::MAX as usize || used_of(items) > geo.cap() {
        return None;
    }
    let mut img = Img::empty(off, geo, level);
    let mut heap = geo.n;
    // Item 0 lowest: a node built whole reads in address order.
    let total: usize = items.iter().map(|i| i.len()).sum();
    heap -= total;
    let mut at = heap;
    for (i, it) in items.iter().enumerate() {
        img.b[at..at + it.len()].copy_from_slice(it);
        img.b[NODE_HDR + i] = (at / 8) as u8;
        at += it.len();
    }
    img.set_heap(heap);
    img.set_count(items.len());
    Some(img)
}

/// Write `new` at `off`, inside the node at `node`, over the bytes whose current image (as the transaction sees it) is `old`: only
/// the runs of 8-byte words that differ, gaps of up to two equal words merged (a log entry's
/// header costs two words). A node this transaction allocated is written in place (`Tx`
/// tells fresh objects apart), others through the redo log; `t`'s cached images take the same
/// bytes.
pub fn write_diff(tx: &mut Tx, t: &T, node: u64, off: u64, old: &[u8], new: &[u8]) -> Result<()> {
    debug_assert_eq!(old.len(), new.len());
    let words = new.len() / 8;
    let differs = |w: usize| old[w * 8..w * 8 + 8] != new[w * 8..w * 8 + 8];
    let mut w = 0;
    while w < words {
        if !differs(w) {
            w += 1;
            continue;
        }
        let start = w;
        let mut end = w + 1;
        let mut j = w + 1;
        while j < words && j <= end + 2 {
            if differs(j) {
                end = j + 1;
            }
            j += 1;
        }
        t.write(tx, node, off + start as u64 * 8, &new[start * 8..end * 8])?;
        w = end;
    }
    Ok(())
}
