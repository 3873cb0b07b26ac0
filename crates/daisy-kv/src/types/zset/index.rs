//! The operations the sorted-set commands need of an encoding ([`ZIndex`]), and the two
//! encodings behind it:
//!
//! * [`ZPacked`]: the small encoding, a [`PackedBuf`] in the record holding member, score,
//!   member, score, ... sorted by (score, member) (Redis's listpack), so ranges are slices of
//!   it;
//! * [`ZBig`]: the big encoding, a `PBytesMap` from member to score (Redis's dict) and a
//!   `PTreeMap` keyed by [`super::score::tree_key`] (score bytes, then the member: Redis's
//!   skiplist): scores from the map, ranks, ranges, counts and pops from the tree's order
//!   statistics in O(log n) (a lex range over elements of different scores, which Redis
//!   leaves to its skiplist's random levels, walks every element as the listpack would).
//!
//! Both walk ranges the way Redis's listpack code does (`zzlFirstInRange`, `zzlNext`, ...):
//! from the first element in range, skipping `offset` elements, then while in range. For
//! score ranges and for lex ranges over equal scores (the case Redis defines) that is the
//! same as filtering; for lex ranges over different scores it gives Redis's listpack answer
//! (Redis's skiplist answer then depends on its random levels).

use super::score::{cmp_entry, score_key, split_tree_key, tree_key, LexItem, LexRange, ScoreRange};
use crate::types::packed::{ItemAt, PackedBuf};
use daisy::{BytesMapView, PTreeMap, TreeMapView, Tx};
use std::ops::Bound;

type Entry = (Vec<u8>, Vec<u8>);

/// A member and its score.
pub type Elem = (Vec<u8>, f64);

/// Which elements a range command means.
#[derive(Clone, Debug)]
pub enum Select {
    /// Ranks `from..=to` (0-based, ascending order, already clamped to the set).
    Rank {
        from: u64,
        to: u64,
    },
    Score(ScoreRange),
    Lex(LexRange),
}

/// What a sorted set's encoding does for the commands. Ranks are 0-based in ascending
/// (score, member) order. An implementation may assume the set is not empty where a method
/// says so; it never panics on a damaged value (it returns an error).
pub trait ZIndex {
    /// Number of elements.
    fn len(&self, tx: &Tx) -> daisy::Result<u64>;
    /// The score of `member`.
    fn score(&self, tx: &Tx, member: &[u8]) -> daisy::Result<Option<f64>>;
    /// Insert `member` at `score`, or move it there; its old score.
    fn set(&mut self, tx: &mut Tx, member: &[u8], score: f64) -> daisy::Result<Option<f64>>;
    /// Remove `member`; its score.
    fn remove(&mut self, tx: &mut Tx, member: &[u8]) -> daisy::Result<Option<f64>>;
    /// The rank of `member`.
    fn rank(&self, tx: &Tx, member: &[u8]) -> daisy::Result<Option<u64>>;
    /// The elements `sel` names, ascending or (`rev`) descending; for score and lex ranges,
    /// `offset` elements skipped first (negative: none left) and at most `limit` (negative:
    /// no limit), as ZRANGE's LIMIT.
    fn range(
        &self,
        tx: &Tx,
        sel: &Select,
        rev: bool,
        offset: i64,
        limit: i64,
    ) -> daisy::Result<Vec<Elem>>;
    /// How many elements `sel` names.
    fn count(&self, tx: &Tx, sel: &Select) -> daisy::Result<u64>;
    /// Remove the elements `sel` names; how many.
    fn remove_range(&mut self, tx: &mut Tx, sel: &Select) -> daisy::Result<u64>;
    /// Remove up to `count` elements from the low end (or the high end, `max`); them, in the
    /// order removed.
    fn pop(&mut self, tx: &mut Tx, max: bool, count: u64) -> daisy::Result<Vec<Elem>>;
    /// Every element, ascending.
    fn all(&self, tx: &Tx) -> daisy::Result<Vec<Elem>>;
    /// An element chosen uniformly at random (the set is not empty).
    fn random(&self, tx: &Tx, rng: &mut dyn FnMut() -> u64) -> daisy::Result<Elem>;
}

pub fn damaged(why: impl std::fmt::Display) -> daisy::Error {
    daisy::Error::Unsupported(format!(
        "damaged sorted set: {why} (run `daisy pool check`)"
    ))
}

