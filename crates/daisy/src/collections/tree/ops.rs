//! The B+-tree algorithms of [`super::PTreeMap`]: descents by key and by rank, inserts with
//! splits, removals with merges and redistribution, range removal a leaf at a time, cursors.
//!
//! Every write goes through the caller's transaction: a split, a merge, a root change and the
//! counts on the path commit together with the operation, so a crash never leaves one half
//! done (docs/FORMAT.md section 8c, "Crash reasoning").

use super::cache::NodeCache;
use super::keys::*;
use super::node::*;
use crate::collections::table::Src;
use crate::error::{Error, Result};
use crate::ptr::PPtr;
use crate::tx::Tx;
use bytemuck::{Pod, Zeroable};
use std::cmp::Ordering;
use std::ops::Bound;

pub const TREE_MAGIC: u64 = u64::from_le_bytes(*b"DAISYTRE");
/// Tree format version (docs/FORMAT.md section 8c).
pub const TREE_FORMAT: u32 = 1;
pub const TREE_HEADER_BYTES: usize = 64;
/// `state`: a live tree.
pub const STATE_LIVE: u32 = 0;
/// `state`: a tree being freed by `free_step` (its root moved to the garbage slot).
pub const STATE_FREEING: u32 = 1;

pub const H_STATE: u64 = 20;
pub const H_ROOT: u64 = 24;
pub const H_LEN: u64 = 32;
pub const H_HEIGHT: u64 = 40;
pub const H_GARBAGE: u64 = 48;

/// The tree header (one 64-byte object).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct TreeHeader {
    pub magic: u64,
    pub format: u32,
    pub node_size: u32,
    /// crc32c of bytes 0..16 (magic, format, node size: immutable).
    pub crc: u32,
    pub state: u32,
    pub root: u64,
    pub len: u64,
    /// Levels: 1 when the root is a leaf, 0 when there is no root (empty).
    pub height: u64,
    /// A detached subtree still being freed (`clear`, `free_step`), and its height.
    pub garbage_root: u64,
    pub garbage_height: u64,
}

const _: () = {
    assert!(std::mem::size_of::<TreeHeader>() == TREE_HEADER_BYTES);
    assert!(std::mem::offset_of!(TreeHeader, state) == H_STATE as usize);
    assert!(std::mem::offset_of!(TreeHeader, root) == H_ROOT as usize);
    assert!(std::mem::offset_of!(TreeHeader, len) == H_LEN as usize);
    assert!(std::mem::offset_of!(TreeHeader, height) == H_HEIGHT as usize);
    assert!(std::mem::offset_of!(TreeHeader, garbage_root) == H_GARBAGE as usize);
};

impl TreeHeader {
    pub fn immutable_crc(&self) -> u32 {
        crate::checksum::crc32c_append(0, &bytemuck::bytes_of(self)[..16])
    }
    pub fn new(node_size: u32) -> TreeHeader {
        let mut h = TreeHeader {
            magic: TREE_MAGIC,
            format: TREE_FORMAT,
            node_size,
            ..TreeHeader::zeroed()
        };
        h.crc = h.immutable_crc();
        h
    }
}

pub fn read_header(src: &Src, hdr: u64) -> Result<TreeHeader> {
    src.read_pod::<TreeHeader>(hdr)
}

/// Why the header at `hdr` is not a usable tree header (magic, checksum, format, node size,
/// a plausible root and height), or its geometry.
pub fn header_problem(h: &TreeHeader) -> std::result::Result<Geo, String> {
    if h.magic != TREE_MAGIC || h.crc != h.immutable_crc() {
        return Err("no ordered map header there (bad magic or checksum)".into());
    }
    if h.format != TREE_FORMAT {
        return Err(format!(
            "tree format version {} (this build reads {TREE_FORMAT})",
            h.format
        ));
    }
    let geo = Geo::new(h.node_size).ok_or_else(|| format!("node size {}", h.node_size))?;
    if h.state != STATE_LIVE && h.state != STATE_FREEING {
        return Err(format!("unknown state {}", h.state));
    }
    if (h.root == 0) != (h.height == 0) || h.height > MAX_HEIGHT {
        return Err(format!("root {:#x} with height {}", h.root, h.height));
    }
    if (h.garbage_root == 0) != (h.garbage_height == 0) || h.garbage_height > MAX_HEIGHT {
        return Err(format!(
            "detached root {:#x} with height {}",
            h.garbage_root, h.garbage_height
        ));
    }
    Ok(geo)
}

/// A tree's identity in an operation: its header and node geometry, and (for a view) the
/// view's node cache, which every write and free of the operation keeps coherent.
#[derive(Clone, Copy, Debug)]
pub struct T<'c> {
    pub hdr: u64,
    pub geo: Geo,
    pub cache: Option<&'c NodeCache>,
}

/// The header words every operation reads.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct Hot {
    pub root: u64,
    pub len: u64,
    pub height: u64,
}

impl T<'_> {
    /// A tree without a node cache.
    pub fn plain(hdr: u64, geo: Geo) -> T<'static> {
        T {
            hdr,
            geo,
            cache: None,
        }
    }

    /// The node cache, when reads go through the cache's transaction.
    #[inline]
    fn cache_for(&self, src: &Src) -> Option<&NodeCache> {
        match src {
            Src::Tx(_) => self.cache,
            Src::Pool(_) => None,
        }
    }

    /// Write `bytes` at `addr`, inside the object at `obj` (a node, or the tree's header),
    /// through the transaction, and into the object's cached image.
    #[inline]
    pub fn write(&self, tx: &mut Tx, obj: u64, addr: u64, bytes: &[u8]) -> Result<()> {
        tx.write_bytes(addr, bytes)?;
        if let Some(c) = self.cache {
            c.patch(obj, addr, bytes);
        }
        Ok(())
    }

    /// Free the object at `off` (a node or an item object), and its cached image.
    #[inline]
    pub fn free(&self, tx: &mut Tx, off: u64) -> Result<()> {
        tx.free(PPtr::<u8>::from_offset(off))?;
        if let Some(c) = self.cache {
            c.evict(off);
        }
        Ok(())
    }

    /// The node at `off`, at `level`, as `src` sees it (from the cache when it has it).
    #[inline]
    pub fn read_node(&self, src: &Src, off: u64, level: u64) -> Result<Img> {
        match self.cache_for(src) {
            Some(c) => c.node(src, off, self.geo, level),
            None => Img::read(src, off, self.geo, level),
        }
    }

    #[inline]
    pub fn hot(&self, src: &Src) -> Result<Hot> {
        let h: Hot = src.read_pod(self.hdr + H_ROOT)?;
        if (h.root == 0) != (h.height == 0) || h.height > MAX_HEIGHT {
            return Err(damaged(
                self.hdr,
                "ordered map header has an invalid root or height",
            ));
        }
        Ok(h)
    }
}

