//! The sorted-set commands, as Redis 7.0's t_zset.c answers them (argument checks in its
//! order, its error texts, its reply shapes in RESP2 and RESP3). The blocking commands
//! (BZPOPMIN, BZPOPMAX, BZMPOP) are not here: they need the server's blocking machinery; what
//! they share with the others is public: [`pop`] (take elements from one key), [`parse_mpop`]
//! (ZMPOP's and BZMPOP's arguments after the key count) and [`reply_mpop`].

use super::index::{Elem, Select, ZIndex};
use super::score::{self, fmt_score, parse_score, LexRange, ScoreRange};
use super::{open_read, ZVal};
use crate::commands::{parse_i64, range_arg, Ctx, E_FLOAT, E_INT, E_SYNTAX, E_WRONGTYPE};
use crate::keyspace::Val;
use crate::pubsub::{N_GENERIC, N_ZSET};
use crate::resp;
use crate::types::{set::SetVal, Type};
use std::collections::HashMap;

const E_NAN: &str = "ERR resulting score is not a number (NaN)";
const E_NOT_FLOAT: &str = "ERR min or max is not a float";
const E_LEX: &str = "ERR min or max not valid string range item";

macro_rules! or_return {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(()) => return Ok(()),
        }
    };
}

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// A score reply (`addReplyDouble`: a bulk string in RESP2, a double in RESP3).
pub fn reply_score(c: &mut Ctx, d: f64) {
    resp::double(c.out, &fmt_score(d), c.cl.resp3);
}

/// Elements as ZRANGE answers them: members, each followed by its score when `withscores`
/// (a flat array in RESP2, an array of pairs in RESP3).
fn reply_elems(c: &mut Ctx, elems: &[Elem], withscores: bool) {
    let resp3 = c.cl.resp3;
    resp::array(
        c.out,
        if withscores && !resp3 {
            2 * elems.len()
        } else {
            elems.len()
        },
    );
    for (m, s) in elems {
        if withscores && resp3 {
            resp::array(c.out, 2);
        }
        resp::bulk(c.out, m);
        if withscores {
            reply_score(c, *s);
        }
    }
}

/// The sorted set at `key` for a write, with its record; Err after a WRONGTYPE reply.
fn open_write(c: &mut Ctx, key: &[u8]) -> daisy::Result<Result<Option<(ZVal, Val)>, ()>> {
    match c.lookup_typed(key, Type::ZSet)? {
        Err(_) => {
            c.err(E_WRONGTYPE)?;
            Ok(Err(()))
        }
        Ok(None) => Ok(Ok(None)),
        Ok(Some(v)) => Ok(Ok(Some((ZVal::open(c, &v)?, v)))),
    }
}

// ---- ZADD, ZINCRBY, ZREM --------------------------------------------------------------------

#[derive(Clone, Copy, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    incr: bool,
}

/// What adding one element did (Redis's `ZADD_OUT_*`).
#[derive(Default)]
struct Added {
    added: bool,
    updated: bool,
    nop: bool,
    score: f64,
}

/// Redis's `zsetAdd`; Err(()) when the result would be NaN.
fn zset_add(
    c: &mut Ctx,
    z: &mut ZVal,
    member: &[u8],
    score: f64,
    f: AddFlags,
) -> daisy::Result<Result<Added, ()>> {
    let mut out = Added::default();
    // A big set's member is found once: its entry serves the update below.
    let (entry, cur) = match z {
        ZVal::Big(b) => b.find(c.tx, member)?,
        ZVal::Packed(p) => (None, p.score(c.tx, member)?),
    };
    match cur {
        Some(cur) => {
            if f.nx {
                out.nop = true;
                return Ok(Ok(out));
            }
            let mut s = score;
            if f.incr {
                s += cur;
                if s.is_nan() {
                    return Ok(Err(()));
                }
            }
            if (f.lt && s >= cur) || (f.gt && s <= cur) {
                out.nop = true;
                return Ok(Ok(out));
            }
            out.score = s;
            if s != cur {
                match z {
                    ZVal::Big(b) => b.set_found(c.tx, member, entry, Some(cur), s)?,
                    ZVal::Packed(p) => p.set(c.tx, member, s)?,
                };
                out.updated = true;
            }
        }
        None if !f.xx => {
            z.add_new(c, member, score)?;
            out.added = true;
            out.score = score;
        }
        None => out.nop = true,
    }
    Ok(Ok(out))
}

