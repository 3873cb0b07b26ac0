//! Strings (Redis's t_string.c): layout and commands.
//!
//! Layout: the record's payload is the string's bytes. Encoding `Auto` is a value set whole
//! (SET, INCR, ...): OBJECT ENCODING reports what Redis's `tryObjectEncoding` would pick for
//! it (`int`, `embstr` up to 44 bytes, `raw`); `Raw` is a value changed in place (APPEND to
//! an existing key, SETRANGE), which Redis reports `raw`; `Embstr` is a value Redis creates
//! without trying the integer encoding (INCRBYFLOAT's result: `embstr` up to 44 bytes, else
//! `raw`); `Int` is a copy of an integer (COPY: `int`, but not one of Redis's shared integers,
//! so OBJECT REFCOUNT 1). Invariant: none beyond the record's. Crash reasoning: every change writes a new
//! record in the command's transaction.

use super::{DataType, Type, Value};
use crate::commands::{parse_i64, upper, Ctx, E_FLOAT, E_INT, E_SYNTAX, MAX_STRING};
use crate::keyspace::{Enc, Header, SetOpts};
use crate::pubsub::{N_GENERIC, N_STRING};
use crate::{longdouble, resp, typed};
use daisy::Pool;

pub struct Strings;

impl DataType for Strings {
    fn owned(&self, _: &Pool, _: Enc, _: &[u8]) -> Result<Vec<u64>, String> {
        Ok(Vec::new())
    }
    fn check(&self, _: &Pool, _: Enc, _: &[u8]) -> Vec<String> {
        Vec::new()
    }
    fn dump(&self, _: &Pool, _: Enc, payload: &[u8]) -> Result<Value, String> {
        Ok(Value::String(payload.to_vec()))
    }
}

/// OBJECT ENCODING of a string value.
pub fn encoding_name(enc: Enc, value: &[u8]) -> &'static str {
    let int = || value.len() <= 20 && super::intset::as_int(value).is_some();
    match enc {
        Enc::Raw => "raw",
        Enc::Int => "int",
        Enc::Auto if int() => "int",
        _ if value.len() <= 44 => "embstr",
        _ => "raw",
    }
}

// ---- expiry options (SET, GETEX) -------------------------------------------------------

/// The expiry options of SET and GETEX (Redis's `parseExtendedStringArgumentsOrReply`).
#[derive(Default)]
struct Extended<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    /// EX, PX, EXAT or PXAT and its argument.
    expire: Option<(&'static str, &'a [u8])>,
}

/// Parse from `a[start..]`; `set` for SET's options, else GETEX's. Err: the reply was sent.
fn parse_extended<'a>(
    c: &mut Ctx,
    a: &[&'a [u8]],
    start: usize,
    set: bool,
) -> Result<Extended<'a>, ()> {
    let mut o = Extended::default();
    let mut j = start;
    while j < a.len() {
        let opt = upper(a[j]);
        let next = a.get(j + 1).copied();
        let timed = o.expire.map(|e| e.0);
        match &opt[..] {
            b"NX" if set && !o.xx => o.nx = true,
            b"XX" if set && !o.nx => o.xx = true,
            b"GET" if set => o.get = true,
            b"KEEPTTL" if set && !o.persist && timed.is_none() => o.keepttl = true,
            b"PERSIST" if !set && timed.is_none() && !o.keepttl => o.persist = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT"
                if !o.keepttl
                    && !o.persist
                    && next.is_some()
                    && timed.is_none_or(|t| t.as_bytes() == &opt[..]) =>
            {
                let name = match &opt[..] {
                    b"EX" => "EX",
                    b"PX" => "PX",
                    b"EXAT" => "EXAT",
                    _ => "PXAT",
                };
                o.expire = Some((name, next.expect("checked")));
                j += 1;
            }
            _ => {
                let _ = c.err(E_SYNTAX);
                return Err(());
            }
        }
        j += 1;
    }
    Ok(o)
}