// ---- walks over an ordered list (Redis's listpack algorithms) -------------------------------

/// An ordered list of elements: what the walks read.
trait Ordered {
    fn n(&self) -> usize;
    fn score_at(&self, i: usize) -> f64;
    fn member_at(&self, i: usize) -> &[u8];
}

impl<M: AsRef<[u8]>> Ordered for [(M, f64)] {
    fn n(&self) -> usize {
        self.len()
    }
    fn score_at(&self, i: usize) -> f64 {
        self[i].1
    }
    fn member_at(&self, i: usize) -> &[u8] {
        self[i].0.as_ref()
    }
}

fn first_in_score(o: &(impl Ordered + ?Sized), r: &ScoreRange) -> Option<usize> {
    let n = o.n();
    if r.is_empty() || n == 0 || !r.gte_min(o.score_at(n - 1)) || !r.lte_max(o.score_at(0)) {
        return None;
    }
    let i = (0..n).find(|&i| r.gte_min(o.score_at(i)))?;
    r.lte_max(o.score_at(i)).then_some(i)
}

fn last_in_score(o: &(impl Ordered + ?Sized), r: &ScoreRange) -> Option<usize> {
    let n = o.n();
    if r.is_empty() || n == 0 || !r.gte_min(o.score_at(n - 1)) || !r.lte_max(o.score_at(0)) {
        return None;
    }
    let i = (0..n).rev().find(|&i| r.lte_max(o.score_at(i)))?;
    r.gte_min(o.score_at(i)).then_some(i)
}

fn first_in_lex(o: &(impl Ordered + ?Sized), r: &LexRange) -> Option<usize> {
    let n = o.n();
    if r.is_empty() || n == 0 || !r.gte_min(o.member_at(n - 1)) || !r.lte_max(o.member_at(0)) {
        return None;
    }
    let i = (0..n).find(|&i| r.gte_min(o.member_at(i)))?;
    r.lte_max(o.member_at(i)).then_some(i)
}

fn last_in_lex(o: &(impl Ordered + ?Sized), r: &LexRange) -> Option<usize> {
    let n = o.n();
    if r.is_empty() || n == 0 || !r.gte_min(o.member_at(n - 1)) || !r.lte_max(o.member_at(0)) {
        return None;
    }
    let i = (0..n).rev().find(|&i| r.lte_max(o.member_at(i)))?;
    r.gte_min(o.member_at(i)).then_some(i)
}

/// Whether element `i` is still in range walking forward (`lte_max`) or backward (`gte_min`).
fn still_in(o: &(impl Ordered + ?Sized), sel: &Select, i: usize, rev: bool) -> bool {
    match sel {
        Select::Rank { .. } => true,
        Select::Score(r) if rev => r.gte_min(o.score_at(i)),
        Select::Score(r) => r.lte_max(o.score_at(i)),
        Select::Lex(r) if rev => r.gte_min(o.member_at(i)),
        Select::Lex(r) => r.lte_max(o.member_at(i)),
    }
}

/// The indexes `sel` names, in reply order (see [`ZIndex::range`]).
fn walk(
    o: &(impl Ordered + ?Sized),
    sel: &Select,
    rev: bool,
    offset: i64,
    mut limit: i64,
) -> Vec<usize> {
    let n = o.n();
    let start = match sel {
        Select::Rank { from, to } => {
            let (from, to) = (*from as usize, (*to as usize).min(n.saturating_sub(1)));
            if n == 0 || from > to {
                return Vec::new();
            }
            return if rev {
                (from..=to).rev().collect()
            } else {
                (from..=to).collect()
            };
        }
        // genericZrangebyscoreCommand: an offset past the set answers nothing.
        Select::Score(_) if offset > 0 && offset as u64 >= n as u64 => return Vec::new(),
        Select::Score(r) if rev => last_in_score(o, r),
        Select::Score(r) => first_in_score(o, r),
        Select::Lex(r) if rev => last_in_lex(o, r),
        Select::Lex(r) => first_in_lex(o, r),
    };
    let Some(start) = start else {
        return Vec::new();
    };
    // A negative offset walks off the end ("while (eptr && offset--)").
    if offset < 0 {
        return Vec::new();
    }
    let mut i = if rev {
        match (start as u64).checked_sub(offset as u64) {
            Some(i) => i as usize,
            None => return Vec::new(),
        }
    } else {
        match (start as u64).checked_add(offset as u64) {
            Some(i) if i < n as u64 => i as usize,
            _ => return Vec::new(),
        }
    };
    let mut out = Vec::new();
    while limit != 0 {
        if !still_in(o, sel, i, rev) {
            break;
        }
        out.push(i);
        // "while (ln && limit--)": a negative limit never reaches 0.
        if limit > 0 {
            limit -= 1;
        }
        if rev {
            if i == 0 {
                break;
            }
            i -= 1;
        } else {
            i += 1;
            if i >= n {
                break;
            }
        }
    }
    out
}