/// ZADD and ZINCRBY (Redis's `zaddGenericCommand`).
fn zadd_generic(c: &mut Ctx, a: &[&[u8]], incr_cmd: bool) -> daisy::Result<()> {
    let mut f = AddFlags {
        incr: incr_cmd,
        ..Default::default()
    };
    let mut ch = false;
    let mut i = 2;
    while i < a.len() {
        let o = a[i];
        if eq(o, "nx") {
            f.nx = true;
        } else if eq(o, "xx") {
            f.xx = true;
        } else if eq(o, "ch") {
            ch = true;
        } else if eq(o, "incr") {
            f.incr = true;
        } else if eq(o, "gt") {
            f.gt = true;
        } else if eq(o, "lt") {
            f.lt = true;
        } else {
            break;
        }
        i += 1;
    }
    let elements = a.len() - i;
    if elements % 2 == 1 || elements == 0 {
        return c.err(E_SYNTAX);
    }
    let elements = elements / 2;
    if f.nx && f.xx {
        return c.err("ERR XX and NX options at the same time are not compatible");
    }
    if (f.gt || f.lt) && (f.nx || (f.gt && f.lt)) {
        return c.err("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && elements > 1 {
        return c.err("ERR INCR option supports a single increment-element pair");
    }
    let mut scores = Vec::with_capacity(elements);
    for j in 0..elements {
        match parse_score(a[i + 2 * j]) {
            Some(s) => scores.push(s),
            None => return c.err(E_FLOAT),
        }
    }
    let key = a[1];
    let (mut z, old) = match or_return!(open_write(c, key)?) {
        Some((z, v)) => (z, Some(v)),
        None => {
            if f.xx {
                return reply_add(c, f.incr, 0, None);
            }
            (ZVal::new_for(c, a[i + 1])?, None)
        }
    };
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
    let mut last = 0.0;
    for (j, &s) in scores.iter().enumerate() {
        let member = a[i + 1 + 2 * j];
        let r = match zset_add(c, &mut z, member, s, f)? {
            Ok(r) => r,
            Err(()) => return c.err(E_NAN),
        };
        added += r.added as i64;
        updated += r.updated as i64;
        if !r.nop {
            processed += 1;
            last = r.score;
        }
    }
    if added + updated > 0 {
        z.store(c, key, old.as_ref())?;
        c.notify(N_ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    let count = if ch { added + updated } else { added };
    reply_add(c, f.incr, count, (processed > 0).then_some(last))
}

fn reply_add(c: &mut Ctx, incr: bool, count: i64, score: Option<f64>) -> daisy::Result<()> {
    if incr {
        match score {
            Some(s) => reply_score(c, s),
            None => c.nil(),
        }
    } else {
        resp::int(c.out, count);
    }
    Ok(())
}

pub fn zadd(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zadd_generic(c, a, false)
}

pub fn zincrby(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zadd_generic(c, a, true)
}

pub fn zrem(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some((mut z, v)) = or_return!(open_write(c, a[1])?) else {
        resp::int(c.out, 0);
        return Ok(());
    };
    let mut deleted = 0;
    for m in &a[2..] {
        deleted += z.idx_mut().remove(c.tx, m)?.is_some() as i64;
        if z.len(c)? == 0 {
            break;
        }
    }
    if deleted > 0 {
        c.notify(N_ZSET, "zrem", a[1]);
        z.store(c, a[1], Some(&v))?;
    }
    resp::int(c.out, deleted);
    Ok(())
}

// ---- reads of one key ------------------------------------------------------------------------

pub fn zcard(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let n = match or_return!(open_read(c, a[1])?) {
        Some(z) => z.len(c)?,
        None => 0,
    };
    resp::int(c.out, n as i64);
    Ok(())
}

pub fn zscore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let s = match or_return!(open_read(c, a[1])?) {
        Some(z) => z.idx().score(c.tx, a[2])?,
        None => None,
    };
    match s {
        Some(s) => reply_score(c, s),
        None => c.nil(),
    }
    Ok(())
}

pub fn zmscore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let z = or_return!(open_read(c, a[1])?);
    resp::array(c.out, a.len() - 2);
    for m in &a[2..] {
        let s = match &z {
            Some(z) => z.idx().score(c.tx, m)?,
            None => None,
        };
        match s {
            Some(s) => reply_score(c, s),
            None => c.nil(),
        }
    }
    Ok(())
}

fn zrank_generic(c: &mut Ctx, a: &[&[u8]], rev: bool) -> daisy::Result<()> {
    let r = match or_return!(open_read(c, a[1])?) {
        Some(z) => match z.idx().rank(c.tx, a[2])? {
            Some(r) if rev => Some(z.len(c)? - 1 - r),
            r => r,
        },
        None => None,
    };
    match r {
        Some(r) => resp::int(c.out, r as i64),
        None => c.nil(),
    }
    Ok(())
}

pub fn zrank(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zrank_generic(c, a, false)
}

pub fn zrevrank(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zrank_generic(c, a, true)
}

pub fn zcount(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(r) = ScoreRange::parse(a[2], a[3]) else {
        return c.err(E_NOT_FLOAT);
    };
    let n = match or_return!(open_read(c, a[1])?) {
        Some(z) => z.idx().count(c.tx, &Select::Score(r))?,
        None => 0,
    };
    resp::int(c.out, n as i64);
    Ok(())
}

pub fn zlexcount(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(r) = LexRange::parse(a[2], a[3]) else {
        return c.err(E_LEX);
    };
    let n = match or_return!(open_read(c, a[1])?) {
        Some(z) => z.idx().count(c.tx, &Select::Lex(r))?,
        None => 0,
    };
    resp::int(c.out, n as i64);
    Ok(())
}

/// Ranks `start..=end` as ZRANGE reads them (negative from the end) clamped to a set of `len`
/// elements; None when empty.
fn clamp_ranks(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as u64, end as u64))
}