/// The absolute expiry time of an EX/PX/EXAT/PXAT option (Redis's
/// `getExpireMillisecondsOrReply`). Err: the reply was sent.
fn expire_ms(c: &mut Ctx, unit: &str, arg: &[u8], cmd: &str) -> Result<i64, ()> {
    let Some(n) = parse_i64(arg) else {
        let _ = c.err(E_INT);
        return Err(());
    };
    let bad = |c: &mut Ctx| {
        let _ = c.err(&format!("ERR invalid expire time in '{cmd}' command"));
        Err(())
    };
    let seconds = unit == "EX" || unit == "EXAT";
    if n <= 0 || (seconds && n > i64::MAX / 1000) {
        return bad(c);
    }
    let mut ms = if seconds { n * 1000 } else { n };
    if unit == "EX" || unit == "PX" {
        match ms.checked_add(c.now_ms) {
            Some(t) => ms = t,
            None => return bad(c),
        }
    }
    if ms <= 0 {
        return bad(c);
    }
    Ok(ms)
}

// ---- commands ----------------------------------------------------------------------------

pub fn get(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match typed!(c, c.lookup_typed_read(a[1], Type::String)?) {
        Some(v) => c.bulk_val(&v),
        None => {
            c.nil();
            Ok(())
        }
    }
}

pub fn set(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Ok(o) = parse_extended(c, a, 3, true) else {
        return Ok(());
    };
    let expire = match o.expire {
        Some((unit, arg)) => match expire_ms(c, unit, arg, "set") {
            Ok(t) => Some(t),
            Err(()) => return Ok(()),
        },
        None => None,
    };
    let so = SetOpts {
        nx: o.nx,
        xx: o.xx,
        get: o.get,
        keepttl: o.keepttl,
        expire,
    };
    let db = c.db();
    let r = c.ks.set(c.tx, db, a[1], a[2], c.now_ms, &so)?;
    if r.wrong_type {
        return c.err(crate::commands::E_WRONGTYPE);
    }
    if r.written {
        c.notify(N_STRING, "set", a[1]);
        if expire.is_some() {
            c.notify(N_GENERIC, "expire", a[1]);
        }
    }
    if o.get {
        match r.old {
            Some(v) => resp::bulk(c.out, &v),
            None => c.nil(),
        }
    } else if r.written {
        resp::ok(c.out);
    } else {
        c.nil();
    }
    Ok(())
}

pub fn setnx(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let o = SetOpts {
        nx: true,
        ..SetOpts::default()
    };
    let db = c.db();
    let r = c.ks.set(c.tx, db, a[1], a[2], c.now_ms, &o)?;
    if r.written {
        c.notify(N_STRING, "set", a[1]);
    }
    resp::int(c.out, r.written as i64);
    Ok(())
}

fn setex_generic(c: &mut Ctx, a: &[&[u8]], unit: &str, name: &str) -> daisy::Result<()> {
    let Ok(t) = expire_ms(c, unit, a[2], name) else {
        return Ok(());
    };
    let o = SetOpts {
        expire: Some(t),
        ..SetOpts::default()
    };
    let db = c.db();
    c.ks.set(c.tx, db, a[1], a[3], c.now_ms, &o)?;
    c.notify(N_STRING, "set", a[1]);
    c.notify(N_GENERIC, "expire", a[1]);
    resp::ok(c.out);
    Ok(())
}

pub fn setex(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    setex_generic(c, a, "EX", "setex")
}

pub fn psetex(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    setex_generic(c, a, "PX", "psetex")
}

pub fn getset(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let o = SetOpts {
        get: true,
        ..SetOpts::default()
    };
    let db = c.db();
    let r = c.ks.set(c.tx, db, a[1], a[2], c.now_ms, &o)?;
    if r.wrong_type {
        return c.err(crate::commands::E_WRONGTYPE);
    }
    c.notify(N_STRING, "set", a[1]);
    match r.old {
        Some(p) => resp::bulk(c.out, &p),
        None => c.nil(),
    }
    Ok(())
}

pub fn getdel(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(v) = typed!(c, c.lookup_typed_read(a[1], Type::String)?) else {
        c.nil();
        return Ok(());
    };
    c.bulk_val(&v)?;
    let db = c.db();
    c.ks.delete(c.tx, db, a[1], &v)?;
    c.notify(N_GENERIC, "del", a[1]);
    Ok(())
}