// ---- Reads ----

/// An internal node a descent searches: read piecemeal through the source ([`Inner`]), or
/// whole in DRAM (a view's cached image).
#[derive(Clone, Copy)]
enum Probe<'a> {
    Piece(&'a Inner),
    Whole(&'a Img),
}

impl Probe<'_> {
    #[inline(always)]
    fn count(&self) -> usize {
        match self {
            Probe::Piece(n) => n.count(),
            Probe::Whole(img) => img.count(),
        }
    }

    #[inline(always)]
    fn off(&self) -> u64 {
        match self {
            Probe::Piece(n) => n.off,
            Probe::Whole(img) => img.off,
        }
    }

    /// Child and count of item `i`, and the item's byte.
    #[inline]
    fn child_count(&self, src: &Src, i: usize) -> Result<(u64, u64, usize)> {
        match self {
            Probe::Piece(n) => n.child_count(src, i),
            Probe::Whole(img) => {
                let (child, count, _) = img.child(i)?;
                Ok((child, count, img.slot(i)?))
            }
        }
    }
}

/// Child of an internal node a key descends into (the number of separators <= key), found
/// by reading only the items the binary search probes: (index, child, count, byte of the
/// item).
fn child_for(src: &Src, node: &Inner, key: &[u8]) -> Result<(usize, u64, u64, usize)> {
    let (mut lo, mut hi) = (1usize, node.count());
    let mut b: ItemBuf = [0; _];
    // The last probe at or below the key: the answer, unless none was (then item 0).
    let mut below = None;
    while lo < hi {
        let mid = (lo + hi) / 2;
        let at = node.read_item(src, mid, &mut b)?;
        let (child, count, sep) = probed_child(node.off, &b)?;
        if cmp_key(src, key, &sep)? != Ordering::Less {
            lo = mid + 1;
            below = Some((child, count, at));
        } else {
            hi = mid;
        }
    }
    let (child, count, at) = match below {
        Some(b) => b,
        None => {
            let at = node.read_item(src, 0, &mut b)?;
            let (child, count, _) = probed_child(node.off, &b)?;
            (child, count, at)
        }
    };
    Ok((lo - 1, child, count, at))
}