// ---- ZRANGE and friends ------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq)]
enum Dir {
    Auto,
    Fwd,
    Rev,
}

/// Redis's `zrangeGenericCommand`: `<src> <min> <max> [options]` from `a[at]`; `dst` for
/// ZRANGESTORE.
fn zrange_generic(
    c: &mut Ctx,
    a: &[&[u8]],
    at: usize,
    dst: Option<&[u8]>,
    mut by: By,
    mut dir: Dir,
) -> daisy::Result<()> {
    let key = a[at];
    let (mut minidx, mut maxidx) = (at + 1, at + 2);
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = at + 3;
    while j < a.len() {
        let left = a.len() - j - 1;
        let o = a[j];
        if dst.is_none() && eq(o, "withscores") {
            withscores = true;
        } else if eq(o, "limit") && left >= 2 {
            match (parse_i64(a[j + 1]), parse_i64(a[j + 2])) {
                (Some(x), Some(y)) => (offset, limit) = (x, y),
                _ => return c.err(E_INT),
            }
            j += 2;
        } else if dir == Dir::Auto && eq(o, "rev") {
            dir = Dir::Rev;
        } else if by == By::Auto && eq(o, "bylex") {
            by = By::Lex;
        } else if by == By::Auto && eq(o, "byscore") {
            by = By::Score;
        } else {
            return c.err(E_SYNTAX);
        }
        j += 1;
    }
    if dir == Dir::Auto {
        dir = Dir::Fwd;
    }
    if by == By::Auto {
        by = By::Rank;
    }
    if limit != -1 && by == By::Rank {
        return c.err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && by == By::Lex {
        return c.err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    let rev = dir == Dir::Rev;
    if rev && by != By::Rank {
        std::mem::swap(&mut minidx, &mut maxidx);
    }
    enum Parsed {
        Rank(i64, i64),
        Sel(Select),
    }
    let parsed = match by {
        By::Score => match ScoreRange::parse(a[minidx], a[maxidx]) {
            Some(r) => Parsed::Sel(Select::Score(r)),
            None => return c.err(E_NOT_FLOAT),
        },
        By::Lex => match LexRange::parse(a[minidx], a[maxidx]) {
            Some(r) => Parsed::Sel(Select::Lex(r)),
            None => return c.err(E_LEX),
        },
        _ => match (parse_i64(a[minidx]), parse_i64(a[maxidx])) {
            (Some(x), Some(y)) => Parsed::Rank(x, y),
            _ => return c.err(E_INT),
        },
    };
    let z = match c.lookup_typed_read(key, Type::ZSet)? {
        Err(_) => return c.err(E_WRONGTYPE),
        Ok(None) => {
            match dst {
                Some(d) => store_result(c, d, &[], "zrangestore")?,
                None => resp::array(c.out, 0),
            }
            return Ok(());
        }
        Ok(Some(v)) => ZVal::open(c, &v)?,
    };
    let elems = match parsed {
        Parsed::Rank(start, end) => {
            let len = z.len(c)?;
            match clamp_ranks(start, end, len) {
                None => Vec::new(),
                Some((s, e)) => {
                    let sel = if rev {
                        Select::Rank {
                            from: len - 1 - e,
                            to: len - 1 - s,
                        }
                    } else {
                        Select::Rank { from: s, to: e }
                    };
                    z.idx().range(c.tx, &sel, rev, 0, -1)?
                }
            }
        }
        Parsed::Sel(sel) => z.idx().range(c.tx, &sel, rev, offset, limit)?,
    };
    drop(z);
    match dst {
        Some(d) => store_result(c, d, &elems, "zrangestore"),
        None => {
            reply_elems(c, &elems, withscores);
            Ok(())
        }
    }
}

/// Replace `dst` by a sorted set of `elems` (Redis's `setKey`: whatever it held goes, its TTL
/// too), or delete it when there are none; reply with their number.
pub fn store_result(c: &mut Ctx, dst: &[u8], elems: &[Elem], event: &str) -> daisy::Result<()> {
    let existed = if let Some(old) = c.lookup(dst)? {
        let db = c.db();
        c.ks.delete(c.tx, db, dst, &old)?;
        true
    } else {
        false
    };
    if !elems.is_empty() {
        let z = ZVal::create(c, elems, true)?;
        z.store(c, dst, None)?;
        c.notify(N_ZSET, event, dst);
    } else if existed {
        c.notify(N_GENERIC, "del", dst);
    }
    resp::int(c.out, elems.len() as i64);
    Ok(())
}

pub fn zrange(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zrange_generic(c, a, 1, None, By::Auto, Dir::Auto)
}

pub fn zrangestore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zrange_generic(c, a, 2, Some(a[1]), By::Auto, Dir::Auto)
}

pub fn zrevrange(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zrange_generic(c, a, 1, None, By::Rank, Dir::Rev)
}

pub fn zrangebyscore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zrange_generic(c, a, 1, None, By::Score, Dir::Fwd)
}

