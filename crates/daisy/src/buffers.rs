//! A transaction's write buffers: the redo record under construction (entries in their
//! on-media format), and the indexes that let the transaction read its own writes
//! (read-your-writes) and find its new objects in O(1) once it is big. Pure DRAM data
//! structures: nothing here touches a pool.

use crate::alloc::Freed;
use crate::log::*;

/// Entries a transaction holds before its lookups switch from scanning to indexes. Small:
/// a scan of the entries costs a compare per entry on every read, and a group commit of
/// daisy serve reads its collections' headers and chunks many times (measured in-process,
/// LPUSH in groups of 16: 24 entries scanned cost 540-570 ns per command, indexing from 8
/// 485 ns; SET, HSET and ZADD unchanged within noise).
const INDEX_FROM: usize = 8;

/// End of a chain in `TxBuffers::fresh_nodes`.
const NO_NODE: u32 = u32::MAX;

/// The bytes of one cache line that a big transaction wrote, newest value of each: what a
/// read of the line takes from the transaction instead of the pool.
#[derive(Clone, Copy)]
struct ShadowLine {
    data: [u8; 64],
    /// Bit `i`: byte `i` of `data` holds a value the transaction wrote.
    held: u64,
}

/// The lines of one 4 KiB page that a big transaction wrote: `lines` bit `i` is set when line
/// `i` of the page has a [`ShadowLine`], which is then `TxBuffers::shadows[idx[i]]`. One hash
/// lookup per page finds every written line a read covers (a read of a tree node or a
/// chunk spans several lines), instead of one lookup per line.
#[derive(Clone, Copy)]
struct ShadowPage {
    lines: u64,
    idx: [u32; 64],
}

/// Words of `TxBuffers::shadow_filter`: 4096 bits, 512 bytes, cleared at the end of every
/// transaction that built the line index.
const SHADOW_FILTER_WORDS: usize = 64;