/// The contiguous indexes `[start, end)` that `sel` names (counts and removals: from the
/// first element in range, forward while in range).
fn span(o: &(impl Ordered + ?Sized), sel: &Select) -> (usize, usize) {
    let n = o.n();
    let first = match sel {
        Select::Rank { from, to } => {
            let to = (*to as usize).min(n.saturating_sub(1));
            return if n == 0 || *from as usize > to {
                (0, 0)
            } else {
                (*from as usize, to + 1)
            };
        }
        Select::Score(r) => first_in_score(o, r),
        Select::Lex(r) => first_in_lex(o, r),
    };
    let Some(first) = first else {
        return (0, 0);
    };
    let mut end = first;
    while end < n && still_in(o, sel, end, false) {
        end += 1;
    }
    (first, end)
}

// ---- the packed encoding --------------------------------------------------------------------

/// A small sorted set: a [`PackedBuf`] of member, score (8 bytes, an `f64` little-endian),
/// member, score, ... in ascending (score, member) order. A score of -0 is kept as 0, as
/// Redis's listpack keeps it (its `double2ll` turns -0 into the integer 0).
#[derive(Clone, Debug)]
pub struct ZPacked {
    buf: PackedBuf,
}

/// The score stored for `d` in a packed set.
pub fn packed_score(d: f64) -> f64 {
    if d == 0.0 {
        0.0
    } else {
        d
    }
}

fn score_bytes(b: &[u8]) -> Option<f64> {
    let w: [u8; 8] = b.try_into().ok()?;
    let d = f64::from_le_bytes(w);
    (!d.is_nan()).then_some(d)
}

impl ZPacked {
    pub fn new() -> ZPacked {
        ZPacked {
            buf: PackedBuf::new(),
        }
    }

    /// Take a record's payload: its structure, an even count and 8-byte non-NaN scores are
    /// checked (the order is `check`'s business: a misordered blob answers wrongly but safely).
    pub fn from_payload(p: Vec<u8>) -> Result<ZPacked, String> {
        let buf = PackedBuf::from_payload(p)?;
        if buf.count() % 2 != 0 {
            return Err("packed sorted set with an odd number of items".into());
        }
        let z = ZPacked { buf };
        for (i, it) in z.buf.items().enumerate() {
            if i % 2 == 1 && score_bytes(z.buf.get(&it)).is_none() {
                return Err(format!("packed sorted set: item {i} is not a score"));
            }
        }
        Ok(z)
    }

    /// The blob (the record's payload).
    pub fn bytes(&self) -> &[u8] {
        self.buf.bytes()
    }

    pub fn count(&self) -> usize {
        self.buf.count() / 2
    }

    /// (member's position, score) of every element, in order.
    fn entries(&self) -> Vec<(ItemAt, f64)> {
        let mut out = Vec::with_capacity(self.count());
        let mut it = self.buf.items();
        while let (Some(m), Some(s)) = (it.next(), it.next()) {
            out.push((m, score_bytes(self.buf.get(&s)).unwrap_or(0.0)));
        }
        out
    }

    /// Every element borrowed from the blob, in order (what the walks read).
    fn view(&self) -> Vec<(&[u8], f64)> {
        self.entries()
            .into_iter()
            .map(|(m, s)| (self.buf.get(&m), s))
            .collect()
    }

    fn elem(&self, at: &(ItemAt, f64)) -> Elem {
        (self.buf.get(&at.0).to_vec(), at.1)
    }

    fn find(&self, member: &[u8]) -> Option<(ItemAt, f64)> {
        let (_, at) = self.buf.find(2, member)?;
        let s = score_bytes(self.buf.get(&self.buf.next(&at))).unwrap_or(0.0);
        Some((at, s))
    }