pub fn zrevrangebyscore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zrange_generic(c, a, 1, None, By::Score, Dir::Rev)
}

pub fn zrangebylex(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zrange_generic(c, a, 1, None, By::Lex, Dir::Fwd)
}

pub fn zrevrangebylex(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zrange_generic(c, a, 1, None, By::Lex, Dir::Rev)
}

// ---- ZREMRANGEBY* ----------------------------------------------------------------------------

fn zremrange_generic(c: &mut Ctx, a: &[&[u8]], by: By) -> daisy::Result<()> {
    enum Parsed {
        Rank(i64, i64),
        Sel(Select),
    }
    let parsed = match by {
        By::Score => match ScoreRange::parse(a[2], a[3]) {
            Some(r) => Parsed::Sel(Select::Score(r)),
            None => return c.err(E_NOT_FLOAT),
        },
        By::Lex => match LexRange::parse(a[2], a[3]) {
            Some(r) => Parsed::Sel(Select::Lex(r)),
            None => return c.err(E_LEX),
        },
        _ => match (parse_i64(a[2]), parse_i64(a[3])) {
            (Some(x), Some(y)) => Parsed::Rank(x, y),
            _ => return c.err(E_INT),
        },
    };
    let Some((mut z, v)) = or_return!(open_write(c, a[1])?) else {
        resp::int(c.out, 0);
        return Ok(());
    };
    let sel = match parsed {
        Parsed::Rank(s, e) => match clamp_ranks(s, e, z.len(c)?) {
            Some((from, to)) => Select::Rank { from, to },
            None => {
                resp::int(c.out, 0);
                return Ok(());
            }
        },
        Parsed::Sel(s) => s,
    };
    let n = z.idx_mut().remove_range(c.tx, &sel)?;
    if n > 0 {
        let event = match by {
            By::Rank => "zremrangebyrank",
            By::Lex => "zremrangebylex",
            _ => "zremrangebyscore",
        };
        c.notify(N_ZSET, event, a[1]);
        z.store(c, a[1], Some(&v))?;
    }
    resp::int(c.out, n as i64);
    Ok(())
}

pub fn zremrangebyrank(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zremrange_generic(c, a, By::Rank)
}

pub fn zremrangebyscore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zremrange_generic(c, a, By::Score)
}

pub fn zremrangebylex(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zremrange_generic(c, a, By::Lex)
}

// ---- pops ------------------------------------------------------------------------------------

/// Take up to `count` elements from the low end (or the high end, `max`) of the sorted set at
/// `key`, which the caller found to be one; the set is written back (deleted when emptied)
/// and the key touched. The elements, in the order taken. What ZPOPMIN, ZPOPMAX, ZMPOP and
/// the blocking pops share (Redis's `genericZpopCommand` without its reply).
pub fn pop(c: &mut Ctx, key: &[u8], max: bool, count: u64) -> daisy::Result<Vec<Elem>> {
    let v = match c.lookup_typed(key, Type::ZSet)? {
        Ok(Some(v)) => v,
        _ => return Ok(Vec::new()),
    };
    let mut z = ZVal::open(c, &v)?;
    let out = z.idx_mut().pop(c.tx, max, count)?;
    if !out.is_empty() {
        c.notify(N_ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
        z.store(c, key, Some(&v))?;
    }
    Ok(out)
}

/// ZPOPMIN/ZPOPMAX key [count].
fn zpop_generic(c: &mut Ctx, a: &[&[u8]], max: bool) -> daisy::Result<()> {
    if a.len() > 3 {
        return c.err(E_SYNTAX);
    }
    let count = if a.len() == 3 {
        match range_arg(
            c,
            a[2],
            0,
            i64::MAX,
            Some("value is out of range, must be positive"),
        )? {
            Some(n) => Some(n as u64),
            None => return Ok(()),
        }
    } else {
        None
    };
    match c.lookup_typed(a[1], Type::ZSet)? {
        Err(_) => return c.err(E_WRONGTYPE),
        Ok(None) => {
            resp::array(c.out, 0);
            return Ok(());
        }
        Ok(Some(_)) => {}
    }
    if count == Some(0) {
        resp::array(c.out, 0);
        return Ok(());
    }
    let popped = pop(c, a[1], max, count.unwrap_or(1))?;
    // RESP3 with a count: pairs; otherwise one flat array.
    let nested = c.cl.resp3 && count.is_some();
    resp::array(
        c.out,
        if nested {
            popped.len()
        } else {
            2 * popped.len()
        },
    );
    for (m, s) in &popped {
        if nested {
            resp::array(c.out, 2);
        }
        resp::bulk(c.out, m);
        reply_score(c, *s);
    }
    Ok(())
}

pub fn zpopmin(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zpop_generic(c, a, false)
}

pub fn zpopmax(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zpop_generic(c, a, true)
}

/// ZMPOP's (and BZMPOP's) arguments from the key count on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mpop {
    /// The keys are `a[first_key..first_key + numkeys]`.
    pub first_key: usize,
    pub numkeys: usize,
    pub max: bool,
    /// At least 1 (1 when COUNT is not given).
    pub count: u64,
}