pub fn getex(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Ok(o) = parse_extended(c, a, 2, false) else {
        return Ok(());
    };
    let Some(v) = typed!(c, c.lookup_typed_read(a[1], Type::String)?) else {
        c.nil();
        return Ok(());
    };
    let expire = match o.expire {
        Some((unit, arg)) => match expire_ms(c, unit, arg, "getex") {
            Ok(t) => Some((unit, t)),
            Err(()) => return Ok(()),
        },
        None => None,
    };
    c.bulk_val(&v)?;
    let db = c.db();
    match expire {
        // An absolute time already passed deletes the key.
        Some((unit, t)) if (unit == "EXAT" || unit == "PXAT") && t <= c.now_ms => {
            c.ks.delete(c.tx, db, a[1], &v)?;
            c.notify(N_GENERIC, "del", a[1]);
        }
        Some((_, t)) => {
            c.ks.set_expire(c.tx, db, a[1], &v, Some(t))?;
            c.touch(a[1]);
            c.notify(N_GENERIC, "expire", a[1]);
        }
        None if o.persist && v.expire_ms.is_some() => {
            c.ks.set_expire(c.tx, db, a[1], &v, None)?;
            c.touch(a[1]);
            c.notify(N_GENERIC, "persist", a[1]);
        }
        None => {}
    }
    Ok(())
}

pub fn mget(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    resp::array(c.out, a.len() - 1);
    for k in &a[1..] {
        match c.lookup_read(k)? {
            Some(v) if v.ty == Type::String => c.bulk_val(&v)?,
            _ => c.nil(),
        }
    }
    Ok(())
}