    /// Insert an element known to be absent, at its place in the order.
    fn insert(&mut self, member: &[u8], score: f64) {
        let score = packed_score(score);
        let pos = self
            .entries()
            .into_iter()
            .find(|(m, s)| cmp_entry((*s, self.buf.get(m)), (score, member)).is_gt())
            .map_or(self.buf.end(), |(m, _)| m.start);
        self.buf.insert_at(pos, &[member, &score.to_le_bytes()]);
    }

    /// Remove the elements of indexes `[from, to)`.
    fn remove_indexes(&mut self, from: usize, to: usize) {
        if from < to {
            let at = self.buf.items().nth(2 * from);
            if let Some(at) = at {
                self.buf.remove(&at, 2 * (to - from));
            }
        }
    }
}

impl Default for ZPacked {
    fn default() -> Self {
        Self::new()
    }
}

impl ZIndex for ZPacked {
    fn len(&self, _: &Tx) -> daisy::Result<u64> {
        Ok(self.count() as u64)
    }

    fn score(&self, _: &Tx, member: &[u8]) -> daisy::Result<Option<f64>> {
        Ok(self.find(member).map(|(_, s)| s))
    }

    fn set(&mut self, _: &mut Tx, member: &[u8], score: f64) -> daisy::Result<Option<f64>> {
        let old = self.find(member);
        if let Some((at, _)) = &old {
            self.buf.remove(at, 2);
        }
        self.insert(member, score);
        Ok(old.map(|(_, s)| s))
    }

    fn remove(&mut self, _: &mut Tx, member: &[u8]) -> daisy::Result<Option<f64>> {
        let old = self.find(member);
        if let Some((at, _)) = &old {
            self.buf.remove(at, 2);
        }
        Ok(old.map(|(_, s)| s))
    }

    fn rank(&self, _: &Tx, member: &[u8]) -> daisy::Result<Option<u64>> {
        Ok(self.buf.find(2, member).map(|(i, _)| (i / 2) as u64))
    }

    fn range(
        &self,
        _: &Tx,
        sel: &Select,
        rev: bool,
        offset: i64,
        limit: i64,
    ) -> daisy::Result<Vec<Elem>> {
        let v = self.view();
        Ok(walk(&v[..], sel, rev, offset, limit)
            .into_iter()
            .map(|i| (v[i].0.to_vec(), v[i].1))
            .collect())
    }

    fn count(&self, _: &Tx, sel: &Select) -> daisy::Result<u64> {
        let v = self.view();
        let (a, b) = span(&v[..], sel);
        Ok((b - a) as u64)
    }

    fn remove_range(&mut self, _: &mut Tx, sel: &Select) -> daisy::Result<u64> {
        let (a, b) = span(&self.view()[..], sel);
        self.remove_indexes(a, b);
        Ok((b - a) as u64)
    }

    fn pop(&mut self, _: &mut Tx, max: bool, count: u64) -> daisy::Result<Vec<Elem>> {
        let e = self.entries();
        let n = e.len();
        let k = (count.min(n as u64)) as usize;
        let out: Vec<Elem> = if max {
            e[n - k..].iter().rev().map(|x| self.elem(x)).collect()
        } else {
            e[..k].iter().map(|x| self.elem(x)).collect()
        };
        if max {
            self.remove_indexes(n - k, n);
        } else {
            self.remove_indexes(0, k);
        }
        Ok(out)
    }

    fn all(&self, _: &Tx) -> daisy::Result<Vec<Elem>> {
        Ok(self.entries().iter().map(|x| self.elem(x)).collect())
    }

    fn random(&self, _: &Tx, rng: &mut dyn FnMut() -> u64) -> daisy::Result<Elem> {
        let e = self.entries();
        if e.is_empty() {
            return Err(damaged("empty"));
        }
        Ok(self.elem(&e[(rng() % e.len() as u64) as usize]))
    }
}

// ---- the big encoding (a map and an ordered index) -----------------------------------------

/// A big sorted set: its map (member -> score, 8 bytes little-endian: Redis's dict) and its
/// ordered index (a `PTreeMap` whose keys are [`tree_key`]s, score bytes then member, with
/// empty values: Redis's skiplist), both through views in the command's transaction. Every
/// change writes both in that transaction. `fresh`: created by this command (its record must
/// be written).
pub struct ZBig {
    pub view: BytesMapView,
    pub tree: TreeMapView,
    pub fresh: bool,
}