/// Parse `numkeys key [key ...] MIN|MAX [COUNT count]` from `a[numkeys_at]` (Redis's
/// `zmpopGenericCommand`): None after the error reply.
pub fn parse_mpop(c: &mut Ctx, a: &[&[u8]], numkeys_at: usize) -> daisy::Result<Option<Mpop>> {
    let Some(numkeys) = range_arg(
        c,
        a[numkeys_at],
        1,
        i64::MAX,
        Some("numkeys should be greater than 0"),
    )?
    else {
        return Ok(None);
    };
    let where_at = match (numkeys_at as u64 + 1).checked_add(numkeys as u64) {
        Some(w) if w < a.len() as u64 => w as usize,
        _ => {
            c.err(E_SYNTAX)?;
            return Ok(None);
        }
    };
    let max = if eq(a[where_at], "min") {
        false
    } else if eq(a[where_at], "max") {
        true
    } else {
        c.err(E_SYNTAX)?;
        return Ok(None);
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < a.len() {
        let more = a.len() - 1 - j;
        if count.is_none() && eq(a[j], "count") && more > 0 {
            j += 1;
            match range_arg(c, a[j], 1, i64::MAX, Some("count should be greater than 0"))? {
                Some(n) => count = Some(n as u64),
                None => return Ok(None),
            }
        } else {
            c.err(E_SYNTAX)?;
            return Ok(None);
        }
        j += 1;
    }
    Ok(Some(Mpop {
        first_key: numkeys_at + 1,
        numkeys: numkeys as usize,
        max,
        count: count.unwrap_or(1),
    }))
}

/// ZMPOP's (and BZMPOP's) reply: the key, then its elements as (member, score) pairs.
pub fn reply_mpop(c: &mut Ctx, key: &[u8], popped: &[Elem]) {
    resp::array(c.out, 2);
    resp::bulk(c.out, key);
    resp::array(c.out, popped.len());
    for (m, s) in popped {
        resp::array(c.out, 2);
        resp::bulk(c.out, m);
        reply_score(c, *s);
    }
}

/// Pop from the first of `keys` that holds a sorted set (only the ready key while the event
/// loop serves a blocked client) and reply with `reply`: Ok(true) when one did, Ok(false)
/// when none holds one (nothing replied), Err(()) after a WRONGTYPE reply (a blocked client
/// being served answers nothing instead and stays blocked).
fn pop_first(
    c: &mut Ctx,
    keys: &[&[u8]],
    max: bool,
    count: u64,
    reply: fn(&mut Ctx, &[u8], &[Elem]),
) -> daisy::Result<Result<bool, ()>> {
    let k = match c.first_of_type(keys, Type::ZSet)? {
        Err(()) => return Ok(Err(())),
        Ok(None) => return Ok(Ok(false)),
        Ok(Some((k, _))) => k,
    };
    let popped = pop(c, k, max, count)?;
    reply(c, k, &popped);
    Ok(Ok(true))
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]: pops from the first key that holds a
/// sorted set (WRONGTYPE if the first key that exists holds something else).
pub fn zmpop(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(p) = parse_mpop(c, a, 1)? else {
        return Ok(());
    };
    let keys = &a[p.first_key..p.first_key + p.numkeys];
    if !or_return!(pop_first(c, keys, p.max, p.count, reply_mpop)?) {
        c.null_array();
    }
    Ok(())
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count].
pub fn bzmpop(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(deadline) = c.timeout_arg(a[1])? else {
        return Ok(());
    };
    let Some(p) = parse_mpop(c, a, 2)? else {
        return Ok(());
    };
    let keys = &a[p.first_key..p.first_key + p.numkeys];
    if !or_return!(pop_first(c, keys, p.max, p.count, reply_mpop)?) {
        c.block(Type::ZSet, keys, deadline, false, a);
    }
    Ok(())
}

/// BZPOPMIN's and BZPOPMAX's reply: key, member, score.
fn reply_bzpop(c: &mut Ctx, key: &[u8], popped: &[Elem]) {
    resp::array(c.out, 3);
    resp::bulk(c.out, key);
    match popped.first() {
        Some((m, s)) => {
            resp::bulk(c.out, m);
            reply_score(c, *s);
        }
        None => {
            resp::bulk(c.out, b"");
            reply_score(c, 0.0);
        }
    }
}

/// BZPOPMIN/BZPOPMAX key [key ...] timeout.
fn bzpop(c: &mut Ctx, a: &[&[u8]], max: bool) -> daisy::Result<()> {
    let Some(deadline) = c.timeout_arg(a[a.len() - 1])? else {
        return Ok(());
    };
    let keys = &a[1..a.len() - 1];
    if !or_return!(pop_first(c, keys, max, 1, reply_bzpop)?) {
        c.block(Type::ZSet, keys, deadline, false, a);
    }
    Ok(())
}

pub fn bzpopmin(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    bzpop(c, a, false)
}

pub fn bzpopmax(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    bzpop(c, a, true)
}

// ---- ZRANDMEMBER -------------------------------------------------------------------------------

/// ZRANDMEMBER key [count [WITHSCORES]] (Redis 7.0's `zrandmemberCommand`).
pub fn zrandmember(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a.len() == 2 {
        match or_return!(open_read(c, a[1])?) {
            None => c.nil(),
            Some(z) => {
                let (m, _) = random(c, &z)?;
                resp::bulk(c.out, &m);
            }
        }
        return Ok(());
    }
    let Some(l) = range_arg(c, a[2], -i64::MAX, i64::MAX, None)? else {
        return Ok(());
    };
    if a.len() > 4 || (a.len() == 4 && !eq(a[3], "withscores")) {
        return c.err(E_SYNTAX);
    }
    let withscores = a.len() == 4;
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
        return c.err("ERR value is out of range");
    }
    let Some(z) = or_return!(open_read(c, a[1])?) else {
        resp::array(c.out, 0);
        return Ok(());
    };
    let count = l.unsigned_abs();
    if count == 0 {
        resp::array(c.out, 0);
        return Ok(());
    }
    let resp3 = c.cl.resp3;
    let header = |c: &mut Ctx, n: u64| {
        resp::array(c.out, if withscores && !resp3 { 2 * n } else { n } as usize);
    };
    let one = |c: &mut Ctx, (m, s): &Elem| {
        if withscores && resp3 {
            resp::array(c.out, 2);
        }
        resp::bulk(c.out, m);
        if withscores {
            reply_score(c, *s);
        }
    };
    // A negative count (or 1): that many draws, repeats allowed.
    if l < 0 || count == 1 {
        header(c, count);
        for _ in 0..count {
            let e = random(c, &z)?;
            one(c, &e);
        }
        return Ok(());
    }
    let size = z.len(c)?;
    header(c, count.min(size));
    // The whole set, in Redis's iteration order (from the highest element down).
    if count >= size {
        let mut all = z.idx().all(c.tx)?;
        all.reverse();
        for e in &all {
            one(c, e);
        }
        return Ok(());
    }
    // Distinct members: from all of them when many are asked for (or the set is packed),
    // else by drawing until enough differ.
    let mut picked = if count * 3 > size || z.is_packed() {
        z.idx().all(c.tx)?
    } else {
        let mut got = Vec::with_capacity(count as usize);
        let mut seen = std::collections::HashSet::new();
        while (got.len() as u64) < count {
            let e = random(c, &z)?;
            if seen.insert(e.0.clone()) {
                got.push(e);
            }
        }
        got
    };
    while picked.len() as u64 > count {
        let i = (c.random() % picked.len() as u64) as usize;
        picked.swap_remove(i);
    }
    for e in &picked {
        one(c, e);
    }
    Ok(())
}

