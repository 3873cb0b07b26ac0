//! Lists (Redis's t_list.c): layout and commands, the blocking ones included.
//!
//! Layout, by the record's encoding:
//! * `Packed`: the items, head first, in a [`packed`] blob in the record (one Redis quicklist
//!   node: a listpack), while the list stays within `list-max-listpack-size` (-2: 8 KiB of
//!   items; a positive value counts items);
//! * `Seq`: a persistent sequence of its own (`daisy::PSeq`, a quicklist of chunks); the
//!   payload is its header offset, owned by the record. A list that outgrows a packed blob
//!   becomes one, in the command that crosses the limit, and never goes back.
//!
//! A big list's LTRIM unlinks whole chunks onto the sequence's garbage chain and frees up to
//! [`GARBAGE_BUDGET`] of them in its own transaction; each later LTRIM frees as many more, and
//! deleting the list frees the rest.
//!
//! OBJECT ENCODING answers `quicklist` for both, as Redis 7.0 does for every list. An empty
//! list is deleted.
//!
//! Invariants (`check`): a packed blob decodes and holds at least one item; a sequence is
//! sound (its own check) and holds at least one item. Crash reasoning: as every type (module
//! `types`): a packed list is rewritten through the record, a sequence changes through a view
//! in the command's transaction, a conversion builds the sequence and rewrites the record in
//! that same transaction.
//!
//! Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) answer at once when a key has
//! items, as their non-blocking forms; otherwise they block the client (`Ctx::block`) and the
//! event loop runs them again when one of their keys gets a list (`server.rs`, "Blocked
//! clients"), or answers null when their timeout passes.

use super::packed::PackedBuf;
use super::{packed, DataType, Type, Value};
use crate::commands::{parse_i64, range_arg, Ctx, E_INT, E_SYNTAX, E_WRONGTYPE};
use crate::keyspace::{Enc, Header, Val};
use crate::pubsub::{N_GENERIC, N_LIST};
use crate::{resp, typed};
use daisy::{PPtr, PSeq, Pool, SeqView};

pub struct Lists;

/// A list's items as a checker reads them (read-only, no transaction).
fn items_of(pool: &Pool, enc: Enc, payload: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    match enc {
        Enc::Seq => daisy::seq_items(pool, seq_id(payload)?.offset()).map_err(|e| e.to_string()),
        _ => Ok(packed::decode(payload)?
            .into_iter()
            .map(|i| i.to_vec())
            .collect()),
    }
}

impl DataType for Lists {
    fn owned(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Result<Vec<u64>, String> {
        match enc {
            Enc::Seq => {
                daisy::seq_objects(pool, seq_id(payload)?.offset()).map_err(|e| e.to_string())
            }
            _ => Ok(Vec::new()),
        }
    }

    fn check(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Vec<String> {
        match items_of(pool, enc, payload) {
            Ok(items) if items.is_empty() => vec![format!("{enc:?} list with no item")],
            Ok(_) => Vec::new(),
            Err(e) => vec![e],
        }
    }

    fn dump(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Result<Value, String> {
        Ok(Value::List(items_of(pool, enc, payload)?))
    }
}

fn damaged(why: String) -> daisy::Error {
    daisy::Error::Unsupported(format!("damaged list: {why} (run `daisy pool check`)"))
}

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Head,
    Tail,
}

impl End {
    /// LEFT or RIGHT (any case); None after the syntax error reply.
    fn parse(c: &mut Ctx, a: &[u8]) -> daisy::Result<Option<End>> {
        if a.eq_ignore_ascii_case(b"left") {
            Ok(Some(End::Head))
        } else if a.eq_ignore_ascii_case(b"right") {
            Ok(Some(End::Tail))
        } else {
            c.err(E_SYNTAX)?;
            Ok(None)
        }
    }

    /// The keyspace event of a push at this end.
    fn push_event(self) -> &'static str {
        match self {
            End::Head => "lpush",
            End::Tail => "rpush",
        }
    }

    /// The keyspace event of a pop from this end.
    fn pop_event(self) -> &'static str {
        match self {
            End::Head => "lpop",
            End::Tail => "rpop",
        }
    }
}

/// A list opened for a command.
pub enum ListVal {
    /// The items, head first (a packed record, decoded).
    Packed(Vec<Vec<u8>>),
    /// A sequence, through a view in the command's transaction; `fresh` when this command
    /// created it (its record is still to be written); `len` its length as the command left it.
    Seq {
        view: SeqView,
        fresh: bool,
        len: usize,
        /// This command trimmed whole chunks onto the garbage chain (LTRIM): `store` frees
        /// some.
        trimmed: bool,
    },
}

/// Chunks of a big list's sequence freed by an LTRIM (the rest wait for the next LTRIM, or the
/// list's deletion: they stay reachable from the sequence's garbage chain).
const GARBAGE_BUDGET: u32 = 1024;