/// A map value's score.
pub fn map_score(v: &[u8]) -> daisy::Result<f64> {
    score_bytes(v).ok_or_else(|| damaged(format!("a score of {} bytes or NaN", v.len())))
}

/// The score of a map entry (read in place; an entry of another length than a score's is
/// damage, as [`map_score`] says).
fn entry_score(tx: &Tx, e: &daisy::EntryRef) -> daisy::Result<f64> {
    if e.value_len() != 8 {
        return Err(damaged(format!("a score of {} bytes", e.value_len())));
    }
    let mut b = [0u8; 8];
    e.read_tx(tx, 0, &mut b)?;
    map_score(&b)
}

/// The key just above every key that starts with `prefix` (None: there is none).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

/// Index bounds of a score range (not empty).
fn score_bounds(r: &ScoreRange) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lo = if r.minex {
        match prefix_end(&score_key(r.min)) {
            Some(k) => Bound::Included(k),
            None => Bound::Excluded(vec![0xff; 9]),
        }
    } else {
        Bound::Included(score_key(r.min).to_vec())
    };
    let hi = if r.maxex {
        Bound::Excluded(score_key(r.max).to_vec())
    } else {
        match prefix_end(&score_key(r.max)) {
            Some(k) => Bound::Excluded(k),
            None => Bound::Unbounded,
        }
    };
    (lo, hi)
}