fn random(c: &mut Ctx, z: &ZVal) -> daisy::Result<Elem> {
    let sv = &mut *c.sv;
    z.idx().random(c.tx, &mut || sv.next_random())
}

// ---- ZSCAN -------------------------------------------------------------------------------------

/// ZSCAN key cursor [MATCH pattern] [COUNT count]: a packed set answers whole with cursor 0
/// (its scores as its listpack holds them in Redis); a big one by its map's cursor.
pub fn zscan(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(cursor) = crate::types::parse_cursor(c, a[2])? else {
        return Ok(());
    };
    let Some(z) = or_return!(open_read(c, a[1])?) else {
        return crate::types::empty_scan(c);
    };
    let Some(opts) = crate::types::ScanOpts::parse(c, a, 3)? else {
        return Ok(());
    };
    let (next, items): (u64, Vec<(Vec<u8>, String)>) = match &z {
        ZVal::Packed(p) => {
            let all = super::index::ZIndex::all(p, c.tx)?;
            (
                0,
                all.into_iter()
                    .map(|(m, s)| (m, score::listpack_text(s)))
                    .collect(),
            )
        }
        ZVal::Big(b) => {
            let (n, e) = crate::types::table_scan(c, &b.view, cursor, opts.count)?;
            let mut items = Vec::with_capacity(e.len());
            for (m, v) in e {
                items.push((m, fmt_score(super::index::map_score(&v)?)));
            }
            (n, items)
        }
    };
    resp::array(c.out, 2);
    resp::bulk(c.out, next.to_string().as_bytes());
    let keep: Vec<&(Vec<u8>, String)> = items.iter().filter(|(m, _)| opts.matches(m)).collect();
    resp::array(c.out, 2 * keep.len());
    for (m, s) in keep {
        resp::bulk(c.out, m);
        resp::bulk(c.out, s.as_bytes());
    }
    Ok(())
}