/// The bit of `TxBuffers::shadow_filter` that page `page` sets: a multiplicative hash (pages
/// of one transaction are often consecutive; the product spreads them over the bits).
#[inline(always)]
fn shadow_filter_bit(page: u64) -> (usize, u64) {
    let h = (page.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize; // 12 bits
    (h >> 6, 1u64 << (h & 63))
}

/// log2 of the page size of `TxBuffers::fresh_pages`.
const FRESH_PAGE_SHIFT: u32 = 12;

/// New objects spanning more pages than this are kept in `TxBuffers::fresh_big` instead.
const FRESH_PAGES_MAX: u64 = 16;

/// Where each entry of a list keyed by offset sits (`TxBuffers::fresh`, `reserved`), for the
/// removals that cancelling an allocation makes. Built only when a transaction cancels an
/// allocation while the list is long: it covers `list[..covered]` and catches up at the next
/// lookup, so allocating costs nothing more; a removal keeps it exact across `swap_remove`.
#[derive(Default)]
pub(crate) struct PosIndex {
    pos: FastMap<u64, u32>,
    covered: usize,
}

/// Lists up to this long are searched from the end instead of indexed (under the power-
/// failure simulator, whose transactions are small, 2: the indexed path is the one checked).
const POS_INDEX_FROM: usize = if cfg!(feature = "sim") { 2 } else { 32 };

impl PosIndex {
    /// The position in `list` of the entry whose offset is `off`, if any.
    pub(crate) fn find<X>(&mut self, list: &[(u64, X)], off: u64) -> Option<usize> {
        if self.covered == 0 && list.len() <= POS_INDEX_FROM {
            return list.iter().rposition(|e| e.0 == off);
        }
        if self.covered > list.len() {
            // Entries were popped behind the index's back (a failed allocation): rebuild.
            self.pos.clear();
            self.covered = 0;
        }
        for (i, e) in list.iter().enumerate().skip(self.covered) {
            self.pos.insert(e.0, i as u32);
        }
        self.covered = list.len();
        self.pos.get(&off).map(|&i| i as usize)
    }

    /// `list.swap_remove(i)` of the entry at `off`, keeping the index exact.
    pub(crate) fn swap_remove<X: Copy>(&mut self, list: &mut Vec<(u64, X)>, i: usize, off: u64) {
        list.swap_remove(i);
        if self.covered == 0 {
            return;
        }
        // `find` just covered the whole list.
        debug_assert_eq!(self.covered, list.len() + 1);
        self.pos.remove(&off);
        if let Some(moved) = list.get(i) {
            self.pos.insert(moved.0, i as u32);
        }
        self.covered = list.len();
    }

    pub(crate) fn clear(&mut self) {
        if self.covered != 0 {
            self.pos.clear();
            self.covered = 0;
        }
    }
}

/// Ranges of `TxBuffers::fresh_dirty` kept in a vector before they move into the indexed set
/// (4 under the power-failure simulator, so that its small transactions use the set).
pub(crate) const FRESH_DIRTY_INDEX_FROM: usize = if cfg!(feature = "sim") { 4 } else { 256 };

/// Add [a, b) to a set of disjoint ranges keyed by start, merging what it overlaps or touches.
fn set_insert(set: &mut std::collections::BTreeMap<u64, u64>, mut a: u64, mut b: u64) {
    if let Some((&s, &e)) = set.range(..=a).next_back() {
        if e >= a {
            if e >= b {
                return;
            }
            set.remove(&s);
            a = s;
        }
    }
    while let Some((&s, &e)) = set.range(a..=b).next() {
        set.remove(&s);
        b = b.max(e);
    }
    set.insert(a, b);
}

/// First and last 4 KiB page of the new object at `o` of `s` bytes.
#[inline(always)]
fn fresh_pages_of(o: u64, s: u64) -> (u64, u64) {
    (
        o >> FRESH_PAGE_SHIFT,
        (o + s.max(1) - 1) >> FRESH_PAGE_SHIFT,
    )
}

/// Bits a..b of a cache line's 64 bytes (0 <= a < b <= 64).
#[inline(always)]
fn line_bits(a: u64, b: u64) -> u64 {
    let upto = if b >= 64 { u64::MAX } else { (1u64 << b) - 1 };
    upto & !((1u64 << a) - 1)
}

/// A hash map for the transaction's indexes: keys are pool offsets, not attacker-chosen,
/// so a fast multiplicative hash is enough (std's SipHash would cost more than the scan).
type FastMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<OffsetHasher>>;

#[derive(Default)]
struct OffsetHasher(u64);

impl std::hash::Hasher for OffsetHasher {
    #[inline(always)]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline(always)]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    #[inline(always)]
    fn write_u8(&mut self, v: u8) {
        self.write_u64(v as u64);
    }
}

/// The log record under construction: `buf[..len]`, in a buffer that only grows, so that
/// appending a word entry is a bounds check and two stores. (`Vec::extend_from_slice` and
/// `Vec::resize` are not always inlined into big callers; then every logged word paid two
/// calls and a `memcpy`.) Derefs to the bytes in use.
pub(crate) struct RecordBuf {
    pub(crate) buf: Vec<u8>,
    pub(crate) len: usize,
}

impl RecordBuf {
    pub(crate) fn new() -> Self {
        RecordBuf {
            buf: vec![0; 512],
            len: LOG_HEADER_SIZE,
        }
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn grow(&mut self, need: usize) {
        let n = need.next_power_of_two().max(self.buf.len() * 2);
        self.buf.resize(n, 0);
    }

    /// Make room for `n` more bytes and return them (their old contents are unspecified).
    #[inline(always)]
    pub(crate) fn append(&mut self, n: usize) -> &mut [u8] {
        let at = self.len;
        if at + n > self.buf.len() {
            self.grow(at + n);
        }
        self.len = at + n;
        &mut self.buf[at..at + n]
    }

    #[inline(always)]
    pub(crate) fn push_array<const N: usize>(&mut self, bytes: &[u8; N]) {
        let dst: &mut [u8; N] = self.append(N).try_into().unwrap();
        *dst = *bytes;
    }

    #[inline(always)]
    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.append(bytes.len()).copy_from_slice(bytes);
    }

    /// Grow to `new_len` with zero bytes (an entry's padding, or room read into next).
    pub(crate) fn zero_extend_to(&mut self, new_len: usize) {
        debug_assert!(new_len >= self.len);
        self.append(new_len.saturating_sub(self.len)).fill(0);
    }

    /// Bytes in use (shadows the slice's `len`, which would pay a bounds check per call).
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The buffer's first 64 bytes (the record, and unspecified bytes past it when shorter).
    #[inline(always)]
    pub(crate) fn first_line(&self) -> &[u8; 64] {
        // The buffer never shrinks below its initial 512 bytes.
        self.buf[..64].try_into().unwrap()
    }

    #[inline(always)]
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

impl std::ops::Deref for RecordBuf {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::ops::DerefMut for RecordBuf {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

/// A lane keeps its record buffer between transactions up to this size; a transaction that
/// grew it beyond (one larger than its log slot, say) gives it back at its end.
const RECORD_KEEP_MAX: usize = 4 << 20;

/// Reusable buffers of a lane's current transaction.
pub(crate) struct TxBuffers {
    /// The log record being built: [`LOG_HEADER_SIZE`] bytes reserved for the header (filled
    /// in at commit), then the entries exactly as they go to the log slot.
    pub(crate) record: RecordBuf,
    pub(crate) n_entries: u32,
    /// Copy entries: (target, len, data position in payload), for read-your-writes.
    pub(crate) copies: Vec<(u64, u64, usize)>,
    /// Bit-operation entries: (word, kind, mask position in payload), merged per word.
    pub(crate) bitops: Vec<(u64, u8, usize)>,
    /// Once a transaction holds more than [`INDEX_FROM`] entries (a group commit of many
    /// operations), lookups go through these indexes instead of scanning the lists, so a
    /// big transaction costs O(1) per read and write, not O(entries). Small transactions
    /// never build them. `shadows`: the [`ShadowLine`] of every cache line the transaction
    /// wrote (the newest logged value of each byte it wrote); `shadow_pages`: 4 KiB page ->
    /// its [`ShadowPage`] in `shadow_page_slots` (which lines of the page have one, and
    /// where), so a read costs one lookup per page it spans, not per line. `shadow_filter`:
    /// a bit per hashed page (see [`shadow_filter_bit`]), set for every page in
    /// `shadow_pages`: a read of a page the transaction never wrote (most reads: the keys,
    /// buckets and nodes a command only looks at) is answered by one bit test, without a
    /// hash lookup. Exact for misses: a clear bit means no page of that hash was written.
    /// `bitop_index`: (word, kind) -> mask position.
    shadows: Vec<ShadowLine>,
    shadow_pages: FastMap<u64, u32>,
    shadow_page_slots: Vec<ShadowPage>,
    shadow_filter: [u64; SHADOW_FILTER_WORDS],
    bitop_index: FastMap<(u64, u8), usize>,
    /// `fresh` by 4 KiB page, built lazily: it covers `fresh[..fresh_paged]` and catches up
    /// only when a lookup misses the newest object (most writes into new objects go to the
    /// one just allocated, so a transaction that allocates many objects often never builds
    /// it). `fresh_pages`: page -> newest node of that page's chain in `fresh_nodes`, whose
    /// nodes are (start, size, next older node) of the objects overlapping the page. Exact:
    /// an object holding [off, off + len) overlaps the page of `off`. Objects over
    /// [`FRESH_PAGES_MAX`] pages go to `fresh_big` (scanned). A cancelled object's nodes get
    /// size 0. `fresh_first_node[i]`: the node of `fresh[i]`'s first page (its pages' nodes
    /// are consecutive), or [`NO_NODE`] for one in `fresh_big`, for `i < fresh_paged`: a
    /// cancelled object's nodes are found without walking chains.
    fresh_pages: FastMap<u64, u32>,
    fresh_nodes: Vec<(u64, u64, u32)>,
    fresh_first_node: Vec<u32>,
    fresh_big: Vec<(u64, u64)>,
    fresh_paged: usize,
    /// Objects allocated by this transaction: (offset, size). Written in place.
    pub(crate) fresh: Vec<(u64, u64)>,
    /// Blocks taken from the lane cache: (offset, class), returned on abort.
    pub(crate) reserved: Vec<(u64, u16)>,
    /// Positions in `fresh` and `reserved` (see [`PosIndex`]).
    pub(crate) fresh_pos: PosIndex,
    pub(crate) reserved_pos: PosIndex,
    /// Chunks taken from the heap: (first chunk, count, is_run), returned on abort.
    pub(crate) chunks_taken: Vec<(u64, u64, bool)>,
    /// Objects freed by this transaction, deferred on commit.
    pub(crate) freed: Vec<Freed>,
    /// Byte ranges [start, end) written in place into new objects (see `persist_fresh`).
    /// Past [`FRESH_DIRTY_INDEX_FROM`] ranges they move into `fresh_dirty_set` (disjoint,
    /// keyed by start), where cancelling an object cuts its bytes out in O(log n): a
    /// transaction that writes into many new objects and frees some of them again (a script
    /// adding 800,000 members to a set, its table's segments split and the old ones freed)
    /// would otherwise scan every range at every free, quadratic in its size. Commit takes
    /// the set back into the vector ([`Self::settle_fresh_dirty`]).
    pub(crate) fresh_dirty: Vec<(u64, u64)>,
    pub(crate) fresh_dirty_set: std::collections::BTreeMap<u64, u64>,
    /// Bytes of new objects were written back without a fence yet (large copies into new
    /// objects); the commit needs a fence before its record.
    pub(crate) fresh_unfenced: bool,
    /// Flush and fence the applied lines at the end of commit instead of deferring them
    /// ([`Tx::durable_apply`]).
    pub(crate) durable_apply: bool,
    /// Where the logged copies of new objects begin in `record` (they are already in place,
    /// so commit does not apply them again); `record.len()` when there are none.
    pub(crate) fresh_log_start: usize,
    /// Transactions this lane has begun (`Tx::serial`); never reset.
    pub(crate) serial: u64,
    /// Ranges declared for direct stores and their durable undo extent (`Tx::add_range`).
    /// Commit and abort release it before `clear`, which only drops what an error path left.
    pub(crate) undo: Option<Box<crate::tx::UndoLog>>,
}

impl Default for TxBuffers {
    fn default() -> Self {
        TxBuffers {
            record: RecordBuf::new(),
            n_entries: 0,
            copies: Vec::new(),
            bitops: Vec::new(),
            shadows: Vec::new(),
            shadow_pages: FastMap::default(),
            shadow_page_slots: Vec::new(),
            shadow_filter: [0; SHADOW_FILTER_WORDS],
            bitop_index: FastMap::default(),
            fresh_pages: FastMap::default(),
            fresh_nodes: Vec::new(),
            fresh_first_node: Vec::new(),
            fresh_big: Vec::new(),
            fresh_paged: 0,
            fresh: Vec::new(),
            reserved: Vec::new(),
            fresh_pos: PosIndex::default(),
            reserved_pos: PosIndex::default(),
            chunks_taken: Vec::new(),
            freed: Vec::new(),
            fresh_dirty: Vec::new(),
            fresh_dirty_set: Default::default(),
            fresh_unfenced: false,
            durable_apply: false,
            fresh_log_start: usize::MAX,
            serial: 0,
            undo: None,
        }
    }
}

impl TxBuffers {
    /// Position of the mask of the bit-operation entry for (`word`, `kind`), if any.
    #[inline(always)]
    pub(crate) fn find_bitop(&self, word: u64, kind: u8) -> Option<usize> {
        if self.bitops.len() <= INDEX_FROM {
            // Newest first: consecutive allocations usually share a bitmap word.
            self.bitops
                .iter()
                .rev()
                .find(|e| e.0 == word && e.1 == kind)
                .map(|e| e.2)
        } else {
            self.bitop_index.get(&(word, kind)).copied()
        }
    }

    pub(crate) fn push_bitop(&mut self, e: (u64, u8, usize)) {
        self.bitops.push(e);
        if self.bitops.len() > INDEX_FROM {
            if self.bitop_index.is_empty() {
                for &(w, k, p) in &self.bitops {
                    self.bitop_index.insert((w, k), p);
                }
            } else {
                self.bitop_index.insert((e.0, e.1), e.2);
            }
        }
    }

    /// Note bytes [off, off + len) written in place into a new object (see `fresh_dirty`).
    /// Adjacent ranges merge (consecutive small allocations).
    #[inline]
    pub(crate) fn note_fresh_dirty(&mut self, off: u64, len: u64) {
        if !self.fresh_dirty_set.is_empty() {
            return set_insert(&mut self.fresh_dirty_set, off, off + len);
        }
        let d = &mut self.fresh_dirty;
        if let Some(last) = d.last_mut() {
            if off >= last.0 && off <= last.1 {
                last.1 = last.1.max(off + len);
                return;
            }
        }
        d.push((off, off + len));
        if d.len() > FRESH_DIRTY_INDEX_FROM {
            for (a, b) in std::mem::take(d) {
                set_insert(&mut self.fresh_dirty_set, a, b);
            }
        }
    }

    /// Forget the bytes [a, b) of a cancelled new object: they must not be logged or
    /// flushed at commit (a later owner's contents would be overwritten at replay).
    pub(crate) fn cut_fresh_dirty(&mut self, a: u64, b: u64) {
        if self.fresh_dirty_set.is_empty() {
            let d = &mut self.fresh_dirty;
            let mut i = 0;
            while i < d.len() {
                let (s, e) = d[i];
                if e <= a || s >= b {
                    i += 1;
                    continue;
                }
                match (s < a, e > b) {
                    (true, true) => {
                        d[i] = (s, a);
                        d.insert(i + 1, (b, e));
                        i += 2;
                    }
                    (true, false) => {
                        d[i] = (s, a);
                        i += 1;
                    }
                    (false, true) => {
                        d[i] = (b, e);
                        i += 1;
                    }
                    (false, false) => {
                        d.remove(i);
                    }
                }
            }
            return;
        }
        let set = &mut self.fresh_dirty_set;
        // The ranges overlapping [a, b): the one starting before `a` (if it reaches past it)
        // and those starting in [a, b).
        let mut hit: Vec<(u64, u64)> = set
            .range(..a)
            .next_back()
            .filter(|&(_, &e)| e > a)
            .map(|(&s, &e)| (s, e))
            .into_iter()
            .collect();
        hit.extend(set.range(a..b).map(|(&s, &e)| (s, e)));
        for (s, e) in hit {
            set.remove(&s);
            if s < a {
                set.insert(s, a);
            }
            if e > b {
                set.insert(b, e);
            }
        }
    }

    /// Take the indexed ranges back into `fresh_dirty` (commit reads the vector).
    #[inline]
    pub(crate) fn settle_fresh_dirty(&mut self) {
        if !self.fresh_dirty_set.is_empty() {
            let set = std::mem::take(&mut self.fresh_dirty_set);
            self.fresh_dirty.extend(set);
        }
    }

    #[inline(always)]
    pub(crate) fn push_fresh(&mut self, e: (u64, u64)) {
        self.fresh.push(e);
    }

    /// Bring `fresh_pages` up to date with `fresh`.
    pub(crate) fn sync_fresh_pages(&mut self) {
        for &(o, s) in &self.fresh[self.fresh_paged..] {
            let (p0, p1) = fresh_pages_of(o, s);
            if p1 - p0 >= FRESH_PAGES_MAX {
                self.fresh_big.push((o, s));
                self.fresh_first_node.push(NO_NODE);
                continue;
            }
            self.fresh_first_node.push(self.fresh_nodes.len() as u32);
            for page in p0..=p1 {
                let node = self.fresh_nodes.len() as u32;
                let head = self.fresh_pages.entry(page).or_insert(NO_NODE);
                self.fresh_nodes.push((o, s, *head));
                *head = node;
            }
        }
        self.fresh_paged = self.fresh.len();
    }

    /// The object this transaction allocated that holds [off, off + len), if any:
    /// (start, size).
    #[inline(always)]
    pub(crate) fn fresh_holding(&mut self, off: u64, len: u64) -> Option<(u64, u64)> {
        let inside = |&(o, s): &(u64, u64)| off >= o && off + len <= o + s;
        match self.fresh.last() {
            None => return None,
            Some(e) if inside(e) => return Some(*e),
            _ => {}
        }
        if self.fresh.len() > INDEX_FROM {
            self.sync_fresh_pages();
        }
        self.fresh_lookup(off, len)
    }

    /// [`Self::fresh_holding`] without bringing the index up to date (for `&self` callers):
    /// the index covers `fresh[..fresh_paged]`, the rest is scanned.
    pub(crate) fn fresh_lookup(&self, off: u64, len: u64) -> Option<(u64, u64)> {
        let inside = |&(o, s): &(u64, u64)| off >= o && off + len <= o + s;
        if self.fresh.len() <= INDEX_FROM {
            return self.fresh.iter().rev().copied().find(inside);
        }
        let mut node = self
            .fresh_pages
            .get(&(off >> FRESH_PAGE_SHIFT))
            .copied()
            .unwrap_or(NO_NODE);
        while node != NO_NODE {
            let (o, s, next) = self.fresh_nodes[node as usize];
            if inside(&(o, s)) {
                return Some((o, s));
            }
            node = next;
        }
        self.fresh_big.iter().copied().find(inside).or_else(|| {
            self.fresh[self.fresh_paged..]
                .iter()
                .rev()
                .copied()
                .find(inside)
        })
    }

    /// Forget new object `off` (its allocation is cancelled), `fresh[i]`, keeping
    /// `fresh[..fresh_paged]` covered by the index across the `swap_remove` that takes it out
    /// of `fresh`. Constant time per page of the object: its nodes are found through
    /// `fresh_first_node`, not by walking the pages' chains (a transaction that allocates
    /// and frees many small objects has long chains).
    pub(crate) fn unindex_fresh(&mut self, i: usize, off: u64, size: u64) {
        if self.fresh_paged == 0 {
            return;
        }
        // The swap_remove moves the newest object into the cancelled one's slot: index it.
        self.sync_fresh_pages();
        self.fresh_paged -= 1;
        let first = self.fresh_first_node.swap_remove(i);
        if first == NO_NODE {
            self.fresh_big.retain(|&(o, _)| o != off);
            return;
        }
        let (p0, p1) = fresh_pages_of(off, size);
        let nodes = first as usize..=first as usize + (p1 - p0) as usize;
        for n in &mut self.fresh_nodes[nodes] {
            debug_assert_eq!(n.0, off, "fresh_first_node names another object's nodes");
            n.1 = 0;
        }
    }

    #[inline(always)]
    pub(crate) fn push_copy(&mut self, e: (u64, u64, usize)) {
        self.copies.push(e);
        if self.copies.len() > INDEX_FROM {
            let from = if self.shadows.is_empty() {
                0
            } else {
                self.copies.len() - 1
            };
            for i in from..self.copies.len() {
                let (t, len, pos) = self.copies[i];
                self.shadow_write(t, len, pos);
            }
        }
    }

    /// Record in the line index that the bytes [t, t + len) now hold `record[pos..]`
    /// (a copy just logged, or an earlier copy's data rewritten in place).
    pub(crate) fn shadow_write(&mut self, t: u64, len: u64, pos: usize) {
        if len == 0 {
            return;
        }
        let end = t + len;
        // The page slot of the line before, while the copy stays in its page.
        let mut cur: Option<(u64, usize)> = None;
        for line in t / 64..=(end - 1) / 64 {
            let base = line * 64;
            let page = line >> 6;
            let slot = match cur {
                Some((p, slot)) if p == page => slot,
                _ => {
                    let next = self.shadow_page_slots.len() as u32;
                    let slot = *self.shadow_pages.entry(page).or_insert(next);
                    if slot == next {
                        self.shadow_page_slots.push(ShadowPage {
                            lines: 0,
                            idx: [0; 64],
                        });
                        let (w, bit) = shadow_filter_bit(page);
                        self.shadow_filter[w] |= bit;
                    }
                    cur = Some((page, slot as usize));
                    slot as usize
                }
            };
            let sp = &mut self.shadow_page_slots[slot];
            let bit = line & 63;
            let idx = if sp.lines & (1 << bit) != 0 {
                sp.idx[bit as usize]
            } else {
                let next = self.shadows.len() as u32;
                sp.lines |= 1 << bit;
                sp.idx[bit as usize] = next;
                self.shadows.push(ShadowLine {
                    data: [0; 64],
                    held: 0,
                });
                next
            };
            let (s, e) = (t.max(base), end.min(base + 64));
            let src = pos + (s - t) as usize;
            let sh = &mut self.shadows[idx as usize];
            sh.data[(s - base) as usize..(e - base) as usize]
                .copy_from_slice(&self.record[src..src + (e - s) as usize]);
            sh.held |= line_bits(s - base, e - base);
        }
    }

    /// Whether the line index is in use (the transaction holds more than [`INDEX_FROM`]
    /// copies): then rewriting a copy's data in place must also go through `shadow_write`.
    #[inline(always)]
    pub(crate) fn indexed(&self) -> bool {
        self.copies.len() > INDEX_FROM
    }

    /// Take the bytes of `line`, whose shadow is `sh`, into `out` (read from `off`).
    #[inline(always)]
    fn overlay_line(sh: &ShadowLine, line: u64, off: u64, out: &mut [u8]) {
        let end = off + out.len() as u64;
        let base = line * 64;
        let (lo, hi) = (base.max(off), (base + 64).min(end));
        let want = line_bits(lo - base, hi - base);
        let mut take = sh.held & want;
        if take == want {
            out[(lo - off) as usize..(hi - off) as usize]
                .copy_from_slice(&sh.data[(lo - base) as usize..(hi - base) as usize]);
            return;
        }
        while take != 0 {
            let k = take.trailing_zeros() as u64;
            out[(base + k - off) as usize] = sh.data[k as usize];
            take &= take - 1;
        }
    }

    /// Overlay this transaction's logged copies on `out`, read from `off`.
    #[inline(always)]
    pub(crate) fn overlay(&self, off: u64, out: &mut [u8]) {
        let end = off + out.len() as u64;
        let apply = |out: &mut [u8], t: u64, len: u64, pos: usize, lo: u64, hi: u64| {
            let (s, e) = (t.max(lo), (t + len).min(hi));
            if s < e {
                let src = pos + (s - t) as usize;
                let n = (e - s) as usize;
                out[(s - off) as usize..(s - off) as usize + n]
                    .copy_from_slice(&self.record[src..src + n]);
            }
        };
        if self.copies.len() <= INDEX_FROM {
            for &(t, len, pos) in &self.copies {
                apply(out, t, len, pos, off, end);
            }
            return;
        }
        if off == end {
            return;
        }
        let (first, last) = (off / 64, (end - 1) / 64);
        for page in first >> 6..=last >> 6 {
            let (w, bit) = shadow_filter_bit(page);
            if self.shadow_filter[w] & bit == 0 {
                continue;
            }
            let Some(&slot) = self.shadow_pages.get(&page) else {
                continue;
            };
            let sp = &self.shadow_page_slots[slot as usize];
            // This page's lines of the read, among those the transaction wrote.
            let lo = first.max(page << 6) & 63;
            let hi = last.min((page << 6) + 63) & 63;
            let mut m = sp.lines & line_bits(lo, hi + 1);
            while m != 0 {
                let k = m.trailing_zeros() as usize;
                let sh = &self.shadows[sp.idx[k] as usize];
                Self::overlay_line(sh, (page << 6) + k as u64, off, out);
                m &= m - 1;
            }
        }
    }

    /// Net heap bytes this transaction allocates if it commits: its blocks and large objects
    /// minus what it frees (a large object allocated and freed here counts 0), as
    /// `Pool::usage` counts objects. Run chunks taken for carving count nothing themselves.
    pub(crate) fn alloc_balance(&self) -> i64 {
        if self.reserved.is_empty() && self.chunks_taken.is_empty() && self.freed.is_empty() {
            return 0;
        }
        let block = |class: u16| crate::layout::SIZE_CLASSES[class as usize] as i64;
        let large = |chunks: u64| (chunks * crate::layout::CHUNK_SIZE) as i64;
        let mut n: i64 = self.reserved.iter().map(|&(_, class)| block(class)).sum();
        n += self
            .chunks_taken
            .iter()
            .filter(|c| !c.2)
            .map(|c| large(c.1))
            .sum::<i64>();
        for f in &self.freed {
            n -= match *f {
                Freed::Block { class, .. } => block(class),
                Freed::Large { chunks, .. } => large(chunks),
            };
        }
        n
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.record.len() == LOG_HEADER_SIZE
    }

    /// (target, word) when the whole transaction is one aligned 8-byte store into the heap
    /// (`heap`: [start, end)): the one-word case of the module docs.
    #[inline(always)]
    pub(crate) fn single_word(&self, heap: (u64, u64)) -> Option<(u64, u64)> {
        if self.n_entries != 1
            || self.copies.len() != 1
            || !self.bitops.is_empty()
            || !self.fresh.is_empty()
            || !self.reserved.is_empty()
            || !self.chunks_taken.is_empty()
            || !self.freed.is_empty()
            || !self.fresh_dirty.is_empty()
            || self.fresh_unfenced
        {
            return None;
        }
        let (target, len, pos) = self.copies[0];
        if len != 8 || target % 8 != 0 || target < heap.0 || target + 8 > heap.1 {
            return None;
        }
        let data: [u8; 8] = self.record.get(pos..pos + 8)?.try_into().ok()?;
        Some((target, u64::from_ne_bytes(data)))
    }

    #[inline(always)]
    pub(crate) fn clear(&mut self) {
        self.record.truncate(LOG_HEADER_SIZE);
        if self.record.buf.len() > RECORD_KEEP_MAX {
            // A big transaction's buffers are not kept for the lane's next ones.
            let serial = self.serial;
            *self = TxBuffers::default();
            self.serial = serial;
            return;
        }
        self.n_entries = 0;
        self.copies.clear();
        self.bitops.clear();
        // The indexes exist only in big transactions; clearing an empty hash map or B-tree
        // still costs a call and a few dozen instructions on every small commit.
        if !self.shadow_pages.is_empty() {
            self.shadows.clear();
            self.shadow_pages.clear();
            self.shadow_page_slots.clear();
            self.shadow_filter = [0; SHADOW_FILTER_WORDS];
        }
        if !self.bitop_index.is_empty() {
            self.bitop_index.clear();
        }
        // (Nodes can outlive `fresh_paged` when every indexed object was cancelled.)
        if self.fresh_paged != 0 || !self.fresh_nodes.is_empty() || !self.fresh_big.is_empty() {
            self.fresh_pages.clear();
            self.fresh_nodes.clear();
            self.fresh_first_node.clear();
            self.fresh_big.clear();
            self.fresh_paged = 0;
        }
        self.fresh.clear();
        self.reserved.clear();
        self.fresh_pos.clear();
        self.reserved_pos.clear();
        self.chunks_taken.clear();
        self.freed.clear();
        self.fresh_dirty.clear();
        if !self.fresh_dirty_set.is_empty() {
            self.fresh_dirty_set.clear();
        }
        self.fresh_unfenced = false;
        self.durable_apply = false;
        self.fresh_log_start = usize::MAX;
        self.undo = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny deterministic generator (xorshift), so a failure replays from its seed.
    fn next(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// Reads see exactly the newest logged byte at every offset the transaction wrote and the
    /// pool's byte elsewhere, before and after the line index is built (more than
    /// `INDEX_FROM` copies), for reads of one byte up to several pages, copies rewritten in
    /// place included (as `Tx::log_copy` does for a word written again).
    #[test]
    fn overlay_matches_a_byte_model_small_and_indexed() {
        for seed in [1u64, 7, 42, 2026] {
            let mut s = seed;
            let mut b = TxBuffers::default();
            let mut model = std::collections::HashMap::<u64, u8>::new();
            let span = 3 * 4096u64; // offsets 8192..8192+span: reads cross pages
            let pool_byte = |o: u64| (o.wrapping_mul(31) >> 3) as u8;
            for step in 0..600 {
                if step % 5 == 4 && !b.copies.is_empty() {
                    // Rewrite an earlier copy of 8 bytes in place, when no later copy overlaps.
                    let i = (next(&mut s) % b.copies.len() as u64) as usize;
                    let (t, len, pos) = b.copies[i];
                    let later = b.copies[i + 1..]
                        .iter()
                        .any(|&(u, l, _)| u < t + len && t < u + l);
                    if len == 8 && !later {
                        let v = next(&mut s).to_le_bytes();
                        b.record[pos..pos + 8].copy_from_slice(&v);
                        if b.indexed() {
                            b.shadow_write(t, 8, pos);
                        }
                        for k in 0..8 {
                            model.insert(t + k, v[k as usize]);
                        }
                    }
                } else {
                    let len = match next(&mut s) % 4 {
                        0 => 8,
                        1 => 1 + next(&mut s) % 16,
                        2 => 1 + next(&mut s) % 200,
                        _ => 0,
                    };
                    let t = 8192 + next(&mut s) % (span - len.max(1));
                    let pos = b.record.len();
                    let data: Vec<u8> = (0..len).map(|_| next(&mut s) as u8).collect();
                    b.record.extend_from_slice(&data);
                    b.push_copy((t, len, pos));
                    for (k, &v) in data.iter().enumerate() {
                        model.insert(t + k as u64, v);
                    }
                }
                for _ in 0..4 {
                    let len = match next(&mut s) % 3 {
                        0 => 1 + next(&mut s) % 64,
                        1 => 1 + next(&mut s) % 1100,
                        _ => 1 + next(&mut s) % 9000,
                    };
                    let off = 8192 + next(&mut s) % (span - len.min(span - 1));
                    let len = len.min(8192 + span - off);
                    let mut out: Vec<u8> = (off..off + len).map(pool_byte).collect();
                    b.overlay(off, &mut out);
                    for (k, &got) in out.iter().enumerate() {
                        let o = off + k as u64;
                        let want = model.get(&o).copied().unwrap_or_else(|| pool_byte(o));
                        assert_eq!(got, want, "seed {seed} step {step}: byte at {o}");
                    }
                }
            }
            assert!(
                b.indexed(),
                "seed {seed}: the test must reach the indexed path"
            );
        }
    }

    /// The dirty ranges of new objects, in the vector and in the indexed set alike, cover
    /// exactly the bytes noted and not cut since (a bitmap model), over seeded random notes
    /// and cuts that cross the switch to the set.
    #[test]
    fn fresh_dirty_ranges_match_a_byte_model_across_the_switch_to_the_set() {
        for seed in [1u64, 7, 20261128] {
            let mut rng = seed;
            let mut next = move |n: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % n
            };
            const SPACE: usize = 100_000;
            let mut b = TxBuffers::default();
            let mut model = vec![false; SPACE];
            for step in 0..3000 {
                let a = next(SPACE as u64 - 100);
                let len = 1 + next(64);
                if next(5) == 0 {
                    b.cut_fresh_dirty(a, a + len);
                    model[a as usize..(a + len) as usize].fill(false);
                } else {
                    b.note_fresh_dirty(a, len);
                    model[a as usize..(a + len) as usize].fill(true);
                }
                if step % 97 == 0 || step == 2999 {
                    let mut got = vec![false; SPACE];
                    let set = b.fresh_dirty_set.iter().map(|(&s, &e)| (s, e));
                    for (s, e) in b.fresh_dirty.iter().copied().chain(set) {
                        assert!(s < e, "seed {seed}: empty range");
                        got[s as usize..e as usize].fill(true);
                    }
                    assert_eq!(got, model, "seed {seed}, step {step}");
                }
            }
            assert!(
                !b.fresh_dirty_set.is_empty(),
                "seed {seed}: the test must reach the indexed set"
            );
            // The set's ranges stay disjoint; settling hands them to the vector.
            let mut last_end = 0;
            for (&s, &e) in &b.fresh_dirty_set {
                assert!(s >= last_end, "seed {seed}: overlapping ranges");
                last_end = e;
            }
            let before: Vec<bool> = model.clone();
            b.settle_fresh_dirty();
            assert!(b.fresh_dirty_set.is_empty());
            let mut got = vec![false; SPACE];
            for &(s, e) in &b.fresh_dirty {
                got[s as usize..e as usize].fill(true);
            }
            assert_eq!(got, before, "seed {seed}: settled");
        }
    }

    /// `fresh_holding` finds exactly the live new objects holding a range, as a list scan
    /// would, while objects are added and cancelled (as `Tx::cancel_fresh` does: find its
    /// position, unindex, swap_remove) across the switch to the page index, with objects
    /// of one page, several pages and more than `FRESH_PAGES_MAX` pages, and blocks reused
    /// after their cancel (their old nodes stay in the chains, sized 0).
    #[test]
    fn fresh_lookup_matches_a_list_model_while_objects_are_cancelled() {
        for seed in [3u64, 11, 20261128] {
            let mut rng = seed;
            let mut b = TxBuffers::default();
            let mut model: Vec<(u64, u64)> = Vec::new();
            // Candidate objects in disjoint 128 KiB cells: a cell is live at most once.
            const CELL: u64 = 128 << 10;
            let mut live = [false; 64];
            for step in 0..4000 {
                let cell = next(&mut rng) % 64;
                let off = 4096 + cell * CELL + (next(&mut rng) % 64) * 64;
                if !live[cell as usize] {
                    let size = match next(&mut rng) % 8 {
                        0 => 4096 * (1 + next(&mut rng) % 24),
                        1 => 1 + next(&mut rng) % 9000,
                        _ => 64,
                    };
                    b.push_fresh((off, size));
                    model.push((off, size));
                    live[cell as usize] = true;
                } else if next(&mut rng).is_multiple_of(3) {
                    let (o, size) = *model.iter().find(|e| (e.0 - 4096) / CELL == cell).unwrap();
                    let i = b.fresh_pos.find(&b.fresh, o).expect("live object found");
                    b.unindex_fresh(i, o, size);
                    b.fresh_pos.swap_remove(&mut b.fresh, i, o);
                    model.retain(|e| e.0 != o);
                    live[cell as usize] = false;
                }
                let q = 4096 + next(&mut rng) % (64 * CELL);
                let len = 1 + next(&mut rng) % 128;
                let want = model
                    .iter()
                    .copied()
                    .find(|&(o, s)| q >= o && q + len <= o + s);
                assert_eq!(b.fresh_holding(q, len), want, "seed {seed}, step {step}");
                for &(o, s) in model.iter().rev().take(3) {
                    assert_eq!(b.fresh_holding(o, s), Some((o, s)), "seed {seed}");
                }
            }
            assert!(
                b.fresh_paged > 0,
                "seed {seed}: the page index must be built"
            );
        }
    }
}