/// Index bounds of a lex range over elements that all have the score whose key is `sk`.
fn lex_bounds(r: &LexRange, sk: &[u8; 8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let with = |m: &[u8]| [&sk[..], m].concat();
    let lo = match &r.min {
        LexItem::Min => Bound::Included(sk.to_vec()),
        LexItem::Max => Bound::Excluded(vec![0xff; 9]),
        LexItem::Str(m) if r.minex => Bound::Excluded(with(m)),
        LexItem::Str(m) => Bound::Included(with(m)),
    };
    let hi = match &r.max {
        LexItem::Max => prefix_end(sk).map_or(Bound::Unbounded, Bound::Excluded),
        LexItem::Min => Bound::Excluded(sk.to_vec()),
        LexItem::Str(m) if r.maxex => Bound::Excluded(with(m)),
        LexItem::Str(m) => Bound::Included(with(m)),
    };
    (lo, hi)
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(&k[..]),
        Bound::Excluded(k) => Bound::Excluded(&k[..]),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// How a big set answers a selection: by index ranks, or (a lex range over elements of
/// different scores, which Redis leaves to its skiplist's walk) by walking every element.
enum Plan {
    Ranks(u64, u64),
    Walk(Vec<Elem>),
}

impl ZBig {
    /// The element an ordered index entry stands for. The key's score is the element's but
    /// for the sign of a zero (keys order -0 with 0, as Redis compares scores): a zero's
    /// score is read from the map, where the sign is kept.
    fn tree_elem(&self, tx: &Tx, e: Entry) -> daisy::Result<Elem> {
        let (s, m) =
            split_tree_key(&e.0).ok_or_else(|| damaged("an index key of under 8 bytes"))?;
        if s == 0.0 {
            let exact = self
                .score(tx, m)?
                .ok_or_else(|| damaged("an indexed member missing from the table"))?;
            return Ok((m.to_vec(), exact));
        }
        Ok((m.to_vec(), s))
    }

    /// Create an empty big set (map and index) in the command's transaction.
    pub fn create(c: &mut crate::commands::Ctx) -> daisy::Result<ZBig> {
        let view = crate::types::create_table(c, std::iter::empty())?;
        let id = PTreeMap::create_in(c.tx)?;
        let tree = PTreeMap::view(c.ks.pool(), c.tx, id)?;
        Ok(ZBig {
            view,
            tree,
            fresh: true,
        })
    }

    /// The half-open ranks `[a, b)` of the elements a score or lex selection names, or every
    /// element (for a walk) where ranks cannot say.
    fn plan(&self, tx: &Tx, sel: &Select) -> daisy::Result<Plan> {
        let n = self.tree.len(tx)?;
        let (lo, hi) = match sel {
            Select::Rank { from, to } => {
                let to = (*to).min(n.saturating_sub(1));
                return Ok(if n == 0 || *from > to {
                    Plan::Ranks(0, 0)
                } else {
                    Plan::Ranks(*from, to + 1)
                });
            }
            Select::Score(r) if r.is_empty() => return Ok(Plan::Ranks(0, 0)),
            Select::Score(r) => score_bounds(r),
            Select::Lex(r) if r.is_empty() || n == 0 => return Ok(Plan::Ranks(0, 0)),
            Select::Lex(r) => {
                let first = self.tree.first(tx)?.ok_or_else(|| damaged("empty index"))?;
                let last = self.tree.last(tx)?.ok_or_else(|| damaged("empty index"))?;
                if first.0.len() < 8 || last.0.len() < 8 || first.0[..8] != last.0[..8] {
                    return Ok(Plan::Walk(self.all(tx)?));
                }
                let sk: [u8; 8] = first.0[..8].try_into().expect("8 bytes");
                lex_bounds(r, &sk)
            }
        };
        let a = self.tree.lower_rank(tx, as_ref(&lo))?;
        let b = self.tree.upper_rank(tx, as_ref(&hi))?;
        Ok(Plan::Ranks(a, b.max(a)))
    }

    /// The elements of ranks `[a, b)`, ascending.
    fn ranks(&self, tx: &Tx, a: u64, b: u64) -> daisy::Result<Vec<Elem>> {
        if a >= b {
            return Ok(Vec::new());
        }
        self.tree
            .range_by_rank(tx, a, b - 1, false)?
            .into_iter()
            .map(|e| self.tree_elem(tx, e))
            .collect()
    }

    /// The map entry of `member` and its score (one probe of the map: ZADD reads the score
    /// and then rewrites it where it lies, see [`ZBig::set_found`]).
    pub fn find(
        &self,
        tx: &Tx,
        member: &[u8],
    ) -> daisy::Result<(Option<daisy::EntryRef>, Option<f64>)> {
        let entry = self.view.entry(tx, member)?;
        let old = match &entry {
            Some(e) => Some(entry_score(tx, e)?),
            None => None,
        };
        Ok((entry, old))
    }

    /// Insert `member` at `score`, or move it there, where [`ZBig::find`] found its `entry`
    /// with the score `old` (both None: absent) and nothing changed the set since; its old
    /// score. The member's entry is found once: a second look-up of the member cost about a
    /// tenth of a ZADD's time.
    pub fn set_found(
        &mut self,
        tx: &mut Tx,
        member: &[u8],
        entry: Option<daisy::EntryRef>,
        old: Option<f64>,
        score: f64,
    ) -> daisy::Result<Option<f64>> {
        let key = tree_key(score, member);
        match old {
            Some(o) if o.to_bits() == score.to_bits() => return Ok(old),
            // A new score orders the member elsewhere: its index entry moves there (one
            // pass over the tree, not a removal and an insert).
            Some(o) if score_key(o) != score_key(score) => {
                if !self.tree.move_key(tx, &tree_key(o, member), &key, &[])? {
                    return Err(damaged("a member missing from the ordered index"));
                }
            }
            _ => {
                self.tree.insert(tx, &key, &[])?;
            }
        }
        match entry {
            // The same 8 bytes a replacement would leave, through the redo log (the entry is
            // live: the tree's changes above touch no entry of the map).
            Some(e) => e.write_tx(tx, 0, &score.to_le_bytes())?,
            None => {
                self.view.insert(tx, member, &score.to_le_bytes())?;
            }
        }
        Ok(old)
    }

    /// Remove `member` (whose score is `score`) from the index.
    fn unindex(&mut self, tx: &mut Tx, member: &[u8], score: f64) -> daisy::Result<()> {
        if self.tree.remove(tx, &tree_key(score, member))?.is_none() {
            return Err(damaged("a member missing from the ordered index"));
        }
        Ok(())
    }
}

impl ZIndex for ZBig {
    fn len(&self, tx: &Tx) -> daisy::Result<u64> {
        self.view.len(tx)
    }

    fn score(&self, tx: &Tx, member: &[u8]) -> daisy::Result<Option<f64>> {
        match self.view.get(tx, member)? {
            Some(v) => Ok(Some(map_score(&v)?)),
            None => Ok(None),
        }
    }

    fn set(&mut self, tx: &mut Tx, member: &[u8], score: f64) -> daisy::Result<Option<f64>> {
        let (entry, old) = self.find(tx, member)?;
        self.set_found(tx, member, entry, old, score)
    }

    fn remove(&mut self, tx: &mut Tx, member: &[u8]) -> daisy::Result<Option<f64>> {
        let old = self.score(tx, member)?;
        if let Some(o) = old {
            self.view.remove(tx, member)?;
            self.unindex(tx, member, o)?;
        }
        Ok(old)
    }

    fn rank(&self, tx: &Tx, member: &[u8]) -> daisy::Result<Option<u64>> {
        let Some(s) = self.score(tx, member)? else {
            return Ok(None);
        };
        let (r, found) = self.tree.rank(tx, &tree_key(s, member))?;
        if !found {
            return Err(damaged("a member missing from the ordered index"));
        }
        Ok(Some(r))
    }

    fn range(
        &self,
        tx: &Tx,
        sel: &Select,
        rev: bool,
        offset: i64,
        limit: i64,
    ) -> daisy::Result<Vec<Elem>> {
        let (a, b) = match self.plan(tx, sel)? {
            Plan::Walk(v) => {
                return Ok(walk(&v[..], sel, rev, offset, limit)
                    .into_iter()
                    .map(|i| v[i].clone())
                    .collect())
            }
            Plan::Ranks(a, b) => (a, b),
        };
        if let Select::Rank { .. } = sel {
            let mut v = self.ranks(tx, a, b)?;
            if rev {
                v.reverse();
            }
            return Ok(v);
        }
        // LIMIT: a negative offset answers nothing, a negative count means all.
        if offset < 0 || limit == 0 {
            return Ok(Vec::new());
        }
        let n = b - a;
        let offset = offset as u64;
        if offset >= n {
            return Ok(Vec::new());
        }
        let take = if limit < 0 {
            n - offset
        } else {
            (limit as u64).min(n - offset)
        };
        let (x, y) = if rev {
            (b - offset - take, b - offset)
        } else {
            (a + offset, a + offset + take)
        };
        let mut v = self.ranks(tx, x, y)?;
        if rev {
            v.reverse();
        }
        Ok(v)
    }

    fn count(&self, tx: &Tx, sel: &Select) -> daisy::Result<u64> {
        Ok(match self.plan(tx, sel)? {
            Plan::Ranks(a, b) => b - a,
            Plan::Walk(v) => {
                let (a, b) = span(&v[..], sel);
                (b - a) as u64
            }
        })
    }

    fn remove_range(&mut self, tx: &mut Tx, sel: &Select) -> daisy::Result<u64> {
        let gone = match self.plan(tx, sel)? {
            Plan::Ranks(a, b) => {
                let gone = self.ranks(tx, a, b)?;
                if a < b {
                    self.tree.remove_range_by_rank(tx, a, b - 1)?;
                }
                gone
            }
            Plan::Walk(v) => {
                let (a, b) = span(&v[..], sel);
                for (m, s) in &v[a..b] {
                    self.unindex(tx, m, *s)?;
                }
                v[a..b].to_vec()
            }
        };
        for (m, _) in &gone {
            self.view.remove(tx, m)?;
        }
        Ok(gone.len() as u64)
    }

    fn pop(&mut self, tx: &mut Tx, max: bool, count: u64) -> daisy::Result<Vec<Elem>> {
        let mut out = Vec::new();
        while (out.len() as u64) < count {
            let e = if max {
                self.tree.pop_last(tx)?
            } else {
                self.tree.pop_first(tx)?
            };
            let Some(e) = e else { break };
            let e = self.tree_elem(tx, e)?;
            self.view.remove(tx, &e.0)?;
            out.push(e);
        }
        Ok(out)
    }

    fn all(&self, tx: &Tx) -> daisy::Result<Vec<Elem>> {
        let n = self.tree.len(tx)?;
        self.ranks(tx, 0, n)
    }

    fn random(&self, tx: &Tx, rng: &mut dyn FnMut() -> u64) -> daisy::Result<Elem> {
        let (m, e) = self
            .view
            .random_entry(tx, rng)?
            .ok_or_else(|| damaged("empty table"))?;
        if e.value_len() != 8 {
            return Err(damaged(format!("a score of {} bytes", e.value_len())));
        }
        let mut v = [0u8; 8];
        self.view.read_value(tx, &e, 0, &mut v)?;
        Ok((m, map_score(&v)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elems(v: &[(&str, f64)]) -> Vec<(Vec<u8>, f64)> {
        v.iter().map(|(m, s)| (m.as_bytes().to_vec(), *s)).collect()
    }

    fn names(v: &[(Vec<u8>, f64)], idx: &[usize]) -> Vec<String> {
        idx.iter()
            .map(|&i| String::from_utf8(v[i].0.clone()).unwrap())
            .collect()
    }

    #[test]
    fn walks_follow_redis_listpack_code() {
        let v = elems(&[("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 4.0), ("e", 5.0)]);
        let s = |a: &[u8], b: &[u8]| Select::Score(ScoreRange::parse(a, b).unwrap());
        assert_eq!(
            names(&v, &walk(&v[..], &s(b"2", b"4"), false, 0, -1)),
            ["b", "c", "d"]
        );
        assert_eq!(
            names(&v, &walk(&v[..], &s(b"2", b"(4"), true, 0, -1)),
            ["c", "b"]
        );
        assert_eq!(
            names(&v, &walk(&v[..], &s(b"-inf", b"inf"), false, 1, 2)),
            ["b", "c"]
        );
        assert_eq!(
            names(&v, &walk(&v[..], &s(b"-inf", b"inf"), true, 1, -5)),
            ["d", "c", "b", "a"]
        );
        assert!(walk(&v[..], &s(b"-inf", b"inf"), false, -1, 3).is_empty());
        assert!(walk(&v[..], &s(b"-inf", b"inf"), false, 5, 3).is_empty());
        assert!(walk(&v[..], &s(b"2", b"4"), false, 0, 0).is_empty());
        assert!(walk(&v[..], &s(b"4", b"2"), false, 0, -1).is_empty());
        assert!(walk(&v[..], &s(b"(3", b"(4"), false, 0, -1).is_empty());
        // An offset past the range's end, inside the set: nothing (the walk checks again).
        assert!(walk(&v[..], &s(b"1", b"2"), false, 3, -1).is_empty());
        assert_eq!(span(&v[..], &s(b"(1", b"4")), (1, 4));
        let r = Select::Rank { from: 1, to: 9 };
        assert_eq!(
            names(&v, &walk(&v[..], &r, true, 0, -1)),
            ["e", "d", "c", "b"]
        );
        assert_eq!(span(&v[..], &r), (1, 5));
        // Lex over different scores: the listpack's answer (the first in range, then every
        // next one while not above the maximum, whatever its order).
        let w = elems(&[("b", 1.0), ("a", 2.0), ("c", 3.0), ("b", 4.0)]);
        let l = |a: &[u8], b: &[u8]| Select::Lex(LexRange::parse(a, b).unwrap());
        assert_eq!(
            names(&w, &walk(&w[..], &l(b"[b", b"[c"), false, 0, -1)),
            ["b", "a", "c", "b"]
        );
        assert_eq!(span(&w[..], &l(b"[a", b"[c")), (0, 4));
        assert_eq!(
            names(&w, &walk(&w[..], &l(b"-", b"[b"), true, 0, -1)),
            ["b", "c", "a", "b"]
        );
    }

    #[test]
    fn packed_keeps_redis_order() {
        let mut z = ZPacked::new();
        for (m, s) in [
            ("b", 1.0),
            ("a", 1.0),
            ("c", -0.0),
            ("d", f64::INFINITY),
            ("e", -2.5),
        ] {
            z.insert(m.as_bytes(), s);
        }
        let v = z.view();
        let got: Vec<(&[u8], f64)> = v.clone();
        assert_eq!(
            got,
            vec![
                (&b"e"[..], -2.5),
                (&b"c"[..], 0.0),
                (&b"a"[..], 1.0),
                (&b"b"[..], 1.0),
                (&b"d"[..], f64::INFINITY)
            ]
        );
        assert!(v[1].1.is_sign_positive(), "-0 is kept as 0");
        let again = ZPacked::from_payload(z.bytes().to_vec()).unwrap();
        assert_eq!(again.view(), v);
        z.remove_indexes(1, 3);
        assert_eq!(z.count(), 3);
        assert_eq!(z.find(b"b").map(|x| x.1), Some(1.0));
        assert!(z.find(b"a").is_none());
        assert!(
            ZPacked::from_payload(crate::types::packed::encode([&b"m"[..]].into_iter())).is_err()
        );
        assert!(ZPacked::from_payload(crate::types::packed::encode(
            [&b"m"[..], &f64::NAN.to_le_bytes()[..]].into_iter()
        ))
        .is_err());
    }
}