// ---- ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD ----------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// One input: its elements (a set's members score 1), a lookup by member, its weight.
struct Src {
    key_index: usize,
    elems: Vec<Elem>,
    scores: HashMap<Vec<u8>, f64>,
    weight: f64,
    exists: bool,
}

impl Src {
    fn find(&self, m: &[u8]) -> Option<f64> {
        self.scores.get(m).copied()
    }
}

/// Redis's `zunionInterAggregate`.
fn aggregate(target: &mut f64, val: f64, agg: Aggregate) {
    match agg {
        Aggregate::Sum => {
            *target += val;
            // inf + -inf: 0 by convention.
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if val < *target {
                *target = val;
            }
        }
        Aggregate::Max => {
            if val > *target {
                *target = val;
            }
        }
    }
}

/// Redis's `zunionInterDiffGenericCommand`: `numkeys` at `a[numkeys_at]`, the keys after it,
/// then the options; `dst` for the STORE forms; `card` for ZINTERCARD.
fn zsetop(
    c: &mut Ctx,
    a: &[&[u8]],
    name: &str,
    dst: Option<&[u8]>,
    numkeys_at: usize,
    op: SetOp,
    card: bool,
) -> daisy::Result<()> {
    let Some(setnum) = parse_i64(a[numkeys_at]) else {
        return c.err(E_INT);
    };
    if setnum < 1 {
        return c.err(&format!(
            "ERR at least 1 input key is needed for '{name}' command"
        ));
    }
    if setnum as u64 > (a.len() - numkeys_at - 1) as u64 {
        return c.err(E_SYNTAX);
    }
    let setnum = setnum as usize;
    let first = numkeys_at + 1;
    // Every input is looked up (and its type checked) before the options are read.
    let mut vals = Vec::with_capacity(setnum);
    for k in &a[first..first + setnum] {
        match c.lookup_read(k)? {
            Some(v) if v.ty != Type::ZSet && v.ty != Type::Set => return c.err(E_WRONGTYPE),
            v => vals.push(v),
        }
    }
    let mut srcs = Vec::with_capacity(setnum);
    for (i, v) in vals.into_iter().enumerate() {
        let elems: Vec<Elem> = match v {
            None => Vec::new(),
            Some(v) if v.ty == Type::Set => SetVal::open(c, &v)?
                .all(c)?
                .into_iter()
                .map(|m| (m, 1.0))
                .collect(),
            Some(v) => ZVal::open(c, &v)?.idx().all(c.tx)?,
        };
        srcs.push(Src {
            key_index: i,
            exists: !elems.is_empty(),
            scores: HashMap::new(),
            elems,
            weight: 1.0,
        });
    }
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0u64;
    let mut j = first + setnum;
    while j < a.len() {
        let remaining = a.len() - j;
        if op != SetOp::Diff && !card && remaining > setnum && eq(a[j], "weights") {
            j += 1;
            for s in srcs.iter_mut() {
                match parse_score(a[j]) {
                    Some(w) => s.weight = w,
                    None => return c.err("ERR weight value is not a float"),
                }
                j += 1;
            }
        } else if op != SetOp::Diff && !card && remaining >= 2 && eq(a[j], "aggregate") {
            agg = if eq(a[j + 1], "sum") {
                Aggregate::Sum
            } else if eq(a[j + 1], "min") {
                Aggregate::Min
            } else if eq(a[j + 1], "max") {
                Aggregate::Max
            } else {
                return c.err(E_SYNTAX);
            };
            j += 2;
        } else if dst.is_none() && !card && eq(a[j], "withscores") {
            withscores = true;
            j += 1;
        } else if card && remaining >= 2 && eq(a[j], "limit") {
            match range_arg(c, a[j + 1], 0, i64::MAX, Some("LIMIT can't be negative"))? {
                Some(n) => limit = n as u64,
                None => return Ok(()),
            }
            j += 2;
        } else {
            return c.err(E_SYNTAX);
        }
    }
    if op != SetOp::Diff {
        // From the smallest input up (a stable sort, as glibc's qsort merges).
        srcs.sort_by_key(|s| s.elems.len());
    }
    let keys = &a[first..first + setnum];
    let mut result: Vec<Elem> = Vec::new();
    let mut cardinality = 0u64;
    match op {
        SetOp::Inter => {
            for s in srcs.iter_mut().skip(1) {
                s.scores = s.elems.iter().cloned().collect();
            }
            if !srcs[0].elems.is_empty() {
                // Redis iterates a sorted set from its highest element down.
                for (m, s0) in srcs[0].elems.iter().rev() {
                    let mut score = srcs[0].weight * s0;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    let mut everywhere = true;
                    for s in &srcs[1..] {
                        match s.find(m) {
                            Some(v) => aggregate(&mut score, v * s.weight, agg),
                            None => {
                                everywhere = false;
                                break;
                            }
                        }
                    }
                    if !everywhere {
                        continue;
                    }
                    if card {
                        cardinality += 1;
                        if limit > 0 && cardinality >= limit {
                            break;
                        }
                    } else {
                        result.push((m.clone(), score));
                    }
                }
            }
        }
        SetOp::Union => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for s in &srcs {
                for (m, v) in s.elems.iter().rev() {
                    let mut score = s.weight * v;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    match acc.get_mut(m) {
                        Some(t) => aggregate(t, score, agg),
                        None => {
                            acc.insert(m.clone(), score);
                        }
                    }
                }
            }
            result = acc.into_iter().collect();
        }
        SetOp::Diff => {
            // Nothing is left when the first input is empty, or named again (the same
            // object in Redis).
            let again = srcs[0].exists
                && srcs[1..]
                    .iter()
                    .any(|s| keys[s.key_index] == keys[srcs[0].key_index]);
            if srcs[0].exists && !again {
                for s in srcs.iter_mut().skip(1) {
                    s.scores = s.elems.iter().cloned().collect();
                }
                result = srcs[0]
                    .elems
                    .iter()
                    .filter(|(m, _)| srcs[1..].iter().all(|s| s.find(m).is_none()))
                    .cloned()
                    .collect();
            }
        }
    }
    if card {
        resp::int(c.out, cardinality as i64);
        return Ok(());
    }
    result.sort_by(|x, y| score::cmp_entry((x.1, &x.0[..]), (y.1, &y.0[..])));
    match dst {
        Some(d) => {
            let event = match op {
                SetOp::Union => "zunionstore",
                SetOp::Inter => "zinterstore",
                SetOp::Diff => "zdiffstore",
            };
            store_result(c, d, &result, event)
        }
        None => {
            reply_elems(c, &result, withscores);
            Ok(())
        }
    }
}