/// [`child_for`] on a whole node image.
fn child_for_img(src: &Src, img: &Img, key: &[u8]) -> Result<(usize, u64, u64, usize)> {
    let (mut lo, mut hi) = (1usize, img.count());
    while lo < hi {
        let mid = (lo + hi) / 2;
        let (_, _, sep) = img.child(mid)?;
        if cmp_key(src, key, &sep)? != Ordering::Less {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let (child, count, _) = img.child(lo - 1)?;
    Ok((lo - 1, child, count, img.slot(lo - 1)?))
}

/// [`child_for`] on either kind of [`Probe`].
#[inline]
fn child_for_probe(src: &Src, node: Probe, key: &[u8]) -> Result<(usize, u64, u64, usize)> {
    match node {
        Probe::Piece(n) => child_for(src, n, key),
        Probe::Whole(img) => child_for_img(src, img, key),
    }
}

/// The child of `node`, whose subtree holds `total` entries, that holds rank `*r` (below
/// `total`) of its subtree; `*r` becomes the rank inside it. The counts are read from the
/// nearer end (a pop from either end reads one item per level). (index, child, count, byte
/// of the item).
fn rank_child_of(
    src: &Src,
    node: Probe,
    total: u64,
    r: &mut u64,
) -> Result<(usize, u64, u64, usize)> {
    let n = node.count();
    if *r <= total.wrapping_sub(1).wrapping_sub(*r) {
        for i in 0..n {
            let (child, c, at) = node.child_count(src, i)?;
            if *r < c {
                return Ok((i, child, c, at));
            }
            *r -= c;
        }
    } else {
        // Ranks counted from the high end.
        let mut back = total.wrapping_sub(1).wrapping_sub(*r);
        for i in (0..n).rev() {
            let (child, c, at) = node.child_count(src, i)?;
            if back < c {
                *r = c - 1 - back;
                return Ok((i, child, c, at));
            }
            back -= c;
        }
    }
    Err(damaged(
        node.off(),
        "ordered map subtree counts disagree with the length",
    ))
}

/// Entries under the children of `node` (whose subtree holds `total`) left of child `i`
/// (which holds `c`): summed from the nearer end.
fn left_of(src: &Src, node: Probe, i: usize, c: u64, total: u64) -> Result<u64> {
    let n = node.count();
    let mut sum = 0u64;
    if i <= n / 2 {
        for j in 0..i {
            sum = sum.wrapping_add(node.child_count(src, j)?.1);
        }
        Ok(sum)
    } else {
        sum = c;
        for j in i + 1..n {
            sum = sum.wrapping_add(node.child_count(src, j)?.1);
        }
        Ok(total.wrapping_sub(sum))
    }
}

/// One internal level of a descent: `f` on the node at `off` (at `level`), from the view's
/// cache when `src` is its transaction, else read piecemeal into `inner`.
#[inline]
fn with_probe<R>(
    src: &Src,
    t: &T,
    inner: &mut Inner,
    off: u64,
    level: u64,
    f: impl FnOnce(Probe) -> Result<R>,
) -> Result<R> {
    match t.cache_for(src) {
        Some(c) => c.with_inner(src, off, t.geo, level, |img| f(Probe::Whole(img))),
        None => {
            inner.load(src, off, level)?;
            f(Probe::Piece(inner))
        }
    }
}

/// First entry of a leaf >= key, and whether it equals key.
fn leaf_search(src: &Src, img: &Img, key: &[u8]) -> Result<(usize, bool)> {
    let (mut lo, mut hi) = (0usize, img.count());
    while lo < hi {
        let mid = (lo + hi) / 2;
        let (k, _) = img.entry(mid)?;
        if cmp_key(src, key, &k)? == Ordering::Greater {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let found = lo < img.count() && cmp_key(src, key, &img.entry(lo)?.0)? == Ordering::Equal;
    Ok((lo, found))
}

/// Which entry a descent looks for.
#[derive(Clone, Copy, Debug)]
pub enum Target<'k> {
    Key(&'k [u8]),
    /// The entry at this rank (0-based); must be below the length.
    Rank(u64),
}

/// Where a read descent ended: the leaf, the position in it, whether the key is there, and
/// the rank of that position (entries before it).
pub struct Found {
    pub leaf: Img,
    pub pos: usize,
    pub found: bool,
    pub rank: u64,
}

/// Descend to the leaf of `target` (None: the tree is empty). `want_rank` sums the counts of
/// the children left of the path (rank queries).
pub fn locate(src: &Src, t: &T, target: Target, want_rank: bool) -> Result<Option<Found>> {
    let h = t.hot(src)?;
    if h.root == 0 {
        return Ok(None);
    }
    let mut node = h.root;
    let mut rank = 0u64;
    let mut r = match target {
        Target::Rank(r) if r >= h.len => {
            return Err(Error::Unsupported(format!(
                "rank {r} is past the end of an ordered map of {} entries",
                h.len
            )))
        }
        Target::Rank(r) => r,
        Target::Key(_) => 0,
    };
    let mut total = h.len;
    let mut inner = Inner::new(t.geo);
    for level in (1..h.height).rev() {
        let (child, count) = with_probe(src, t, &mut inner, node, level, |p| match target {
            Target::Key(k) => {
                let (i, child, count, _) = child_for_probe(src, p, k)?;
                if want_rank {
                    rank = rank.wrapping_add(left_of(src, p, i, count, total)?);
                }
                Ok((child, count))
            }
            Target::Rank(_) => {
                let (_, child, count, _) = rank_child_of(src, p, total, &mut r)?;
                Ok((child, count))
            }
        })?;
        node = child;
        total = count;
    }
    let leaf = t.read_node(src, node, 0)?;
    if leaf.count() == 0 {
        return Err(damaged(node, "ordered map leaf is empty"));
    }
    Ok(Some(match target {
        Target::Key(k) => {
            let (pos, found) = leaf_search(src, &leaf, k)?;
            Found {
                leaf,
                pos,
                found,
                rank: rank + pos as u64,
            }
        }
        Target::Rank(_) => {
            if r >= leaf.count() as u64 {
                return Err(damaged(
                    node,
                    "ordered map subtree counts disagree with its leaves",
                ));
            }
            let rank = match target {
                Target::Rank(x) => x,
                Target::Key(_) => 0,
            };
            Found {
                leaf,
                pos: r as usize,
                found: true,
                rank,
            }
        }
    }))
}

/// The child of `img` holding rank `*r` of its subtree; `*r` becomes the rank inside it.
fn rank_child(img: &Img, r: &mut u64) -> Result<usize> {
    for i in 0..img.count() {
        let c = img.child(i)?.1;
        if *r < c {
            return Ok(i);
        }
        *r -= c;
    }
    Err(damaged(
        img.off,
        "ordered map subtree counts disagree with the length",
    ))
}

pub fn get(src: &Src, t: &T, key: &[u8]) -> Result<Option<Vec<u8>>> {
    match locate(src, t, Target::Key(key), false)? {
        Some(f) if f.found => {
            let (_, v) = f.leaf.entry(f.pos)?;
            Ok(Some(read_val(src, &v)?))
        }
        _ => Ok(None),
    }
}

/// (number of keys < key, whether key is present).
pub fn rank(src: &Src, t: &T, key: &[u8]) -> Result<(u64, bool)> {
    Ok(match locate(src, t, Target::Key(key), true)? {
        Some(f) => (f.rank, f.found),
        None => (0, false),
    })
}

/// The entry at rank `r`, if `r` is below the length.
pub fn at_rank(src: &Src, t: &T, r: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    if r >= t.hot(src)?.len {
        return Ok(None);
    }
    let f = locate(src, t, Target::Rank(r), false)?.expect("a non-empty tree");
    let (k, v) = f.leaf.entry(f.pos)?;
    Ok(Some((read_key(src, &k)?, read_val(src, &v)?)))
}

/// Rank of the first key a range starting at `lo` includes (keys before it).
pub fn lower_rank(src: &Src, t: &T, lo: Bound<&[u8]>) -> Result<u64> {
    Ok(match lo {
        Bound::Unbounded => 0,
        Bound::Included(k) => rank(src, t, k)?.0,
        Bound::Excluded(k) => {
            let (r, found) = rank(src, t, k)?;
            r + found as u64
        }
    })
}

/// One past the rank of the last key a range ending at `hi` includes.
pub fn upper_rank(src: &Src, t: &T, hi: Bound<&[u8]>) -> Result<u64> {
    Ok(match hi {
        Bound::Unbounded => t.hot(src)?.len,
        Bound::Excluded(k) => rank(src, t, k)?.0,
        Bound::Included(k) => {
            let (r, found) = rank(src, t, k)?;
            r + found as u64
        }
    })
}

// ---- Cursors ----

/// A position in the tree: the internal nodes of the path (with the child taken) and the
/// leaf. Moves one entry at a time; crossing to the next leaf rereads only what changes.
pub struct Cursor {
    stack: Vec<(Img, usize)>,
    leaf: Img,
    pos: usize,
    height: u64,
}

impl Cursor {
    /// At rank `r` (below the length).
    pub fn at_rank(src: &Src, t: &T, r: u64) -> Result<Cursor> {
        let h = t.hot(src)?;
        if r >= h.len {
            return Err(Error::Unsupported(format!(
                "rank {r} is past the end of an ordered map of {} entries",
                h.len
            )));
        }
        let mut stack = Vec::with_capacity(h.height as usize);
        let mut node = h.root;
        let mut r = r;
        for level in (1..h.height).rev() {
            let img = t.read_node(src, node, level)?;
            let i = rank_child(&img, &mut r)?;
            node = img.child(i)?.0;
            stack.push((img, i));
        }
        let leaf = t.read_node(src, node, 0)?;
        if r >= leaf.count() as u64 {
            return Err(damaged(
                node,
                "ordered map subtree counts disagree with its leaves",
            ));
        }
        Ok(Cursor {
            stack,
            leaf,
            pos: r as usize,
            height: h.height,
        })
    }

    /// The entry under the cursor.
    pub fn entry(&self, src: &Src) -> Result<(Vec<u8>, Vec<u8>)> {
        let (k, v) = self.leaf.entry(self.pos)?;
        Ok((read_key(src, &k)?, read_val(src, &v)?))
    }

    /// Move to the next entry (`forward`) or the previous one; false at the end.
    pub fn step(&mut self, src: &Src, t: &T, forward: bool) -> Result<bool> {
        if forward && self.pos + 1 < self.leaf.count() {
            self.pos += 1;
            return Ok(true);
        }
        if !forward && self.pos > 0 {
            self.pos -= 1;
            return Ok(true);
        }
        // Up to the first level with a neighbour, then down its edge.
        let mut d = self.stack.len();
        loop {
            if d == 0 {
                return Ok(false);
            }
            d -= 1;
            let (img, i) = &mut self.stack[d];
            if forward && *i + 1 < img.count() {
                *i += 1;
                break;
            }
            if !forward && *i > 0 {
                *i -= 1;
                break;
            }
        }
        self.stack.truncate(d + 1);
        let mut node = {
            let (img, i) = &self.stack[d];
            img.child(*i)?.0
        };
        for level in (1..self.height - 1 - d as u64).rev() {
            let img = t.read_node(src, node, level)?;
            if img.count() == 0 {
                return Err(damaged(node, "ordered map node is empty"));
            }
            let i = if forward { 0 } else { img.count() - 1 };
            node = img.child(i)?.0;
            self.stack.push((img, i));
        }
        self.leaf = t.read_node(src, node, 0)?;
        if self.leaf.count() == 0 {
            return Err(damaged(node, "ordered map leaf is empty"));
        }
        self.pos = if forward { 0 } else { self.leaf.count() - 1 };
        Ok(true)
    }
}

/// The entries of ranks `from..to`, ascending, or (`rev`) ranks `to-1` down to `from`.
pub fn collect_ranks(
    src: &Src,
    t: &T,
    from: u64,
    to: u64,
    rev: bool,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let to = to.min(t.hot(src)?.len);
    if from >= to {
        return Ok(Vec::new());
    }
    let n = to - from;
    let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
    let mut c = Cursor::at_rank(src, t, if rev { to - 1 } else { from })?;
    loop {
        out.push(c.entry(src)?);
        if out.len() as u64 == n || !c.step(src, t, !rev)? {
            break;
        }
    }
    Ok(out)
}

// ---- Writes ----

/// One internal level of a write descent: the node, the child taken, and that child's count.
#[derive(Clone, Copy, Debug)]
struct Step {
    node: u64,
    level: u64,
    pos: usize,
    count: u64,
    count_at: u64,
}

/// What a node tells its parent after a change below.
enum Up {
    /// Still within bounds; the parent adds the operation's delta to its count.
    Fit,
    /// Under the minimum fill (or, at the root, possibly down to one child or no entry).
    Under { count: usize },
    /// Split: the node keeps the left part (`lc` entries), `right` holds the rest.
    Split {
        lc: u64,
        right: u64,
        rc: u64,
        sep: Vec<u8>,
    },
}

/// Descend for a write: the internal steps (root first), the leaf, the position, found.
fn descend_w(tx: &Tx, t: &T, h: &Hot, target: Target) -> Result<(Vec<Step>, Img, usize, bool)> {
    let src = Src::Tx(tx);
    let mut path = Vec::with_capacity(h.height as usize);
    let mut node = h.root;
    let mut r = match target {
        Target::Rank(r) => r,
        Target::Key(_) => 0,
    };
    let mut total = h.len;
    let mut inner = Inner::new(t.geo);
    for level in (1..h.height).rev() {
        let (i, child, count, at) =
            with_probe(&src, t, &mut inner, node, level, |p| match target {
                Target::Key(k) => child_for_probe(&src, p, k),
                Target::Rank(_) => rank_child_of(&src, p, total, &mut r),
            })?;
        path.push(Step {
            node,
            level,
            pos: i,
            count,
            // The count word of the item at byte `at`.
            count_at: node + at as u64 + 8,
        });
        node = child;
        total = count;
    }
    let leaf = t.read_node(&src, node, 0)?;
    if leaf.count() == 0 {
        return Err(damaged(node, "ordered map leaf is empty"));
    }
    let (pos, found) = match target {
        Target::Key(k) => leaf_search(&src, &leaf, k)?,
        Target::Rank(_) if r < leaf.count() as u64 => (r as usize, true),
        Target::Rank(_) => {
            return Err(damaged(
                node,
                "ordered map subtree counts disagree with its leaves",
            ))
        }
    };
    Ok((path, leaf, pos, found))
}

/// Entries of a node's items: leaf items count one each, internal items their count word.
fn items_count(leaf: bool, items: &[Vec<u8>]) -> u64 {
    if leaf {
        items.len() as u64
    } else {
        items
            .iter()
            .map(|i| u64::from_le_bytes(i[8..16].try_into().unwrap()))
            .sum()
    }
}

fn classify(geo: Geo, img: &Img) -> Result<Up> {
    // Every item takes 8 bytes or more, and an index byte: a node of that many items is
    // full enough without summing its items' sizes.
    if img.count() * 9 >= geo.min_fill() {
        return Ok(Up::Fit);
    }
    // The sum from the items' first bytes; a node whose items do not all parse is measured
    // (and refused) by the full parse.
    let used = match img.used_quick() {
        Some(u) => u,
        None => img.used()?,
    };
    Ok(if used < geo.min_fill() {
        Up::Under { count: img.count() }
    } else {
        Up::Fit
    })
}

/// Where to split `items` (the node's items with the new one at `pos`): the first index of
/// the right part. Both parts fit and hold the minimum fill (always possible: a node splits
/// only when its bytes exceed the capacity, and an item is at most an eighth of it); among
/// those, an append (`pos` last) leaves the right part at the minimum and an insert at the
/// front the left part, so ascending or descending inserts fill nodes to three quarters;
/// otherwise the parts are balanced.
fn choose_split(geo: Geo, leaf: bool, items: &[Vec<u8>], pos: Option<usize>) -> Result<usize> {
    let m = items.len();
    let total: usize = items.iter().map(|i| i.len() + 1).sum();
    let mut best: Option<(usize, usize)> = None; // (score, s)
    let mut fallback: Option<(usize, usize)> = None;
    let mut left = 0usize;
    for s in 1..m {
        left += items[s - 1].len() + 1;
        let mut right = total - left;
        if !leaf {
            // The right part's first item gives its separator to the parent.
            right -= items[s].len() - EMPTY_SEP_ITEM;
        }
        if left > geo.cap() || right > geo.cap() {
            continue;
        }
        let balance = left.abs_diff(right);
        if fallback.is_none_or(|f| balance < f.0) {
            fallback = Some((balance, s));
        }
        if left < geo.min_fill() || right < geo.min_fill() {
            continue;
        }
        let score = if pos == Some(m - 1) && m > 2 {
            right - geo.min_fill()
        } else if pos == Some(0) && m > 2 {
            left - geo.min_fill()
        } else {
            balance
        };
        if best.is_none_or(|b| score < b.0) {
            best = Some((score, s));
        }
    }
    best.or(fallback)
        .map(|b| b.1)
        .ok_or_else(|| Error::Unsupported("ordered map node items too large to split".into()))
}

/// Make the separator between a left part ending with `a` and a right part starting with
/// `b` (leaf entries): the shortest key between them, inline or in a new object.
fn leaf_sep(tx: &mut Tx, geo: Geo, a: &[u8], b: &[u8]) -> Result<Vec<u8>> {
    let bad = || damaged(0, "ordered map entry is damaged");
    let (ka, _, _) = entry_at(a, 0).ok_or_else(bad)?;
    let (kb, _, _) = entry_at(b, 0).ok_or_else(bad)?;
    let s = shortest_sep(&Src::Tx(tx), &ka, &kb)?;
    make_sep(tx, geo, &s)
}

/// Turn an internal item into one with an empty separator (it becomes item 0 of a node),
/// returning the separator entry it had.
fn take_sep(item: &mut Vec<u8>) -> Vec<u8> {
    let sep = item[CHILD_HDR..].to_vec();
    item.truncate(CHILD_HDR);
    item.extend_from_slice(&EMPTY_ENTRY);
    sep
}

/// Insert `item` at `pos` into `img`, the node as the transaction sees it, and write the
/// result ([`put_item`]). The common case, an item that fits the free bytes between the index
/// and the heap or a run of dead bytes a removal left inside the heap ([`Gap::insert`]),
/// changes the image in place and writes only the header, the index and the item (what
/// differs of them), without copying or comparing the whole node (nor compacting it).
fn put_new(tx: &mut Tx, t: &T, mut img: Img, pos: usize, item: &[u8]) -> Result<Up> {
    let head = Head::save(&img);
    if let Some(gap) = Gap::insert(&mut img, pos, item) {
        head.write_changes(tx, t, &img)?;
        gap.write(tx, t, &img, item)?;
        return classify(t.geo, &img);
    }
    let old = img.clone();
    put_item(tx, t, &old, img, pos, item)
}

/// Insert `item` at `pos` into `img`, whose image as the transaction sees it is `old`, and
/// write the result: the node as it classifies, or a split (the node keeps the left part,
/// a new node takes the right part; for an internal node the right part's first separator
/// moves up to the parent).
fn put_item(tx: &mut Tx, t: &T, old: &Img, mut img: Img, pos: usize, item: &[u8]) -> Result<Up> {
    let base = img.clone();
    if img.insert_item(t.geo, pos, item)? {
        write_diff(tx, t, old.off, old.off, &old.b, &img.b)?;
        return classify(t.geo, &img);
    }
    let leaf = img.leaf();
    let mut items = base.items()?;
    items.insert(pos, item.to_vec());
    let s = choose_split(t.geo, leaf, &items, Some(pos))?;
    let mut right = items.split_off(s);
    let sep = if leaf {
        leaf_sep(tx, t.geo, items.last().expect("left part"), &right[0])?
    } else {
        take_sep(&mut right[0])
    };
    // The left part: the old node with its index cut (the moved items' bytes become dead:
    // only the header and the index change), plus the new item when it falls on the left.
    let mut left = base;
    if pos >= s {
        left.truncate(s);
    } else {
        left.truncate(s - 1);
        if !left.insert_item(t.geo, pos, item)? {
            return Err(damaged(old.off, "ordered map split left part overflows"));
        }
    }
    let refs: Vec<&[u8]> = right.iter().map(|v| v.as_slice()).collect();
    let rimg = build(0, t.geo, old.level(), &refs)
        .ok_or_else(|| damaged(old.off, "ordered map split right part overflows"))?;
    // The fault's place counts only where its rule matters: a leaf that existed before this
    // transaction (one it allocated is not durable before the commit anyway).
    let matters = cfg!(feature = "sim") && leaf && !tx.fresh_contains(old.off, 8);
    if matters && sim_fault!(TreeSplitEarly) {
        // The injected bug: the old leaf's shrunken header reaches the media at once instead
        // of through the log; a crash before the commit loses the entries that moved.
        tx.pool_inner()
            .store_word_durable(old.off, u64::from_le_bytes(left.b[..8].try_into().unwrap()))?;
        if let Some(c) = t.cache {
            c.patch(old.off, old.off, &left.b[..8]);
        }
    }
    let r = tx.alloc_bytes(&rimg.b)?.offset();
    write_diff(tx, t, old.off, old.off, &old.b, &left.b)?;
    Ok(Up::Split {
        lc: items_count(leaf, &items),
        right: r,
        rc: items_count(leaf, &right),
        sep,
    })
}

/// Fix the underflow of child `pos` of `p` (whose image as the transaction sees it is `old`;
/// `p` already holds the child's new count): merge it with a neighbour when both fit one
/// node, else redistribute their items evenly. Writes the children and the parent.
fn fix_underflow(tx: &mut Tx, t: &T, old: &Img, mut p: Img, pos: usize) -> Result<Up> {
    let cnt = p.count();
    if cnt < 2 {
        return Err(damaged(
            p.off,
            "ordered map internal node has a single child",
        ));
    }
    let (l, r) = if pos + 1 < cnt {
        (pos, pos + 1)
    } else {
        (pos - 1, pos)
    };
    let level = p.level() as u64 - 1;
    let leaf = level == 0;
    let (lch, lc, _) = p.child(l)?;
    let (rch, rc, rsep) = p.child(r)?;
    let rsep_obj = rsep.obj();
    let rsep_entry = p.item(r)?[CHILD_HDR..].to_vec();
    let (lo, ro) = {
        let src = Src::Tx(tx);
        (
            t.read_node(&src, lch, level)?,
            t.read_node(&src, rch, level)?,
        )
    };
    if leaf && lo.count() == 0 {
        // An emptied leaf (a range removal): the right leaf takes its place under the left
        // item, whose separator still bounds it from below; nothing is copied.
        t.free(tx, lch)?;
        if let Some(o) = rsep_obj {
            t.free(tx, o)?;
        }
        p.set_child(l, rch, rc)?;
        p.remove_item(r)?;
        write_diff(tx, t, old.off, old.off, &old.b, &p.b)?;
        return classify(t.geo, &p);
    }
    let mut items = lo.items()?;
    let mut r_items = ro.items()?;
    if !leaf {
        // The parent's separator comes down onto the right node's first child.
        if r_items.is_empty() {
            return Err(damaged(rch, "ordered map internal node is empty"));
        }
        r_items[0].truncate(CHILD_HDR);
        r_items[0].extend_from_slice(&rsep_entry);
    }
    items.extend(r_items);
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    if let Some(m) = build(lch, t.geo, level as u8, &refs) {
        write_diff(tx, t, lch, lch, &lo.b, &m.b)?;
        t.free(tx, rch)?;
        p.set_child_count(l, lc + rc)?;
        if leaf {
            if let Some(o) = rsep_obj {
                t.free(tx, o)?;
            }
        }
        p.remove_item(r)?;
        write_diff(tx, t, old.off, old.off, &old.b, &p.b)?;
        return classify(t.geo, &p);
    }
    let s = choose_split(t.geo, leaf, &items, None)?;
    let mut right = items.split_off(s);
    let sep = if leaf {
        if let Some(o) = rsep_obj {
            t.free(tx, o)?;
        }
        leaf_sep(tx, t.geo, items.last().expect("left part"), &right[0])?
    } else {
        take_sep(&mut right[0])
    };
    let build_at = |off: u64, its: &[Vec<u8>]| {
        let refs: Vec<&[u8]> = its.iter().map(|v| v.as_slice()).collect();
        build(off, t.geo, level as u8, &refs)
            .ok_or_else(|| damaged(off, "ordered map redistribution overflows"))
    };
    let (li, ri) = (build_at(lch, &items)?, build_at(rch, &right)?);
    write_diff(tx, t, lch, lch, &lo.b, &li.b)?;
    write_diff(tx, t, rch, rch, &ro.b, &ri.b)?;
    p.set_child_count(l, items_count(leaf, &items))?;
    p.remove_item(r)?;
    let item = internal_item(rch, items_count(leaf, &right), &sep);
    // A longer separator may overflow the parent: then it splits.
    put_item(tx, t, old, p, r, &item)
}

/// Carry a leaf's report up the path, adding `delta` to the counts, then settle the root
/// (grow it on a split, collapse a root with one child, drop an empty root leaf) and write
/// the header.
fn propagate(tx: &mut Tx, t: &T, h: &Hot, path: &[Step], mut up: Up, delta: i64) -> Result<()> {
    for st in path.iter().rev() {
        up = match up {
            Up::Fit => {
                if delta != 0 {
                    let c = st.count.wrapping_add(delta as u64);
                    t.write(tx, st.node, st.count_at, &c.to_le_bytes())?;
                }
                Up::Fit
            }
            Up::Split { lc, right, rc, sep } => {
                let old = t.read_node(&Src::Tx(tx), st.node, st.level)?;
                let mut img = old.clone();
                img.set_child_count(st.pos, lc)?;
                let item = internal_item(right, rc, &sep);
                put_item(tx, t, &old, img, st.pos + 1, &item)?
            }
            Up::Under { .. } => {
                let old = t.read_node(&Src::Tx(tx), st.node, st.level)?;
                let mut img = old.clone();
                img.set_child_count(st.pos, st.count.wrapping_add(delta as u64))?;
                fix_underflow(tx, t, &old, img, st.pos)?
            }
        };
    }
    let (mut root, mut height) = (h.root, h.height);
    match up {
        Up::Fit => {}
        Up::Split { lc, right, rc, sep } => {
            let items = [
                internal_item(root, lc, &EMPTY_ENTRY),
                internal_item(right, rc, &sep),
            ];
            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
            let img = build(0, t.geo, height as u8, &refs)
                .ok_or_else(|| damaged(t.hdr, "ordered map root overflows"))?;
            root = tx.alloc_bytes(&img.b)?.offset();
            height += 1;
        }
        Up::Under { count } => {
            if height == 1 && count == 0 {
                t.free(tx, root)?;
                root = 0;
                height = 0;
            } else {
                let mut count = count;
                // A root with one child hands the root over to it (repeatedly, in case).
                while height > 1 && count == 1 {
                    let img = t.read_node(&Src::Tx(tx), root, height - 1)?;
                    let child = img.child(0)?.0;
                    t.free(tx, root)?;
                    root = child;
                    height -= 1;
                    count = if height > 1 {
                        t.read_node(&Src::Tx(tx), root, height - 1)?.count()
                    } else {
                        2
                    };
                }
            }
        }
    }
    let len = h.len.wrapping_add(delta as u64);
    if root != h.root || height != h.height {
        let w = Hot { root, len, height };
        t.write(tx, t.hdr, t.hdr + H_ROOT, bytemuck::bytes_of(&w))
    } else if delta != 0 {
        t.write(tx, t.hdr, t.hdr + H_LEN, &len.to_le_bytes())
    } else {
        Ok(())
    }
}

/// Insert or replace; true when a value was replaced.
pub fn insert(tx: &mut Tx, t: &T, key: &[u8], val: &[u8]) -> Result<bool> {
    check_len("key", key.len())?;
    check_len("value", val.len())?;
    let h = t.hot(&Src::Tx(tx))?;
    if h.root == 0 {
        let item = make_entry(tx, t.geo, key, val)?;
        return first_entry(tx, t, &h, &item);
    }
    let (path, leaf, pos, found) = descend_w(tx, t, &h, Target::Key(key))?;
    let item = make_entry(tx, t.geo, key, val)?;
    insert_at(tx, t, &h, &path, leaf, pos, found, &item)
}

/// The first entry of an empty tree: a root leaf holding `item`.
fn first_entry(tx: &mut Tx, t: &T, h: &Hot, item: &[u8]) -> Result<bool> {
    let img = build(0, t.geo, 0, &[item]).expect("one entry fits a leaf");
    let root = tx.alloc_bytes(&img.b)?.offset();
    let w = Hot {
        root,
        len: h.len + 1,
        height: 1,
    };
    t.write(tx, t.hdr, t.hdr + H_ROOT, bytemuck::bytes_of(&w))?;
    Ok(false)
}

/// Insert the entry `item` (already encoded, its object allocated) for `key`: a descent of
/// its own, then [`insert_at`].
fn insert_made(tx: &mut Tx, t: &T, key: &[u8], item: &[u8]) -> Result<bool> {
    let h = t.hot(&Src::Tx(tx))?;
    if h.root == 0 {
        return first_entry(tx, t, &h, item);
    }
    let (path, leaf, pos, found) = descend_w(tx, t, &h, Target::Key(key))?;
    insert_at(tx, t, &h, &path, leaf, pos, found, item)
}

/// Insert `item` at position `pos` of `leaf`, where a descent along `path` found its key
/// (`found`: replacing the entry there), and settle the tree; true when it replaced one.
#[allow(clippy::too_many_arguments)]
fn insert_at(
    tx: &mut Tx,
    t: &T,
    h: &Hot,
    path: &[Step],
    leaf: Img,
    pos: usize,
    found: bool,
    item: &[u8],
) -> Result<bool> {
    if found {
        if let Some(o) = leaf.entry(pos)?.0.obj() {
            t.free(tx, o)?;
        }
        let at = leaf.slot(pos)?;
        let old_len = leaf.item(pos)?.len();
        let up = if old_len == item.len() {
            // Same size: rewrite in place (only the changed bytes are logged).
            write_diff(
                tx,
                t,
                leaf.off,
                leaf.off + at as u64,
                &leaf.b[at..at + old_len],
                item,
            )?;
            Up::Fit
        } else {
            let mut img = leaf.clone();
            img.remove_item(pos)?;
            put_item(tx, t, &leaf, img, pos, item)?
        };
        // A smaller value may leave the leaf under its minimum: settled like a removal.
        propagate(tx, t, h, path, up, 0)?;
        return Ok(true);
    }
    let up = put_new(tx, t, leaf, pos, item)?;
    propagate(tx, t, h, path, up, 1)?;
    Ok(false)
}

/// Replace the entry of `from` by (`to`, `val`), as [`remove`] of `from` and then [`insert`]
/// of `to` would, to the byte; false, with nothing changed, when `from` has no entry.
///
/// A sorted set moving a member to a new score does this. Both changes are computed on the
/// leaves' images before anything is written: when the removal leaves its leaf full enough
/// and the insert fits its leaf's free bytes (no merge, no split), the counts of the levels
/// both paths share end as they were, and so does the length, so they are not written (a
/// move within one leaf writes that leaf alone). Otherwise the removal is written and
/// settled, and the insert runs as it would alone.
pub fn move_key(tx: &mut Tx, t: &T, from: &[u8], to: &[u8], val: &[u8]) -> Result<bool> {
    check_len("key", to.len())?;
    check_len("value", val.len())?;
    if from == to {
        if remove(tx, t, Target::Key(from))?.is_none() {
            return Ok(false);
        }
        insert(tx, t, to, val)?;
        return Ok(true);
    }
    let h = t.hot(&Src::Tx(tx))?;
    if h.root == 0 {
        return Ok(false);
    }
    let (path, leaf, pos, found) = descend_w(tx, t, &h, Target::Key(from))?;
    if !found {
        return Ok(false);
    }
    // `to` belongs to this leaf when it lies strictly between the leaf's first and last keys
    // (no separator falls between keys of one leaf); otherwise a second descent says where.
    let within = {
        let src = Src::Tx(tx);
        let last = leaf.count() - 1;
        cmp_key(&src, to, &leaf.entry(0)?.0)? == Ordering::Greater
            && cmp_key(&src, to, &leaf.entry(last)?.0)? == Ordering::Less
    };
    let other = match within {
        true => None,
        false => Some(descend_w(tx, t, &h, Target::Key(to))?).filter(|o| o.1.off != leaf.off),
    };
    // As `remove` does first: free the old entry's object. The new entry is encoded (its
    // object allocated) where `insert` would: after the removal's writes, which free nothing
    // on the paths taken below (no merge), or, in the fallback, after the removal settled.
    if let Some(o) = leaf.entry(pos)?.0.obj() {
        t.free(tx, o)?;
    }
    let item_len = entry_len(t.geo, to, val);
    let head_r = Head::save(&leaf);
    let mut img_r = leaf;
    img_r.remove_item(pos)?;
    let up_r = classify(t.geo, &img_r)?;
    let fit_r = matches!(up_r, Up::Fit);
    let gap_damaged = || damaged(t.hdr, "ordered map leaf changed under a move");
    // Where the insert's leaf takes the new entry without moving items (computed once).
    let spot_i = match &other {
        Some((_, leaf_i, _, false)) if fit_r => Gap::spot(leaf_i, item_len),
        _ => None,
    };
    match other {
        None if fit_r => {
            // One leaf: the removal and the insert on its image, then what differs written.
            let (pos2, found2) = leaf_search(&Src::Tx(tx), &img_r, to)?;
            if let Some(at) = Gap::spot(&img_r, item_len).filter(|_| !found2) {
                let item = make_entry(tx, t.geo, to, val)?;
                let gap = Gap::insert_at(&mut img_r, pos2, at, &item).ok_or_else(gap_damaged)?;
                head_r.write_changes(tx, t, &img_r)?;
                gap.write(tx, t, &img_r, &item)?;
                // The counts and the length end as they were; a leaf a shorter entry left
                // under its minimum is settled by its parent.
                let up = classify(t.geo, &img_r)?;
                propagate(tx, t, &h, &path, up, 0)?;
                return Ok(true);
            }
        }
        Some((path_i, leaf_i, pos_i, false)) if spot_i.is_some() => {
            let at = spot_i.ok_or_else(gap_damaged)?;
            let item = make_entry(tx, t.geo, to, val)?;
            let head_i = Head::save(&leaf_i);
            let mut img_i = leaf_i;
            let gap = Gap::insert_at(&mut img_i, pos_i, at, &item).ok_or_else(gap_damaged)?;
            if let Up::Fit = classify(t.geo, &img_i)? {
                head_r.write_changes(tx, t, &img_r)?;
                head_i.write_changes(tx, t, &img_i)?;
                gap.write(tx, t, &img_i, &item)?;
                // The levels both paths share (the same node and child) lose an entry and
                // gain one: their counts stay. Below them each path's counts change.
                let common = path
                    .iter()
                    .zip(&path_i)
                    .take_while(|(a, b)| a.node == b.node && a.pos == b.pos)
                    .count();
                for st in &path[common..] {
                    let c = st.count.wrapping_sub(1);
                    t.write(tx, st.node, st.count_at, &c.to_le_bytes())?;
                }
                for st in &path_i[common..] {
                    let c = st.count.wrapping_add(1);
                    t.write(tx, st.node, st.count_at, &c.to_le_bytes())?;
                }
                return Ok(true);
            }
            // A leaf under its minimum even with the new entry (damaged): the removal (which
            // freed nothing), then the insert as it runs alone.
            head_r.write_changes(tx, t, &img_r)?;
            propagate(tx, t, &h, &path, up_r, -1)?;
            insert_made(tx, t, to, &item)?;
            return Ok(true);
        }
        _ => {}
    }
    // A merge or a split (or `to` present): the removal written and settled, then the
    // insert as it runs alone.
    head_r.write_changes(tx, t, &img_r)?;
    propagate(tx, t, &h, &path, up_r, -1)?;
    let item = make_entry(tx, t.geo, to, val)?;
    insert_made(tx, t, to, &item)?;
    Ok(true)
}

/// Remove the entry of `target` and return it; for a key target the key returned is empty
/// (the caller has it: it is not read).
pub fn remove(tx: &mut Tx, t: &T, target: Target) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let h = t.hot(&Src::Tx(tx))?;
    if h.root == 0 {
        return Ok(None);
    }
    if let Target::Rank(r) = target {
        if r >= h.len {
            return Ok(None);
        }
    }
    let (path, leaf, pos, found) = descend_w(tx, t, &h, target)?;
    if !found {
        return Ok(None);
    }
    let (kv, obj) = {
        let (k, v) = leaf.entry(pos)?;
        let src = Src::Tx(tx);
        let key = match target {
            Target::Key(_) => Vec::new(),
            Target::Rank(_) => read_key(&src, &k)?,
        };
        ((key, read_val(&src, &v)?), k.obj())
    };
    if let Some(o) = obj {
        t.free(tx, o)?;
    }
    // Only the header and the index change.
    let head = Head::save(&leaf);
    let mut img = leaf;
    img.remove_item(pos)?;
    head.write_changes(tx, t, &img)?;
    let up = classify(t.geo, &img)?;
    propagate(tx, t, &h, &path, up, -1)?;
    Ok(Some(kv))
}

/// Remove the entries of ranks `from..to`; returns how many. One leaf at a time: each step
/// descends to the leaf holding rank `from`, drops the run of entries there in one index
/// rewrite, and settles the path once (one rebalance per leaf, not per entry).
pub fn remove_ranks(tx: &mut Tx, t: &T, from: u64, to: u64) -> Result<u64> {
    let to = to.min(t.hot(&Src::Tx(tx))?.len);
    let total = to.saturating_sub(from);
    let mut removed = 0;
    while removed < total {
        let h = t.hot(&Src::Tx(tx))?;
        // Ranks shift down as entries go: the next one to remove is always at `from`.
        let (path, leaf, pos, _) = descend_w(tx, t, &h, Target::Rank(from))?;
        let m = (leaf.count() - pos).min((total - removed).min(u8::MAX as u64) as usize);
        for i in pos..pos + m {
            if let Some(o) = leaf.entry(i)?.0.obj() {
                t.free(tx, o)?;
            }
        }
        let head = Head::save(&leaf);
        let mut img = leaf;
        img.remove_items(pos, m)?;
        head.write_changes(tx, t, &img)?;
        let up = classify(t.geo, &img)?;
        propagate(tx, t, &h, &path, up, -(m as i64))?;
        removed += m as u64;
    }
    Ok(removed)
}