impl ListVal {
    pub fn open(c: &mut Ctx, v: &Val) -> daisy::Result<ListVal> {
        let p = c.payload(v)?;
        match v.enc {
            Enc::Seq => {
                let id = seq_id(&p).map_err(damaged)?;
                let view = c.ks.seq_view(c.tx, id.offset())?;
                let len = view.len(c.tx)? as usize;
                Ok(ListVal::Seq {
                    view,
                    fresh: false,
                    len,
                    trimmed: false,
                })
            }
            _ => {
                let items = packed::decode(&p).map_err(damaged)?;
                Ok(ListVal::Packed(
                    items.into_iter().map(|i| i.to_vec()).collect(),
                ))
            }
        }
    }

    /// A big list (encoding `Seq`) opened for a push: its record's payload is read on the
    /// stack and its length is not read, since the push returns the new one (it sets `len`):
    /// each saves a read through the transaction, a tenth of an LPUSH in a group commit.
    fn open_seq_for_push(c: &mut Ctx, v: &Val) -> daisy::Result<ListVal> {
        if v.len != 8 {
            return Err(damaged(format!(
                "sequence list payload of {} bytes (want 8)",
                v.len
            )));
        }
        let mut p = [0u8; 8];
        v.entry.read_tx(c.tx, v.off, &mut p)?;
        let id = seq_id(&p).map_err(damaged)?;
        let view = c.ks.seq_view(c.tx, id.offset())?;
        Ok(ListVal::Seq {
            view,
            fresh: false,
            len: 0, // set by the push
            trimmed: false,
        })
    }

    pub fn new() -> ListVal {
        ListVal::Packed(Vec::new())
    }