pub fn zunion(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zsetop(c, a, "zunion", None, 1, SetOp::Union, false)
}

pub fn zinter(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zsetop(c, a, "zinter", None, 1, SetOp::Inter, false)
}

pub fn zdiff(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zsetop(c, a, "zdiff", None, 1, SetOp::Diff, false)
}

pub fn zunionstore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zsetop(c, a, "zunionstore", Some(a[1]), 2, SetOp::Union, false)
}

pub fn zinterstore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zsetop(c, a, "zinterstore", Some(a[1]), 2, SetOp::Inter, false)
}

pub fn zdiffstore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zsetop(c, a, "zdiffstore", Some(a[1]), 2, SetOp::Diff, false)
}

pub fn zintercard(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    zsetop(c, a, "zintercard", None, 1, SetOp::Inter, true)
}

/// A new sorted set for RESTORE: its encoding and payload (packed when it fits; a payload
/// that held a listpack stays packed whatever its members' lengths, as in Redis).
pub fn create_restored(
    c: &mut Ctx,
    elems: &[Elem],
    from_listpack: bool,
) -> daisy::Result<(crate::keyspace::Enc, Vec<u8>)> {
    Ok(match ZVal::create(c, elems, !from_listpack)? {
        ZVal::Packed(p) => (crate::keyspace::Enc::Packed, p.bytes().to_vec()),
        ZVal::Big(b) => (crate::keyspace::Enc::SkipList, super::big_payload_of(&b)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_clamp_as_redis() {
        assert_eq!(clamp_ranks(0, -1, 5), Some((0, 4)));
        assert_eq!(clamp_ranks(-100, 100, 5), Some((0, 4)));
        assert_eq!(clamp_ranks(3, 1, 5), None);
        assert_eq!(clamp_ranks(5, 10, 5), None);
        assert_eq!(clamp_ranks(-2, -1, 5), Some((3, 4)));
        assert_eq!(clamp_ranks(0, -6, 5), None);
        assert_eq!(clamp_ranks(i64::MIN, i64::MAX, 5), Some((0, 4)));
        assert_eq!(clamp_ranks(0, 0, 0), None);
    }

    #[test]
    fn aggregates_as_redis() {
        let mut t = f64::INFINITY;
        aggregate(&mut t, f64::NEG_INFINITY, Aggregate::Sum);
        assert_eq!(t, 0.0);
        let mut t = 1.0;
        aggregate(&mut t, f64::NAN, Aggregate::Min);
        assert_eq!(t, 1.0);
        aggregate(&mut t, 0.5, Aggregate::Min);
        assert_eq!(t, 0.5);
        aggregate(&mut t, 7.0, Aggregate::Max);
        assert_eq!(t, 7.0);
    }
}
