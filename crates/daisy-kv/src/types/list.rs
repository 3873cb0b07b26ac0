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

use super::{packed, DataType, Type, Value};
use crate::commands::{parse_i64, range_arg, Ctx, E_INT, E_SYNTAX, E_WRONGTYPE};
use crate::keyspace::{Enc, Header, Val};
use crate::{resp, typed};
use daisy::Pool;

pub struct Lists;

impl DataType for Lists {
    fn owned(&self, _pool: &Pool, _enc: Enc, _payload: &[u8]) -> Result<Vec<u64>, String> {
        Ok(Vec::new())
    }

    fn check(&self, _pool: &Pool, _enc: Enc, payload: &[u8]) -> Vec<String> {
        match packed::decode(payload) {
            Ok(items) if items.is_empty() => vec!["packed list with no item".into()],
            Ok(_) => Vec::new(),
            Err(e) => vec![e],
        }
    }

    fn dump(&self, _pool: &Pool, _enc: Enc, payload: &[u8]) -> Result<Value, String> {
        Ok(Value::List(
            packed::decode(payload)?
                .into_iter()
                .map(|i| i.to_vec())
                .collect(),
        ))
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
}

/// A list opened for a command.
pub enum ListVal {
    /// The items, head first (a packed record, decoded).
    Packed(Vec<Vec<u8>>),
}

impl ListVal {
    pub fn open(c: &mut Ctx, v: &Val) -> daisy::Result<ListVal> {
        let p = c.payload(v)?;
        let items = packed::decode(&p).map_err(damaged)?;
        Ok(ListVal::Packed(
            items.into_iter().map(|i| i.to_vec()).collect(),
        ))
    }

    pub fn new() -> ListVal {
        ListVal::Packed(Vec::new())
    }

    pub fn len(&self) -> usize {
        match self {
            ListVal::Packed(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Push `items` one by one at `end` (LPUSH a b c leaves c first).
    pub fn push(&mut self, _c: &mut Ctx, items: &[&[u8]], end: End) -> daisy::Result<()> {
        match self {
            ListVal::Packed(v) => match end {
                End::Tail => v.extend(items.iter().map(|i| i.to_vec())),
                End::Head => {
                    let mut front: Vec<Vec<u8>> = items.iter().rev().map(|i| i.to_vec()).collect();
                    front.append(v);
                    *v = front;
                }
            },
        }
        Ok(())
    }

    /// Remove up to `n` items from `end`, in the order they were popped.
    pub fn pop(&mut self, _c: &mut Ctx, end: End, n: usize) -> daisy::Result<Vec<Vec<u8>>> {
        match self {
            ListVal::Packed(v) => {
                let n = n.min(v.len());
                Ok(match end {
                    End::Head => v.drain(..n).collect(),
                    End::Tail => v.drain(v.len() - n..).rev().collect(),
                })
            }
        }
    }

    /// The item at a Redis index (negative from the tail).
    pub fn get(&self, _c: &Ctx, index: i64) -> daisy::Result<Option<Vec<u8>>> {
        let Some(i) = self.resolve(index) else {
            return Ok(None);
        };
        match self {
            ListVal::Packed(v) => Ok(Some(v[i].clone())),
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
    pub fn set(&mut self, _c: &mut Ctx, index: i64, value: &[u8]) -> daisy::Result<bool> {
        let Some(i) = self.resolve(index) else {
            return Ok(false);
        };
        match self {
            ListVal::Packed(v) => v[i] = value.to_vec(),
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
        _c: &Ctx,
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
        }
    }

    /// Insert `value` before or after the first item equal to `pivot`; false when none is.
    pub fn insert(
        &mut self,
        _c: &mut Ctx,
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
        }
    }

    /// Remove items equal to `value`: `count` > 0 the first that many from the head, < 0 from
    /// the tail, 0 all. Returns how many went.
    pub fn remove_value(&mut self, _c: &mut Ctx, value: &[u8], count: i64) -> daisy::Result<usize> {
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
        }
    }

    /// Drop `head` items from the head and `tail` from the tail.
    pub fn trim(&mut self, _c: &mut Ctx, head: usize, tail: usize) -> daisy::Result<()> {
        match self {
            ListVal::Packed(v) => {
                let head = head.min(v.len());
                v.drain(..head);
                let tail = tail.min(v.len());
                v.truncate(v.len() - tail);
            }
        }
        Ok(())
    }

    /// Walk the items from the head (or the tail when `from_tail`) while `f(index, item)`
    /// returns true; indexes count from the head.
    pub fn walk(
        &self,
        _c: &Ctx,
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
        }
        Ok(())
    }

    /// Write the list back under `key` after a change: an empty list is deleted. `old` is the
    /// key's record before the command (None: the key is new).
    pub fn store(self, c: &mut Ctx, key: &[u8], old: Option<&Val>) -> daisy::Result<()> {
        let db = c.db();
        if self.is_empty() {
            if let Some(o) = old {
                c.ks.delete(c.tx, db, key, o)?;
            }
            c.touch(key);
            return Ok(());
        }
        let exp = old.and_then(|v| v.expire_ms);
        let payload = match self {
            ListVal::Packed(v) => packed::encode(v.iter().map(|i| &i[..])),
        };
        let hdr = Header::new(Type::List, Enc::Packed).with_expire(exp);
        c.ks.put(c.tx, db, key, hdr, &[&payload], old, false)?;
        c.touch(key);
        Ok(())
    }
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
    let mut l = match &old {
        Some(v) => ListVal::open(c, v)?,
        None => ListVal::new(),
    };
    l.push(c, &a[2..], end)?;
    let len = l.len();
    l.store(c, a[1], old.as_ref())?;
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
            Some(_) => return c.err("ERR value is out of range, must be positive"),
            None => return c.err(E_INT),
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
            l.store(c, a[1], Some(&v))?;
        }
        None => {
            let items = l.pop(c, end, 1)?;
            resp::bulk(c.out, &items[0]);
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
    for &k in keys {
        if !c.may_serve(k) {
            continue;
        }
        match c.lookup_typed(k, Type::List)? {
            Err(_) => {
                if c.cl.serving.is_some() {
                    return Ok(Ok(false));
                }
                c.err(E_WRONGTYPE)?;
                return Ok(Err(()));
            }
            Ok(None) => continue,
            Ok(Some(v)) => {
                let mut l = ListVal::open(c, &v)?;
                let items = l.pop(c, end, count)?;
                resp::array(c.out, 2);
                resp::bulk(c.out, k);
                reply_items(c, &items);
                l.store(c, k, Some(&v))?;
                return Ok(Ok(true));
            }
        }
    }
    Ok(Ok(false))
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
            let items = l.range(c, s, e, false)?;
            reply_items(c, &items);
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
    let rank = rank.unsigned_abs();
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