    pub fn len(&self) -> usize {
        match self {
            ListVal::Packed(v) => v.len(),
            ListVal::Seq { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Push `items` one by one at `end` (LPUSH a b c leaves c first).
    pub fn push(&mut self, c: &mut Ctx, items: &[&[u8]], end: End) -> daisy::Result<()> {
        match self {
            ListVal::Packed(v) => match end {
                End::Tail => v.extend(items.iter().map(|i| i.to_vec())),
                End::Head => {
                    let mut front: Vec<Vec<u8>> = items.iter().rev().map(|i| i.to_vec()).collect();
                    front.append(v);
                    *v = front;
                }
            },
            ListVal::Seq { view, len, .. } => {
                *len = match end {
                    End::Tail => view.push_back_many(c.tx, items)?,
                    End::Head => view.push_front_many(c.tx, items)?,
                } as usize;
            }
        }
        Ok(())
    }

    /// Remove up to `n` items from `end`, in the order they were popped.
    pub fn pop(&mut self, c: &mut Ctx, end: End, n: usize) -> daisy::Result<Vec<Vec<u8>>> {
        match self {
            ListVal::Packed(v) => {
                let n = n.min(v.len());
                Ok(match end {
                    End::Head => v.drain(..n).collect(),
                    End::Tail => v.drain(v.len() - n..).rev().collect(),
                })
            }
            ListVal::Seq { view, len, .. } => {
                let out = match end {
                    End::Head => view.pop_front_n(c.tx, n as u64)?,
                    End::Tail => view.pop_back_n(c.tx, n as u64)?,
                };
                *len -= out.len();
                Ok(out)
            }
        }
    }

    /// The item at a Redis index (negative from the tail).
    pub fn get(&self, c: &Ctx, index: i64) -> daisy::Result<Option<Vec<u8>>> {
        let Some(i) = self.resolve(index) else {
            return Ok(None);
        };
        match self {
            ListVal::Packed(v) => Ok(Some(v[i].clone())),
            ListVal::Seq { view, .. } => view.get(c.tx, i as i64),
        }
    }

    /// Every item, head first.
    pub fn all(&self, c: &Ctx) -> daisy::Result<Vec<Vec<u8>>> {
        match self.len() {
            0 => Ok(Vec::new()),
            n => self.range(c, 0, n - 1, false),
        }
    }

    /// Replace the item at a Redis index; false when out of range.
    pub fn set(&mut self, c: &mut Ctx, index: i64, value: &[u8]) -> daisy::Result<bool> {
        let Some(i) = self.resolve(index) else {
            return Ok(false);
        };
        match self {
            ListVal::Packed(v) => v[i] = value.to_vec(),
            ListVal::Seq { view, .. } => view.set(c.tx, i as i64, value)?,
        }
        Ok(true)
    }

    fn resolve(&self, index: i64) -> Option<usize> {
        let len = self.len() as i64;
        let i = if index < 0 { len + index } else { index };
        (0..len).contains(&i).then_some(i as usize)
    }

    /// Items `start..=end` (0-based, in range), from the head, or from `end` back when
    /// `reverse`.
    pub fn range(
        &self,
        c: &Ctx,
        start: usize,
        end: usize,
        reverse: bool,
    ) -> daisy::Result<Vec<Vec<u8>>> {
        match self {
            ListVal::Packed(v) => {
                let mut out: Vec<Vec<u8>> = v[start..=end].to_vec();
                if reverse {
                    out.reverse();
                }
                Ok(out)
            }
            ListVal::Seq { view, .. } => view.range(c.tx, start as i64, end as i64, reverse),
        }
    }

    /// Insert `value` before or after the first item equal to `pivot`; false when none is.
    pub fn insert(
        &mut self,
        c: &mut Ctx,
        pivot: &[u8],
        value: &[u8],
        after: bool,
    ) -> daisy::Result<bool> {
        match self {
            ListVal::Packed(v) => match v.iter().position(|i| i == pivot) {
                Some(p) => {
                    v.insert(p + after as usize, value.to_vec());
                    Ok(true)
                }
                None => Ok(false),
            },
            ListVal::Seq { view, len, .. } => {
                let Some(&p) = view.position(c.tx, pivot, 1, 1, 0)?.first() else {
                    return Ok(false);
                };
                *len = view.insert_at(c.tx, p + after as u64, value)? as usize;
                Ok(true)
            }
        }
    }

    /// Remove items equal to `value`: `count` > 0 the first that many from the head, < 0 from
    /// the tail, 0 all. Returns how many went.
    pub fn remove_value(&mut self, c: &mut Ctx, value: &[u8], count: i64) -> daisy::Result<usize> {
        match self {
            ListVal::Packed(v) => {
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let mut removed = 0;
                if count >= 0 {
                    v.retain(|i| {
                        if removed < limit && i == value {
                            removed += 1;
                            false
                        } else {
                            true
                        }
                    });
                } else {
                    let mut keep: Vec<bool> = vec![true; v.len()];
                    for (j, i) in v.iter().enumerate().rev() {
                        if removed < limit && i == value {
                            keep[j] = false;
                            removed += 1;
                        }
                    }
                    let mut k = keep.into_iter();
                    v.retain(|_| k.next().unwrap_or(true));
                }
                Ok(removed)
            }
            ListVal::Seq { view, len, .. } => {
                let removed = view.remove_value(c.tx, value, count)? as usize;
                *len -= removed;
                Ok(removed)
            }
        }
    }

    /// Drop `head` items from the head and `tail` from the tail.
    pub fn trim(&mut self, c: &mut Ctx, head: usize, tail: usize) -> daisy::Result<()> {
        match self {
            ListVal::Packed(v) => {
                let head = head.min(v.len());
                v.drain(..head);
                let tail = tail.min(v.len());
                v.truncate(v.len() - tail);
            }
            ListVal::Seq {
                view, len, trimmed, ..
            } => {
                let head = head.min(*len);
                let tail = tail.min(*len - head);
                if head + tail == *len {
                    view.clear(c.tx)?;
                } else if head + tail > 0 {
                    view.trim(c.tx, head as i64, (*len - tail - 1) as i64)?;
                }
                *len -= head + tail;
                *trimmed = true;
            }
        }
        Ok(())
    }

    /// Walk the items from the head (or the tail when `from_tail`) while `f(index, item)`
    /// returns true; indexes count from the head.
    pub fn walk(
        &self,
        c: &Ctx,
        from_tail: bool,
        mut f: impl FnMut(usize, &[u8]) -> bool,
    ) -> daisy::Result<()> {
        match self {
            ListVal::Packed(v) => {
                if from_tail {
                    for (i, item) in v.iter().enumerate().rev() {
                        if !f(i, item) {
                            break;
                        }
                    }
                } else {
                    for (i, item) in v.iter().enumerate() {
                        if !f(i, item) {
                            break;
                        }
                    }
                }
            }
            ListVal::Seq { view, len, .. } => {
                if *len == 0 {
                    return Ok(());
                }
                let mut i = if from_tail { *len - 1 } else { 0 };
                for item in view.iter(c.tx, if from_tail { -1 } else { 0 }, from_tail)? {
                    if !f(i, &item?) {
                        break;
                    }
                    if from_tail {
                        i = i.wrapping_sub(1);
                    } else {
                        i += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether a packed list of these items outgrows one packed record
    /// (`list-max-listpack-size`: negative -1..-5 for 4..64 KiB of items, positive an item
    /// count, as Redis's quicklist node limits).
    fn outgrows_packed(c: &Ctx, items: &[Vec<u8>]) -> bool {
        Self::outgrows_packed_by(c, items.len(), || items.iter().map(|i| i.len() + 2).sum())
    }

    /// [`ListVal::outgrows_packed`] of a list of `count` items whose `bytes()` is the sum of
    /// their lengths plus 2 each (computed only for a byte limit).
    fn outgrows_packed_by(c: &Ctx, count: usize, bytes: impl FnOnce() -> usize) -> bool {
        let limit = c.sv.config.list_max_listpack_size;
        if limit > 0 {
            return count as i64 > limit;
        }
        let max = 4096usize << (limit.unsigned_abs().clamp(1, 5) - 1);
        // Each item costs its bytes and a few of header in the packed blob.
        bytes() > max
    }

    /// Write the list back under `key` after a change: an empty list is deleted; a packed one
    /// that outgrew a packed record becomes a sequence (never back, as in Redis). `old` is the
    /// key's record before the command (None: the key is new).
    pub fn store(mut self, c: &mut Ctx, key: &[u8], old: Option<&Val>) -> daisy::Result<()> {
        let db = c.db();
        if self.is_empty() {
            drop(self);
            if let Some(o) = old {
                c.ks.delete(c.tx, db, key, o)?;
                c.notify(N_GENERIC, "del", key);
            }
            c.touch(key);
            return Ok(());
        }
        if let ListVal::Packed(v) = &self {
            if Self::outgrows_packed(c, v) {
                let id = PSeq::create_in(c.tx)?;
                let mut view = PSeq::view(c.ks.pool(), c.tx, id)?;
                let items: Vec<&[u8]> = v.iter().map(|i| &i[..]).collect();
                let len = view.push_back_many(c.tx, &items)? as usize;
                self = ListVal::Seq {
                    view,
                    fresh: true,
                    len,
                    trimmed: false,
                };
            }
        }
        let exp = old.and_then(|v| v.expire_ms);
        match self {
            ListVal::Packed(v) => {
                let payload = packed::encode(v.iter().map(|i| &i[..]));
                Self::put_packed(c, key, old, &payload)?;
            }
            ListVal::Seq {
                view, fresh: true, ..
            } => {
                let id = view.id().offset().to_le_bytes();
                c.ks.views.keep_seq(c.tx, view);
                let hdr = Header::new(Type::List, Enc::Seq).with_expire(exp);
                c.ks.put(c.tx, db, key, hdr, &[&id], old, false)?;
            }
            ListVal::Seq {
                mut view,
                fresh: false,
                trimmed,
                ..
            } => {
                // Garbage comes only from trims (this command's, or an earlier one's that
                // left more than one budget), so only a trim looks for it: pushes and pops
                // pay nothing.
                if trimmed && view.has_garbage(c.tx)? {
                    view.collect_garbage(c.tx, GARBAGE_BUDGET)?;
                }
                c.ks.views.keep_seq(c.tx, view);
            }
        }
        c.touch(key);
        Ok(())
    }

    /// Write the packed blob `payload` (not empty) as `key`'s record, replacing `old`.
    fn put_packed(c: &mut Ctx, key: &[u8], old: Option<&Val>, payload: &[u8]) -> daisy::Result<()> {
        let exp = old.and_then(|v| v.expire_ms);
        let hdr = Header::new(Type::List, Enc::Packed).with_expire(exp);
        let db = c.db();
        c.ks.put(c.tx, db, key, hdr, &[payload], old, false)
    }

    /// Push `items` at `end` of the packed list `old` (a record of encoding `Packed`, or None
    /// for a new key) by splicing its blob, with no allocation per item: a push costs a
    /// memmove of the blob instead of decoding and re-encoding every item (what made the
    /// first round of an LPUSH benchmark, 800 pushes onto one growing packed list, take
    /// 14 ms). Returns the new length, or None, having changed nothing, when the list
    /// outgrows a packed record: the caller then converts it through [`ListVal::store`].
    fn push_packed(
        c: &mut Ctx,
        key: &[u8],
        old: Option<&Val>,
        items: &[&[u8]],
        end: End,
    ) -> daisy::Result<Option<usize>> {
        let mut buf = match old {
            Some(v) => PackedBuf::from_payload(c.payload(v)?).map_err(damaged)?,
            None => PackedBuf::new(),
        };
        match end {
            End::Tail => buf.push(items),
            End::Head => {
                // LPUSH a b c leaves c first: the items go in before the head, reversed.
                let front: Vec<&[u8]> = items.iter().rev().copied().collect();
                let at = buf.items().next().map_or(buf.end(), |i| i.start);
                buf.insert_at(at, &front);
            }
        }
        let bytes = || buf.items().map(|i| i.data.len() + 2).sum();
        if Self::outgrows_packed_by(c, buf.count(), bytes) {
            return Ok(None);
        }
        Self::put_packed(c, key, old, buf.bytes())?;
        c.touch(key);
        Ok(Some(buf.count()))
    }
}

/// A view of the big list whose record's payload is `payload` (COPY).
pub fn seq_view(c: &mut Ctx, payload: &[u8]) -> daisy::Result<SeqView> {
    let id = seq_id(payload).map_err(damaged)?;
    c.ks.seq_view(c.tx, id.offset())
}

/// A big list's sequence from its record's payload.
fn seq_id(payload: &[u8]) -> Result<PPtr<PSeq>, String> {
    let b: [u8; 8] = payload
        .try_into()
        .map_err(|_| format!("sequence list payload of {} bytes (want 8)", payload.len()))?;
    Ok(PPtr::from_offset(u64::from_le_bytes(b)))
}

impl Default for ListVal {
    fn default() -> Self {
        ListVal::new()
    }
}

/// The list at `key` (None when absent); Err(()) after a WRONGTYPE reply.
fn open_typed(
    c: &mut Ctx,
    key: &[u8],
    read: bool,
) -> daisy::Result<Result<Option<(Val, ListVal)>, ()>> {
    let r = if read {
        c.lookup_typed_read(key, Type::List)?
    } else {
        c.lookup_typed(key, Type::List)?
    };
    match r {
        Err(_) => {
            c.err(E_WRONGTYPE)?;
            Ok(Err(()))
        }
        Ok(None) => Ok(Ok(None)),
        Ok(Some(v)) => {
            let l = ListVal::open(c, &v)?;
            Ok(Ok(Some((v, l))))
        }
    }
}

macro_rules! or_return {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(()) => return Ok(()),
        }
    };
}

/// An integer argument (Redis's `getLongFromObjectOrReply`); None after the error reply.
fn long_arg(c: &mut Ctx, a: &[u8]) -> daisy::Result<Option<i64>> {
    match parse_i64(a) {
        Some(n) => Ok(Some(n)),
        None => {
            c.err(E_INT)?;
            Ok(None)
        }
    }
}

/// Redis's range arithmetic (`addListRangeReply`, LTRIM): `start..=end` within `len`, or
/// None when the range is empty.
fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as usize, e as usize))
}

fn reply_items(c: &mut Ctx, items: &[Vec<u8>]) {
    resp::array(c.out, items.len());
    for i in items {
        resp::bulk(c.out, i);
    }
}

// ---- pushes -------------------------------------------------------------------------------

fn push_generic(c: &mut Ctx, a: &[&[u8]], end: End, only_existing: bool) -> daisy::Result<()> {
    let old = typed!(c, c.lookup_typed(a[1], Type::List)?);
    if old.is_none() && only_existing {
        resp::int(c.out, 0);
        return Ok(());
    }
    if old.as_ref().is_none_or(|v| v.enc != Enc::Seq) {
        if let Some(len) = ListVal::push_packed(c, a[1], old.as_ref(), &a[2..], end)? {
            c.notify(N_LIST, end.push_event(), a[1]);
            resp::int(c.out, len as i64);
            return Ok(());
        }
    }
    let mut l = match &old {
        Some(v) if v.enc == Enc::Seq => ListVal::open_seq_for_push(c, v)?,
        Some(v) => ListVal::open(c, v)?,
        None => ListVal::new(),
    };
    l.push(c, &a[2..], end)?;
    let len = l.len();
    l.store(c, a[1], old.as_ref())?;
    c.notify(N_LIST, end.push_event(), a[1]);
    resp::int(c.out, len as i64);
    Ok(())
}

pub fn lpush(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    push_generic(c, a, End::Head, false)
}

pub fn rpush(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    push_generic(c, a, End::Tail, false)
}

pub fn lpushx(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    push_generic(c, a, End::Head, true)
}

pub fn rpushx(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    push_generic(c, a, End::Tail, true)
}

// ---- pops ---------------------------------------------------------------------------------

fn pop_generic(c: &mut Ctx, a: &[&[u8]], end: End) -> daisy::Result<()> {
    if a.len() > 3 {
        let name = String::from_utf8_lossy(a[0]).to_ascii_lowercase();
        return c.err(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let count = if a.len() == 3 {
        match parse_i64(a[2]) {
            Some(n) if n >= 0 => Some(n as usize),
            // getPositiveLongFromObjectOrReply: one message for both failures.
            _ => return c.err("ERR value is out of range, must be positive"),
        }
    } else {
        None
    };
    let Some((v, mut l)) = or_return!(open_typed(c, a[1], false)?) else {
        if count.is_some() {
            c.null_array();
        } else {
            c.nil();
        }
        return Ok(());
    };
    match count {
        Some(0) => resp::array(c.out, 0),
        Some(n) => {
            let items = l.pop(c, end, n)?;
            reply_items(c, &items);
            c.notify(N_LIST, end.pop_event(), a[1]);
            l.store(c, a[1], Some(&v))?;
        }
        None => {
            let items = l.pop(c, end, 1)?;
            resp::bulk(c.out, &items[0]);
            c.notify(N_LIST, end.pop_event(), a[1]);
            l.store(c, a[1], Some(&v))?;
        }
    }
    Ok(())
}

pub fn lpop(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    pop_generic(c, a, End::Head)
}

pub fn rpop(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    pop_generic(c, a, End::Tail)
}

/// LMPOP/BLMPOP's parsed arguments: the keys, the end to pop from, the count.
type MpopArgs<'a> = (Vec<&'a [u8]>, End, usize);

/// LMPOP/BLMPOP's arguments from `numkeys` on, or None after the error reply.
fn mpop_args<'a>(
    c: &mut Ctx,
    a: &[&'a [u8]],
    numkeys_at: usize,
) -> daisy::Result<Option<MpopArgs<'a>>> {
    let Some(n) = range_arg(
        c,
        a[numkeys_at],
        1,
        i64::MAX,
        Some("numkeys should be greater than 0"),
    )?
    else {
        return Ok(None);
    };
    let where_at = (numkeys_at as u64)
        .saturating_add(n as u64)
        .saturating_add(1);
    if where_at >= a.len() as u64 {
        c.err(E_SYNTAX)?;
        return Ok(None);
    }
    let where_at = where_at as usize;
    let Some(end) = End::parse(c, a[where_at])? else {
        return Ok(None);
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < a.len() {
        if count.is_none() && a[j].eq_ignore_ascii_case(b"count") && j + 1 < a.len() {
            let Some(n) = range_arg(
                c,
                a[j + 1],
                1,
                i64::MAX,
                Some("count should be greater than 0"),
            )?
            else {
                return Ok(None);
            };
            count = Some(n as usize);
            j += 2;
        } else {
            c.err(E_SYNTAX)?;
            return Ok(None);
        }
    }
    let keys = a[numkeys_at + 1..where_at].to_vec();
    Ok(Some((keys, end, count.unwrap_or(1))))
}

/// Pop up to `count` from the first non-empty list among `keys` and reply `[key, [items]]`;
/// Ok(false) when every key is empty (nothing replied), Err(()) after a WRONGTYPE reply.
fn mpop_first(
    c: &mut Ctx,
    keys: &[&[u8]],
    end: End,
    count: usize,
) -> daisy::Result<Result<bool, ()>> {
    let (k, v) = match c.first_of_type(keys, Type::List)? {
        Err(()) => return Ok(Err(())),
        Ok(None) => return Ok(Ok(false)),
        Ok(Some(found)) => found,
    };
    let mut l = ListVal::open(c, &v)?;
    let items = l.pop(c, end, count)?;
    resp::array(c.out, 2);
    resp::bulk(c.out, k);
    reply_items(c, &items);
    c.notify(N_LIST, end.pop_event(), k);
    l.store(c, k, Some(&v))?;
    Ok(Ok(true))
}

pub fn lmpop(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some((keys, end, count)) = mpop_args(c, a, 1)? else {
        return Ok(());
    };
    if !or_return!(mpop_first(c, &keys, end, count)?) {
        c.null_array();
    }
    Ok(())
}

pub fn blmpop(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(deadline) = c.timeout_arg(a[1])? else {
        return Ok(());
    };
    let Some((keys, end, count)) = mpop_args(c, a, 2)? else {
        return Ok(());
    };
    if !or_return!(mpop_first(c, &keys, end, count)?) {
        c.block(Type::List, &keys, deadline, false, a);
    }
    Ok(())
}

/// BLPOP/BRPOP: `key... timeout`.
fn bpop(c: &mut Ctx, a: &[&[u8]], end: End) -> daisy::Result<()> {
    let Some(deadline) = c.timeout_arg(a[a.len() - 1])? else {
        return Ok(());
    };
    let keys = &a[1..a.len() - 1];
    for &k in keys {
        if !c.may_serve(k) {
            continue;
        }
        match c.lookup_typed(k, Type::List)? {
            Err(_) => {
                if c.cl.serving.is_some() {
                    return Ok(());
                }
                return c.err(E_WRONGTYPE);
            }
            Ok(None) => continue,
            Ok(Some(v)) => {
                let mut l = ListVal::open(c, &v)?;
                let items = l.pop(c, end, 1)?;
                resp::array(c.out, 2);
                resp::bulk(c.out, k);
                resp::bulk(c.out, &items[0]);
                c.notify(N_LIST, end.pop_event(), k);
                l.store(c, k, Some(&v))?;
                return Ok(());
            }
        }
    }
    c.block(Type::List, keys, deadline, false, a);
    Ok(())
}

pub fn blpop(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    bpop(c, a, End::Head)
}

pub fn brpop(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    bpop(c, a, End::Tail)
}

// ---- moves --------------------------------------------------------------------------------

/// Move one item from `src`'s `from` end to `dst`'s `to` end and reply with it (Redis's
/// `lmoveGenericCommand`). `src` holds a list (`sv`, `sl`).
fn do_move(
    c: &mut Ctx,
    src: &[u8],
    sv: Val,
    mut sl: ListVal,
    dst: &[u8],
    from: End,
    to: End,
) -> daisy::Result<()> {
    if src == dst {
        // A rotation: one list.
        let item = sl.pop(c, from, 1)?.remove(0);
        sl.push(c, &[&item], to)?;
        sl.store(c, src, Some(&sv))?;
        c.notify(N_LIST, to.push_event(), src);
        c.notify(N_LIST, from.pop_event(), src);
        resp::bulk(c.out, &item);
        return Ok(());
    }
    let dv = typed!(c, c.lookup_typed(dst, Type::List)?);
    let mut dl = match &dv {
        Some(v) => ListVal::open(c, v)?,
        None => ListVal::new(),
    };
    let item = sl.pop(c, from, 1)?.remove(0);
    dl.push(c, &[&item], to)?;
    dl.store(c, dst, dv.as_ref())?;
    c.notify(N_LIST, to.push_event(), dst);
    c.notify(N_LIST, from.pop_event(), src);
    sl.store(c, src, Some(&sv))?;
    resp::bulk(c.out, &item);
    Ok(())
}

fn move_generic(c: &mut Ctx, src: &[u8], dst: &[u8], from: End, to: End) -> daisy::Result<()> {
    let Some((sv, sl)) = or_return!(open_typed(c, src, false)?) else {
        c.nil();
        return Ok(());
    };
    do_move(c, src, sv, sl, dst, from, to)
}

pub fn lmove(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(from) = End::parse(c, a[3])? else {
        return Ok(());
    };
    let Some(to) = End::parse(c, a[4])? else {
        return Ok(());
    };
    move_generic(c, a[1], a[2], from, to)
}

pub fn rpoplpush(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    move_generic(c, a[1], a[2], End::Tail, End::Head)
}

fn bmove(c: &mut Ctx, a: &[&[u8]], from: End, to: End, timeout_at: usize) -> daisy::Result<()> {
    let Some(deadline) = c.timeout_arg(a[timeout_at])? else {
        return Ok(());
    };
    match c.lookup_typed(a[1], Type::List)? {
        Err(_) => {
            if c.cl.serving.is_some() {
                return Ok(());
            }
            c.err(E_WRONGTYPE)
        }
        Ok(Some(v)) => {
            let l = ListVal::open(c, &v)?;
            do_move(c, a[1], v, l, a[2], from, to)
        }
        Ok(None) => {
            c.block(Type::List, &a[1..2], deadline, true, a);
            Ok(())
        }
    }
}

pub fn blmove(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(from) = End::parse(c, a[3])? else {
        return Ok(());
    };
    let Some(to) = End::parse(c, a[4])? else {
        return Ok(());
    };
    bmove(c, a, from, to, 5)
}

pub fn brpoplpush(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    bmove(c, a, End::Tail, End::Head, 3)
}

// ---- reads and edits ----------------------------------------------------------------------

pub fn llen(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let n = or_return!(open_typed(c, a[1], true)?).map_or(0, |(_, l)| l.len());
    resp::int(c.out, n as i64);
    Ok(())
}

pub fn lindex(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some((_, l)) = or_return!(open_typed(c, a[1], true)?) else {
        c.nil();
        return Ok(());
    };
    let Some(i) = long_arg(c, a[2])? else {
        return Ok(());
    };
    match l.get(c, i)? {
        Some(item) => resp::bulk(c.out, &item),
        None => c.nil(),
    }
    Ok(())
}

pub fn lset(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some((v, mut l)) = or_return!(open_typed(c, a[1], false)?) else {
        return c.err("ERR no such key");
    };
    let Some(i) = long_arg(c, a[2])? else {
        return Ok(());
    };
    if !l.set(c, i, a[3])? {
        return c.err("ERR index out of range");
    }
    l.store(c, a[1], Some(&v))?;
    c.notify(N_LIST, "lset", a[1]);
    resp::ok(c.out);
    Ok(())
}

pub fn lrange(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(start) = long_arg(c, a[2])? else {
        return Ok(());
    };
    let Some(end) = long_arg(c, a[3])? else {
        return Ok(());
    };
    let Some((_, l)) = or_return!(open_typed(c, a[1], true)?) else {
        resp::array(c.out, 0);
        return Ok(());
    };
    match clamp_range(start, end, l.len()) {
        Some((s, e)) => {
            resp::array(c.out, e - s + 1);
            match &l {
                ListVal::Packed(v) => {
                    for i in &v[s..=e] {
                        resp::bulk(c.out, i);
                    }
                }
                // Straight from the chunks into the reply (no copy per item).
                ListVal::Seq { view, .. } => {
                    let mark = c.out.len();
                    let out = &mut *c.out;
                    if let Err(err) = view.range_each(c.tx, s as i64, e as i64, false, |item| {
                        resp::bulk(out, item)
                    }) {
                        // A damaged chunk: no half reply goes out with the error.
                        c.out.truncate(mark);
                        return Err(err);
                    }
                }
            }
        }
        None => resp::array(c.out, 0),
    }
    Ok(())
}

pub fn ltrim(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(start) = long_arg(c, a[2])? else {
        return Ok(());
    };
    let Some(end) = long_arg(c, a[3])? else {
        return Ok(());
    };
    let Some((v, mut l)) = or_return!(open_typed(c, a[1], false)?) else {
        resp::ok(c.out);
        return Ok(());
    };
    let len = l.len();
    let (head, tail) = match clamp_range(start, end, len) {
        Some((s, e)) => (s, len - e - 1),
        None => (len, 0),
    };
    // Redis sends the event even when nothing was trimmed.
    c.notify(N_LIST, "ltrim", a[1]);
    if head > 0 || tail > 0 {
        l.trim(c, head, tail)?;
        l.store(c, a[1], Some(&v))?;
    }
    resp::ok(c.out);
    Ok(())
}

pub fn linsert(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let after = if a[2].eq_ignore_ascii_case(b"after") {
        true
    } else if a[2].eq_ignore_ascii_case(b"before") {
        false
    } else {
        return c.err(E_SYNTAX);
    };
    let Some((v, mut l)) = or_return!(open_typed(c, a[1], false)?) else {
        resp::int(c.out, 0);
        return Ok(());
    };
    if !l.insert(c, a[3], a[4], after)? {
        resp::int(c.out, -1);
        return Ok(());
    }
    let len = l.len();
    l.store(c, a[1], Some(&v))?;
    c.notify(N_LIST, "linsert", a[1]);
    resp::int(c.out, len as i64);
    Ok(())
}

pub fn lrem(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(count) = long_arg(c, a[2])? else {
        return Ok(());
    };
    let Some((v, mut l)) = or_return!(open_typed(c, a[1], false)?) else {
        resp::int(c.out, 0);
        return Ok(());
    };
    let n = l.remove_value(c, a[3], count)?;
    if n > 0 {
        c.notify(N_LIST, "lrem", a[1]);
        l.store(c, a[1], Some(&v))?;
    }
    resp::int(c.out, n as i64);
    Ok(())
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
pub fn lpos(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<i64>, 0i64);
    let mut j = 3;
    while j < a.len() {
        let more = j + 1 < a.len();
        let opt = a[j];
        if opt.eq_ignore_ascii_case(b"rank") && more {
            let Some(r) = long_arg(c, a[j + 1])? else {
                return Ok(());
            };
            if r == 0 {
                return c.err(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the \
                     second ... or use negative to start from the end of the list",
                );
            }
            rank = r;
        } else if opt.eq_ignore_ascii_case(b"count") && more {
            let Some(n) = range_arg(c, a[j + 1], 0, i64::MAX, Some("COUNT can't be negative"))?
            else {
                return Ok(());
            };
            count = Some(n);
        } else if opt.eq_ignore_ascii_case(b"maxlen") && more {
            let Some(n) = range_arg(c, a[j + 1], 0, i64::MAX, Some("MAXLEN can't be negative"))?
            else {
                return Ok(());
            };
            maxlen = n;
        } else {
            return c.err(E_SYNTAX);
        }
        j += 2;
    }
    let from_tail = rank < 0;
    // Redis negates a negative rank in a signed long: LLONG_MIN stays negative, and every
    // match then reaches it, as rank 1 from the tail.
    let rank = if rank == i64::MIN {
        1
    } else {
        rank.unsigned_abs()
    };
    let Some((_, l)) = or_return!(open_typed(c, a[1], true)?) else {
        if count.is_some() {
            resp::array(c.out, 0);
        } else {
            c.nil();
        }
        return Ok(());
    };
    let mut matches = 0u64;
    let mut found: Vec<usize> = Vec::new();
    let mut scanned = 0i64;
    l.walk(c, from_tail, |i, item| {
        if maxlen != 0 && scanned >= maxlen {
            return false;
        }
        scanned += 1;
        if item == a[2] {
            matches += 1;
            if matches >= rank {
                found.push(i);
                match count {
                    None => return false,
                    Some(0) => {}
                    Some(n) => {
                        if found.len() as i64 >= n {
                            return false;
                        }
                    }
                }
            }
        }
        true
    })?;
    match count {
        Some(_) => {
            resp::array(c.out, found.len());
            for i in found {
                resp::int(c.out, i as i64);
            }
        }
        None => match found.first() {
            Some(&i) => resp::int(c.out, i as i64),
            None => c.nil(),
        },
    }
    Ok(())
}