fn odd_pairs(c: &mut Ctx, a: &[&[u8]], name: &str) -> bool {
    if a.len().is_multiple_of(2) {
        let _ = c.err(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        return false;
    }
    true
}

pub fn mset(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if !odd_pairs(c, a, "mset") {
        return Ok(());
    }
    let db = c.db();
    for kv in a[1..].chunks(2) {
        c.ks.set(c.tx, db, kv[0], kv[1], c.now_ms, &SetOpts::default())?;
        c.notify(N_STRING, "set", kv[0]);
    }
    resp::ok(c.out);
    Ok(())
}

pub fn msetnx(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if !odd_pairs(c, a, "msetnx") {
        return Ok(());
    }
    for kv in a[1..].chunks(2) {
        if c.lookup(kv[0])?.is_some() {
            resp::int(c.out, 0);
            return Ok(());
        }
    }
    let db = c.db();
    for kv in a[1..].chunks(2) {
        // A key given twice: the later value wins, as in Redis.
        c.ks.set(c.tx, db, kv[0], kv[1], c.now_ms, &SetOpts::default())?;
        c.notify(N_STRING, "set", kv[0]);
    }
    resp::int(c.out, 1);
    Ok(())
}

fn too_big(c: &mut Ctx) -> daisy::Result<()> {
    c.err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
}

/// Store a string changed in place (APPEND, SETRANGE: encoding `raw`), keeping its expiry.
fn put_raw(
    c: &mut Ctx,
    key: &[u8],
    val: &[u8],
    old: Option<&crate::keyspace::Val>,
) -> daisy::Result<()> {
    let hdr = Header::new(Type::String, Enc::Raw).with_expire(old.and_then(|v| v.expire_ms));
    let db = c.db();
    c.ks.put(c.tx, db, key, hdr, &[val], old, false)?;
    c.touch(key);
    Ok(())
}

pub fn append(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let old = typed!(c, c.lookup_typed(a[1], Type::String)?);
    let Some(old) = old else {
        // A new key holds the argument as SET would store it (Redis: `tryObjectEncoding`).
        let db = c.db();
        c.ks.put(
            c.tx,
            db,
            a[1],
            Header::new(Type::String, Enc::Auto),
            &[a[2]],
            None,
            false,
        )?;
        c.touch(a[1]);
        c.notify(N_STRING, "append", a[1]);
        resp::int(c.out, a[2].len() as i64);
        return Ok(());
    };
    let mut val = c.payload(&old)?;
    if val.len() + a[2].len() > MAX_STRING {
        return too_big(c);
    }
    val.extend_from_slice(a[2]);
    put_raw(c, a[1], &val, Some(&old))?;
    c.notify(N_STRING, "append", a[1]);
    resp::int(c.out, val.len() as i64);
    Ok(())
}

pub fn strlen(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let n = typed!(c, c.lookup_typed_read(a[1], Type::String)?).map_or(0, |v| v.len);
    resp::int(c.out, n as i64);
    Ok(())
}

pub fn getrange(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let (Some(mut s), Some(mut e)) = (parse_i64(a[2]), parse_i64(a[3])) else {
        return c.err(E_INT);
    };
    let Some(v) = typed!(c, c.lookup_typed_read(a[1], Type::String)?) else {
        resp::bulk(c.out, b"");
        return Ok(());
    };
    let len = v.len as i64;
    if s < 0 && e < 0 && s > e {
        resp::bulk(c.out, b"");
        return Ok(());
    }
    if s < 0 {
        s += len;
    }
    if e < 0 {
        e += len;
    }
    s = s.max(0);
    e = e.max(0);
    if e >= len {
        e = len - 1;
    }
    if len == 0 || s > e {
        resp::bulk(c.out, b"");
        return Ok(());
    }
    let n = (e - s + 1) as usize;
    resp::bulk_header(c.out, n);
    c.ks.read_into(c.tx, &v, s as usize, n, c.out)?;
    resp::crlf(c.out);
    Ok(())
}

pub fn setrange(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(off) = parse_i64(a[2]) else {
        return c.err(E_INT);
    };
    if off < 0 {
        return c.err("ERR offset is out of range");
    }
    let old = typed!(c, c.lookup_typed(a[1], Type::String)?);
    let value = a[3];
    if value.is_empty() {
        // Nothing to write: no key is created, the length is reported.
        resp::int(c.out, old.map_or(0, |v| v.len) as i64);
        return Ok(());
    }
    let off = off as usize;
    if off.saturating_add(value.len()) > MAX_STRING {
        return too_big(c);
    }
    let mut val = match &old {
        Some(v) => c.payload(v)?,
        None => Vec::new(),
    };
    if val.len() < off + value.len() {
        val.resize(off + value.len(), 0);
    }
    val[off..off + value.len()].copy_from_slice(value);
    put_raw(c, a[1], &val, old.as_ref())?;
    c.notify(N_STRING, "setrange", a[1]);
    resp::int(c.out, val.len() as i64);
    Ok(())
}

fn incr_by(c: &mut Ctx, key: &[u8], by: i64) -> daisy::Result<()> {
    // One probe: the old value is read, parsed and replaced where it lies.
    let db = c.db();
    let r = c.ks.rewrite_string(c.tx, db, key, c.now_ms, |old| {
        let cur = match old {
            Some(v) if v.len() > 20 => return Err(E_INT.to_string()),
            Some(v) => parse_i64(v).ok_or_else(|| E_INT.to_string())?,
            None => 0,
        };
        let n = cur
            .checked_add(by)
            .ok_or_else(|| "ERR increment or decrement would overflow".to_string())?;
        Ok(n.to_string().into_bytes())
    })?;
    match r {
        Ok(v) => {
            c.notify(N_STRING, "incrby", key);
            resp::int(c.out, parse_i64(&v).expect("just formatted"))
        }
        Err(e) => return c.err(&e),
    }
    Ok(())
}

pub fn incr(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    incr_by(c, a[1], 1)
}

pub fn decr(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    incr_by(c, a[1], -1)
}

pub fn incrby(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match parse_i64(a[2]) {
        Some(n) => incr_by(c, a[1], n),
        None => c.err(E_INT),
    }
}

pub fn decrby(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match parse_i64(a[2]).map(|n| n.checked_neg()) {
        Some(Some(n)) => incr_by(c, a[1], n),
        // Redis 7.0's text for the one decrement that cannot be negated.
        Some(None) => c.err("ERR decrement would overflow"),
        None => c.err(E_INT),
    }
}

/// In x87 long double, as Redis computes it (see [`crate::longdouble`]).
pub fn incrbyfloat(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let old = typed!(c, c.lookup_typed(a[1], Type::String)?);
    let (cur, exp) = match &old {
        Some(v) => match longdouble::parse(&c.payload(v)?) {
            Some(n) => (n, v.expire_ms),
            None => return c.err(E_FLOAT),
        },
        None => (longdouble::parse(b"0").expect("zero"), None),
    };
    let Some(by) = longdouble::parse(a[2]) else {
        return c.err(E_FLOAT);
    };
    let Some(n) = longdouble::add(cur, by) else {
        return c.err("ERR increment would produce NaN or Infinity");
    };
    let s = longdouble::format(n);
    let db = c.db();
    let hdr = Header::new(Type::String, Enc::Embstr).with_expire(exp);
    c.ks.put(c.tx, db, a[1], hdr, &[s.as_bytes()], old.as_ref(), false)?;
    c.touch(a[1]);
    c.notify(N_STRING, "incrbyfloat", a[1]);
    resp::bulk(c.out, s.as_bytes());
    Ok(())
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN] (Redis 7.0's lcsCommand: the
/// dynamic-programming table, then a walk back that emits the matching ranges).
pub fn lcs(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let va = c.lookup_read(a[1])?;
    let vb = c.lookup_read(a[2])?;
    if va.is_some_and(|v| v.ty != Type::String) || vb.is_some_and(|v| v.ty != Type::String) {
        return c.err("ERR The specified keys must contain string values");
    }
    let (mut getlen, mut getidx, mut withmatchlen, mut minmatchlen) = (false, false, false, 0i64);
    let mut j = 3;
    while j < a.len() {
        let more = a.len() - 1 - j;
        match &upper(a[j])[..] {
            b"IDX" => getidx = true,
            b"LEN" => getlen = true,
            b"WITHMATCHLEN" => withmatchlen = true,
            b"MINMATCHLEN" if more > 0 => {
                let Some(n) = parse_i64(a[j + 1]) else {
                    return c.err(E_INT);
                };
                minmatchlen = n.max(0);
                j += 1;
            }
            _ => return c.err(E_SYNTAX),
        }
        j += 1;
    }
    if getlen && getidx {
        return c.err("ERR If you want both the length and indexes, please just use IDX.");
    }
    let sa = match &va {
        Some(v) => c.payload(v)?,
        None => Vec::new(),
    };
    let sb = match &vb {
        Some(v) => c.payload(v)?,
        None => Vec::new(),
    };
    let (alen, blen) = (sa.len(), sb.len());
    let cells = (alen as u128 + 1) * (blen as u128 + 1);
    if cells * 4 > MAX_STRING as u128 {
        return c
            .err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let w = blen + 1;
    let mut t = vec![0u32; cells as usize];
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if sa[i - 1] == sb[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let total = t[alen * w + blen] as usize;
    let mut result = vec![0u8; total];
    let mut idx = total;
    let mut ranges: Vec<(usize, usize, usize, usize)> = Vec::new();
    let computelcs = getidx || !getlen;
    let (mut i, mut j) = (alen, blen);
    // arange_start == alen: no range in progress.
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0usize, 0usize, 0usize);
    while computelcs && i > 0 && j > 0 {
        let mut emit = false;
        if sa[i - 1] == sb[j - 1] {
            result[idx - 1] = sa[i - 1];
            if a_start == alen {
                (a_start, a_end, b_start, b_end) = (i - 1, i - 1, j - 1, j - 1);
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        let match_len = a_end.wrapping_sub(a_start).wrapping_add(1);
        if emit {
            if minmatchlen == 0 || match_len as i64 >= minmatchlen {
                ranges.push((a_start, a_end, b_start, b_end));
            }
            a_start = alen;
        }
    }
    if getidx {
        c.map(2);
        resp::bulk(c.out, b"matches");
        resp::array(c.out, ranges.len());
        for (as_, ae, bs, be) in ranges {
            resp::array(c.out, 2 + withmatchlen as usize);
            resp::array(c.out, 2);
            resp::int(c.out, as_ as i64);
            resp::int(c.out, ae as i64);
            resp::array(c.out, 2);
            resp::int(c.out, bs as i64);
            resp::int(c.out, be as i64);
            if withmatchlen {
                resp::int(c.out, (ae - as_ + 1) as i64);
            }
        }
        resp::bulk(c.out, b"len");
        resp::int(c.out, total as i64);
    } else if getlen {
        resp::int(c.out, total as i64);
    } else {
        resp::bulk(c.out, &result);
    }
    Ok(())
}
