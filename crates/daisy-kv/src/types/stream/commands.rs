//! The stream commands (t_stream.c's), with Redis 7.0's arguments, replies and error texts:
//! XADD, XLEN, XRANGE, XREVRANGE, XREAD, XDEL, XTRIM, XSETID, XINFO, and the consumer group
//! commands XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM.
//!
//! XREAD and XREADGROUP with BLOCK wait as the list pops do (`Ctx::block`, server.rs "Blocked
//! clients"): the blocked command is kept with `$` replaced by the ID it stood for, and when
//! one of its keys is signalled the event loop runs it again in serving mode
//! (`Client::serving`), where it follows Redis's `serveClientsBlockedOnStreamKey`: it answers
//! when the stream's last ID passed the one it waits after, an XREADGROUP answers an error
//! when its key is no longer a stream or its group is gone, and otherwise it stays blocked.

use super::group::{Consumer, Group, Nack, INVALID_ENTRIES_READ};
use super::id::{self, IdRules, StreamId, E_INVALID_ID};
use super::node::{self, EntryAt};
use super::{damaged, NodeRef, Stream, Trim, TrimTo};
use crate::commands::{parse_i64, Ctx, E_INT, E_SYNTAX, E_WRONGTYPE};
use crate::keyspace::{Enc, Header, Val};
use crate::listpack::Elem;
use crate::pubsub::N_STREAM;
use crate::resp;
use crate::types::Type;
use std::collections::HashMap;

macro_rules! or_return {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return Ok(()),
        }
    };
}

macro_rules! or_return_none {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return Ok(None),
        }
    };
}
/// A long long argument (getLongLongFromObjectOrReply): None after the error reply (`msg`
/// when given, else Redis's default text).
fn ll_arg(c: &mut Ctx, a: &[u8], msg: Option<&str>) -> daisy::Result<Option<i64>> {
    match parse_i64(a) {
        Some(n) => Ok(Some(n)),
        None => {
            match msg {
                Some(m) => c.err(&format!("ERR {m}"))?,
                None => c.err(E_INT)?,
            }
            Ok(None)
        }
    }
}

/// The stream at `key` for a command that may write it; Err(()) after a WRONGTYPE reply.
fn lookup_write(c: &mut Ctx, key: &[u8]) -> daisy::Result<Result<Option<Val>, ()>> {
    match c.lookup_typed(key, Type::Stream)? {
        Err(_) => {
            c.err(E_WRONGTYPE)?;
            Ok(Err(()))
        }
        Ok(v) => Ok(Ok(v)),
    }
}

/// The stream at `key` for a reading command (counts a hit or miss); Err(()) after a
/// WRONGTYPE reply.
fn lookup_read(c: &mut Ctx, key: &[u8]) -> daisy::Result<Result<Option<Val>, ()>> {
    match c.lookup_typed_read(key, Type::Stream)? {
        Err(_) => {
            c.err(E_WRONGTYPE)?;
            Ok(Err(()))
        }
        Ok(v) => Ok(Ok(v)),
    }
}

macro_rules! typed_or_return {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(()) => return Ok(()),
        }
    };
}

/// A new empty stream stored under `key` (Redis's createStreamObject + dbAdd).
fn create_stream(c: &mut Ctx, key: &[u8]) -> daisy::Result<(Val, Stream)> {
    let s = Stream::create(c)?;
    let db = c.db();
    let hdr = Header::new(Type::Stream, Enc::Stream);
    c.ks.put(c.tx, db, key, hdr, &[&s.payload()], None, false)?;
    let v =
        c.ks.peek(c.tx, db, key)?
            .ok_or_else(|| damaged("a stream just stored is missing"))?;
    Ok((v, s))
}

/// An argument as Redis's `%s` prints it into an error: up to its first NUL byte.
fn cstr(a: &[u8]) -> std::borrow::Cow<'_, str> {
    let n = a.iter().position(|&b| b == 0).unwrap_or(a.len());
    String::from_utf8_lossy(&a[..n])
}

/// Whether the command runs inside a script (Redis's CLIENT_SCRIPT).
fn in_script(c: &Ctx) -> bool {
    c.cl.id == u64::MAX
}

// ---- replies --------------------------------------------------------------------------------

fn bulk_elem(out: &mut Vec<u8>, e: Elem) {
    resp::bulk_header(out, e.str_len());
    e.write_to(out);
    resp::crlf(out);
}

fn bulk_id(out: &mut Vec<u8>, id: StreamId) {
    let mut b = [0u8; 41];
    resp::bulk(out, id.text(&mut b));
}

/// An entry: `[id, [field, value, ...]]`.
fn emit_entry(out: &mut Vec<u8>, n: &NodeRef, e: &EntryAt) -> daisy::Result<()> {
    resp::array(out, 2);
    bulk_id(out, e.id);
    resp::array(out, 2 * e.nfields);
    node::each_field(n.lp, n.master, e, |f, v| {
        bulk_elem(out, f);
        bulk_elem(out, v);
    })
    .map_err(damaged)
}

/// Emit the live entries of `start..=end` (at most `count`, 0: all), in order or reversed,
/// into `out` without an array header; how many.
fn emit_range(
    tx: &daisy::Tx,
    s: &Stream,
    start: StreamId,
    end: StreamId,
    count: u64,
    rev: bool,
    out: &mut Vec<u8>,
) -> daisy::Result<u64> {
    let mut n = 0u64;
    s.walk(tx, start, end, rev, |nr, e| {
        emit_entry(out, nr, e)?;
        n += 1;
        Ok(count == 0 || n < count)
    })?;
    Ok(n)
}

/// An array of the entries of `start..=end` (streamReplyWithRange without a group).
fn reply_range(
    c: &mut Ctx,
    s: &Stream,
    start: StreamId,
    end: StreamId,
    count: u64,
    rev: bool,
) -> daisy::Result<()> {
    let mut body = Vec::new();
    let n = emit_range(c.tx, s, start, end, count, rev, &mut body)?;
    resp::array(c.out, n as usize);
    c.out.extend_from_slice(&body);
    Ok(())
}

/// One entry by ID as a raw reply (streamReplyWithRange(id, id, 1, RAWENTRIES)); whether it
/// was there.
fn emit_one(c: &mut Ctx, s: &Stream, id: StreamId, out: &mut Vec<u8>) -> daisy::Result<bool> {
    Ok(emit_range(c.tx, s, id, id, 1, false, out)? == 1)
}

// ---- XADD and XTRIM ---------------------------------------------------------------------

/// XADD's and XTRIM's parsed options (streamAddTrimArgs).
struct AddTrimArgs {
    id: Option<(StreamId, bool)>,
    no_mkstream: bool,
    trim: Option<Trim>,
}

/// Parse XADD's (`xadd`) or XTRIM's options (streamParseAddOrTrimArgsOrReply): the position
/// of XADD's ID and the options, or None after the error reply.
fn parse_add_trim(
    c: &mut Ctx,
    a: &[&[u8]],
    xadd: bool,
) -> daisy::Result<Option<(usize, AddTrimArgs)>> {
    let mut args = AddTrimArgs {
        id: None,
        no_mkstream: false,
        trim: None,
    };
    let (mut to, mut approx, mut limit, mut limit_given) = (None::<TrimTo>, false, 0i64, false);
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = a[i];
        if xadd && opt == b"*" {
            break;
        } else if opt.eq_ignore_ascii_case(b"maxlen") && more > 0 {
            if to.is_some() {
                c.err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible")?;
                return Ok(None);
            }
            approx = false;
            let next = a[i + 1];
            if more >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let n = or_return_none!(ll_arg(c, a[i + 1], None)?);
            if n < 0 {
                c.err("ERR The MAXLEN argument must be >= 0.")?;
                return Ok(None);
            }
            i += 1;
            to = Some(TrimTo::MaxLen(n as u64));
        } else if opt.eq_ignore_ascii_case(b"minid") && more > 0 {
            if to.is_some() {
                c.err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible")?;
                return Ok(None);
            }
            approx = false;
            let next = a[i + 1];
            if more >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let id = or_return_none!(id::parse_or_reply(c, a[i + 1], 0, true)?);
            i += 1;
            to = Some(TrimTo::MinId(id));
        } else if opt.eq_ignore_ascii_case(b"limit") && more > 0 {
            let n = or_return_none!(ll_arg(c, a[i + 1], None)?);
            if n < 0 {
                c.err("ERR The LIMIT argument must be >= 0.")?;
                return Ok(None);
            }
            limit = n;
            limit_given = true;
            i += 1;
        } else if xadd && opt.eq_ignore_ascii_case(b"nomkstream") {
            args.no_mkstream = true;
        } else if xadd {
            let rules = IdRules {
                missing_seq: 0,
                strict: true,
                seq_star: true,
            };
            match id::parse(opt, rules) {
                Some(x) => args.id = Some(x),
                None => {
                    c.err(E_INVALID_ID)?;
                    return Ok(None);
                }
            }
            break;
        } else {
            c.err(E_SYNTAX)?;
            return Ok(None);
        }
        i += 1;
    }
    if limit != 0 && to.is_none() {
        c.err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy")?;
        return Ok(None);
    }
    if !xadd && to.is_none() {
        c.err("ERR syntax error, XTRIM must be called with a trimming strategy")?;
        return Ok(None);
    }
    if limit_given {
        if !approx {
            c.err("ERR syntax error, LIMIT cannot be used without the special ~ option")?;
            return Ok(None);
        }
    } else if approx {
        let per = c.sv.config.stream_node_max_entries as i64;
        limit = per.saturating_mul(100);
        if limit <= 0 {
            limit = 10_000;
        }
        if limit > 1_000_000 {
            limit = 1_000_000;
        }
    } else {
        limit = 0;
    }
    args.trim = to.map(|to| Trim { to, approx, limit });
    Ok(Some((i, args)))
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value ...
pub fn xadd(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let (idpos, args) = or_return!(parse_add_trim(c, a, true)?);
    let field_pos = idpos + 1;
    let nf = a.len().saturating_sub(field_pos);
    if a.len() < field_pos + 2 || nf % 2 == 1 {
        return c.err("ERR wrong number of arguments for 'xadd' command");
    }
    if let Some((id, true)) = args.id {
        if id.is_zero() {
            return c.err("ERR The ID specified in XADD must be greater than 0-0");
        }
    }
    let key = a[1];
    let v = typed_or_return!(lookup_write(c, key)?);
    let mut s = match &v {
        Some(v) => Stream::open(c, v)?,
        None if args.no_mkstream => {
            c.nil();
            return Ok(());
        }
        None => create_stream(c, key)?.1,
    };
    let last = s.m.last_id();
    if last == StreamId::MAX {
        s.flush(c.tx)?;
        return c
            .err("ERR The stream has exhausted the last possible ID, unable to add more items");
    }
    // streamAppendItem's ID.
    let id = match args.id {
        Some((id, true)) => Some(id),
        Some((id, false)) if last.ms == id.ms => {
            if last.seq == u64::MAX {
                None
            } else {
                Some(StreamId::new(last.ms, last.seq + 1))
            }
        }
        Some((id, false)) => Some(id),
        None => last.next_at(c.now_ms),
    };
    let fields = &a[field_pos..];
    let id = match id {
        Some(id) if id > last => id,
        Some(_) => {
            s.flush(c.tx)?;
            return c.err(
                "ERR The ID specified in XADD is equal or smaller than the target stream top item",
            );
        }
        // An auto sequence past the largest: Redis fails without errno = EDOM.
        None => {
            s.flush(c.tx)?;
            return c.err("ERR Elements are too large to be stored");
        }
    };
    if fields.iter().map(|f| f.len()).sum::<usize>() > super::NODE_MAX_SIZE {
        s.flush(c.tx)?;
        return c.err("ERR Elements are too large to be stored");
    }
    let (max_bytes, max_entries) = (
        c.sv.config.stream_node_max_bytes,
        c.sv.config.stream_node_max_entries,
    );
    s.append(c.tx, id, fields, max_bytes, max_entries)?;
    bulk_id(c.out, id);
    c.touch(key);
    c.notify(N_STREAM, "xadd", key);
    if let Some(t) = &args.trim {
        if s.trim(c.tx, t)? > 0 {
            c.notify(N_STREAM, "xtrim", key);
        }
    }
    s.flush(c.tx)?;
    let db = c.db();
    c.ks.signal_ready(db, key);
    Ok(())
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
pub fn xtrim(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let (_, args) = or_return!(parse_add_trim(c, a, false)?);
    let Some(v) = typed_or_return!(lookup_write(c, a[1])?) else {
        resp::int(c.out, 0);
        return Ok(());
    };
    let mut s = Stream::open(c, &v)?;
    let t = args.trim.expect("XTRIM has a strategy");
    let deleted = s.trim(c.tx, &t)?;
    s.flush(c.tx)?;
    if deleted > 0 {
        c.notify(N_STREAM, "xtrim", a[1]);
        c.touch(a[1]);
    }
    resp::int(c.out, deleted as i64);
    Ok(())
}

// ---- reading ----------------------------------------------------------------------------------

/// XLEN key
pub fn xlen(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let n = match typed_or_return!(lookup_read(c, a[1])?) {
        Some(v) => Stream::open(c, &v)?.m.length,
        None => 0,
    };
    resp::int(c.out, n as i64);
    Ok(())
}

fn range_generic(c: &mut Ctx, a: &[&[u8]], rev: bool) -> daisy::Result<()> {
    let (sarg, earg) = if rev { (a[3], a[2]) } else { (a[2], a[3]) };
    let start = or_return!(id::parse_bound(c, sarg, 0, true)?);
    let end = or_return!(id::parse_bound(c, earg, u64::MAX, false)?);
    let mut count: i64 = -1;
    let mut j = 4;
    while j < a.len() {
        let additional = a.len() - j - 1;
        if a[j].eq_ignore_ascii_case(b"count") && additional >= 1 {
            count = or_return!(ll_arg(c, a[j + 1], None)?).max(0);
            j += 1;
        } else {
            return c.err(E_SYNTAX);
        }
        j += 1;
    }
    let Some(v) = typed_or_return!(lookup_read(c, a[1])?) else {
        resp::array(c.out, 0);
        return Ok(());
    };
    let s = Stream::open(c, &v)?;
    if count == 0 {
        c.null_array();
        return Ok(());
    }
    reply_range(c, &s, start, end, count.max(0) as u64, rev)
}

/// XRANGE key start end [COUNT count]
pub fn xrange(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    range_generic(c, a, false)
}

/// XREVRANGE key end start [COUNT count]
pub fn xrevrange(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    range_generic(c, a, true)
}

// ---- XREAD and XREADGROUP ---------------------------------------------------------------------

/// XREAD's and XREADGROUP's default COUNT once blocked (XREAD_BLOCKED_DEFAULT_COUNT).
const BLOCKED_DEFAULT_COUNT: u64 = 1000;

struct ReadArgs<'a> {
    /// BLOCK's timeout: the deadline (0: none), or None without BLOCK.
    block: Option<i64>,
    count: u64,
    streams_at: usize,
    nstreams: usize,
    group: Option<(&'a [u8], &'a [u8])>,
    noack: bool,
}

fn parse_read<'a>(
    c: &mut Ctx,
    a: &[&'a [u8]],
    xreadgroup: bool,
) -> daisy::Result<Option<ReadArgs<'a>>> {
    let mut r = ReadArgs {
        block: None,
        count: 0,
        streams_at: 0,
        nstreams: 0,
        group: None,
        noack: false,
    };
    let mut i = 1;
    while i < a.len() {
        let more = a.len() - i - 1;
        let o = a[i];
        if o.eq_ignore_ascii_case(b"block") && more > 0 {
            if in_script(c) {
                c.err(&format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    cstr(a[0])
                ))?;
                return Ok(None);
            }
            i += 1;
            let Some(ms) = parse_i64(a[i]) else {
                c.err("ERR timeout is not an integer or out of range")?;
                return Ok(None);
            };
            if ms < 0 {
                c.err("ERR timeout is negative")?;
                return Ok(None);
            }
            r.block = Some(if ms > 0 {
                c.now_ms.saturating_add(ms)
            } else {
                0
            });
        } else if o.eq_ignore_ascii_case(b"count") && more > 0 {
            i += 1;
            r.count = or_return_none!(ll_arg(c, a[i], None)?).max(0) as u64;
        } else if o.eq_ignore_ascii_case(b"streams") && more > 0 {
            r.streams_at = i + 1;
            let n = a.len() - r.streams_at;
            if !n.is_multiple_of(2) {
                c.err("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.")?;
                return Ok(None);
            }
            r.nstreams = n / 2;
            break;
        } else if o.eq_ignore_ascii_case(b"group") && more >= 2 {
            if !xreadgroup {
                c.err("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.")?;
                return Ok(None);
            }
            r.group = Some((a[i + 1], a[i + 2]));
            i += 2;
        } else if o.eq_ignore_ascii_case(b"noack") {
            if !xreadgroup {
                c.err("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.")?;
                return Ok(None);
            }
            r.noack = true;
        } else {
            c.err(E_SYNTAX)?;
            return Ok(None);
        }
        i += 1;
    }
    if r.streams_at == 0 {
        c.err(E_SYNTAX)?;
        return Ok(None);
    }
    if xreadgroup && r.group.is_none() {
        c.err("ERR Missing GROUP option for XREADGROUP")?;
        return Ok(None);
    }
    Ok(Some(r))
}

/// What a read resolves for one stream before serving.
struct ReadTarget<'a> {
    key: &'a [u8],
    /// The ID the read is after (">" is `StreamId::MAX` for XREADGROUP).
    gt: StreamId,
}

pub fn xread(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    read_generic(c, a, false)
}

pub fn xreadgroup(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    read_generic(c, a, true)
}

fn nogroup_read(c: &mut Ctx, key: &[u8], group: &[u8]) -> daisy::Result<()> {
    c.err(&format!(
        "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
        cstr(key),
        cstr(group)
    ))
}

fn read_generic(c: &mut Ctx, a: &[&[u8]], xreadgroup: bool) -> daisy::Result<()> {
    let r = or_return!(parse_read(c, a, xreadgroup)?);
    if c.cl.serving.is_some() {
        return serve_blocked_read(c, a, &r);
    }
    let keys = &a[r.streams_at..r.streams_at + r.nstreams];
    let ids = &a[r.streams_at + r.nstreams..];
    let mut targets = Vec::with_capacity(r.nstreams);
    for (i, &key) in keys.iter().enumerate() {
        let v = typed_or_return!(lookup_read(c, key)?);
        let mut s = match &v {
            Some(v) => Some(Stream::open(c, v)?),
            None => None,
        };
        if let Some((group, _)) = r.group {
            let has = match s.as_mut() {
                Some(s) => s.group(c, group)?.is_some(),
                None => false,
            };
            if !has {
                return nogroup_read(c, key, group);
            }
        }
        let gt = if ids[i] == b"$" {
            if xreadgroup {
                return c.err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.");
            }
            s.as_ref().map_or(StreamId::MIN, |s| s.m.last_id())
        } else if ids[i] == b">" {
            if !xreadgroup {
                return c.err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
            }
            StreamId::MAX
        } else {
            or_return!(id::parse_or_reply(c, ids[i], 0, true)?)
        };
        targets.push(ReadTarget { key, gt });
    }
    // Serve what can be served now.
    let mut body = Vec::new();
    let mut served = 0usize;
    for t in &targets {
        let Some(v) = typed_or_return!(lookup_read(c, t.key)?) else {
            continue;
        };
        let mut s = Stream::open(c, &v)?;
        let mut gt = t.gt;
        let mut group = match r.group {
            Some((g, _)) => Some(s.group(c, g)?.ok_or_else(|| damaged("a group vanished"))?),
            None => None,
        };
        let history = group.is_some() && gt != StreamId::MAX;
        if let Some(g) = &group {
            if !history {
                gt = g.g.last_id();
            }
        }
        // Redis serves a stream at once when a live entry follows the ID (its last valid ID
        // is after it), a consumer's history always: the entries are read first, and an
        // empty read means the stream is not served.
        let start = gt.incr().unwrap_or(StreamId::MIN);
        let read = if !history && s.m.length > 0 && s.m.last_id() > gt {
            collect(c, &s, start, r.count)?
        } else {
            Collected::default()
        };
        if !history && read.ids.is_empty() {
            continue;
        }
        served += 1;
        if !c.cl.resp3 {
            resp::array(&mut body, 2);
        }
        resp::bulk(&mut body, t.key);
        match (&mut group, r.group) {
            (Some(g), Some((_, cname))) => {
                let mut cons = consumer_for(c, g, cname, t.key)?;
                if history {
                    reply_history(c, &s, g, &mut cons, start, r.count, &mut body)?;
                } else {
                    deliver(c, &s, g, &cons, &read, r.noack)?;
                    read.reply(&mut body);
                }
                g.flush(c.tx)?;
            }
            _ => read.reply(&mut body),
        }
        if let Some(g) = group {
            g.release(c);
        }
        s.flush(c.tx)?;
    }
    if served > 0 {
        if c.cl.resp3 {
            c.map(served);
        } else {
            resp::array(c.out, served);
        }
        c.out.extend_from_slice(&body);
        return Ok(());
    }
    if let Some(deadline) = r.block {
        if c.cl.deny_blocking {
            c.null_array();
            return Ok(());
        }
        // Kept for serving: `$` replaced by the ID it stood for.
        let mut args: Vec<Vec<u8>> = a.iter().map(|x| x.to_vec()).collect();
        for (i, t) in targets.iter().enumerate() {
            if ids[i] == b"$" {
                args[r.streams_at + r.nstreams + i] = t.gt.to_bytes();
            }
        }
        let argv: Vec<&[u8]> = args.iter().map(|x| &x[..]).collect();
        c.block(Type::Stream, keys, deadline, false, &argv);
        return Ok(());
    }
    c.null_array();
    Ok(())
}

/// The consumer `name` of group `g`, its seen time refreshed, created when missing (with its
/// notification).
fn consumer_for(c: &mut Ctx, g: &mut Group, name: &[u8], key: &[u8]) -> daisy::Result<Consumer> {
    match g.consumer(c.tx, name)? {
        Some(mut cons) => {
            let now = c.now_ms;
            g.touch(c.tx, &mut cons, now)?;
            Ok(cons)
        }
        None => {
            let cons = g
                .create_consumer(c.tx, name, c.now_ms)?
                .expect("the consumer was missing");
            c.notify(N_STREAM, "xgroup-createconsumer", key);
            Ok(cons)
        }
    }
}

/// New entries for a group (streamReplyWithRange with a group): the array of entries after
/// `start`, the group's last ID and read counter moved, each entry pending for `cons` unless
/// `noack`.
#[allow(clippy::too_many_arguments)]
fn reply_group(
    c: &mut Ctx,
    s: &Stream,
    g: &mut Group,
    cons: &Consumer,
    start: StreamId,
    count: u64,
    noack: bool,
    out: &mut Vec<u8>,
) -> daisy::Result<()> {
    let read = collect(c, s, start, count)?;
    deliver(c, s, g, cons, &read, noack)?;
    read.reply(out);
    Ok(())
}

/// Entries read for a reply: their IDs, and their replies (without the array's header).
#[derive(Default)]
struct Collected {
    ids: Vec<StreamId>,
    body: Vec<u8>,
}

impl Collected {
    /// The array of the entries.
    fn reply(&self, out: &mut Vec<u8>) {
        resp::array(out, self.ids.len());
        out.extend_from_slice(&self.body);
    }
}

/// The live entries from `start` on, at most `count` (0: all).
fn collect(c: &mut Ctx, s: &Stream, start: StreamId, count: u64) -> daisy::Result<Collected> {
    let mut read = Collected::default();
    s.walk_seek(c.tx, &mut c.ks.stream_seek, start, |nr, e| {
        emit_entry(&mut read.body, nr, e)?;
        read.ids.push(e.id);
        Ok(count == 0 || (read.ids.len() as u64) < count)
    })?;
    Ok(read)
}

/// What delivering `read` to consumer `cons` does to group `g`: its last ID and read counter
/// move, and each entry becomes pending for `cons` unless `noack`.
fn deliver(
    c: &mut Ctx,
    s: &Stream,
    g: &mut Group,
    cons: &Consumer,
    read: &Collected,
    noack: bool,
) -> daisy::Result<()> {
    for &id in &read.ids {
        if id > g.g.last_id() {
            if g.g.entries_read != INVALID_ENTRIES_READ && !s.range_has_tombstones(id, None) {
                g.g.entries_read += 1;
            } else if s.m.entries_added != 0 {
                g.g.entries_read = s
                    .estimate_distance(id)
                    .map_or(INVALID_ENTRIES_READ, |d| d as i64);
            }
            g.g.set_last_id(id);
        }
        if !noack {
            // An ID above every pending one cannot be pending already.
            let old = if id > g.g.pel_top() {
                None
            } else {
                g.nack(c.tx, id)?
            };
            let n = Nack {
                time: c.now_ms,
                count: 1,
                consumer: cons.off,
            };
            g.put_nack(c.tx, id, &n, old.map(|o| o.consumer))?;
        }
    }
    Ok(())
}

/// A consumer's own history (streamReplyWithRangeFromConsumerPEL): its pending entries from
/// `start`, each delivered again (its time and count updated); one no longer in the stream
/// shows as `[id, nil]`.
fn reply_history(
    c: &mut Ctx,
    s: &Stream,
    g: &mut Group,
    cons: &mut Consumer,
    start: StreamId,
    count: u64,
    out: &mut Vec<u8>,
) -> daisy::Result<()> {
    let ids = g.pending_ids(c.tx, cons.off, start, StreamId::MAX, count)?;
    resp::array(out, ids.len());
    for id in ids {
        if emit_one(c, s, id, out)? {
            if let Some(mut n) = g.nack(c.tx, id)? {
                n.time = c.now_ms;
                n.count += 1;
                g.put_nack(c.tx, id, &n, Some(n.consumer))?;
            }
        } else {
            resp::array(out, 2);
            bulk_id(out, id);
            resp::null_array(out, c.cl.resp3);
        }
    }
    Ok(())
}

/// A blocked XREAD/XREADGROUP run again because its key `serving` was signalled (Redis's
/// serveClientsBlockedOnStreamKey and unblockDeletedStreamReadgroupClients): answer, answer
/// an error, or stay blocked (answer nothing).
fn serve_blocked_read(c: &mut Ctx, a: &[&[u8]], r: &ReadArgs) -> daisy::Result<()> {
    let key = c.cl.serving.clone().expect("serving");
    let keys = &a[r.streams_at..r.streams_at + r.nstreams];
    let ids = &a[r.streams_at + r.nstreams..];
    let Some(i) = keys.iter().position(|k| *k == key) else {
        return Ok(());
    };
    let v = match c.lookup(&key)? {
        Some(v) if v.ty == Type::Stream => Some(v),
        _ => None,
    };
    let Some(v) = v else {
        if r.group.is_some() {
            c.err("UNBLOCKED the stream key no longer exists")?;
        }
        return Ok(());
    };
    let mut s = Stream::open(c, &v)?;
    let mut gt = if r.group.is_some() {
        StreamId::MAX
    } else {
        match id::parse(
            ids[i],
            IdRules {
                missing_seq: 0,
                strict: true,
                seq_star: false,
            },
        ) {
            Some((id, _)) => id,
            None => return Ok(()),
        }
    };
    let mut group = None;
    if let Some((gname, _)) = r.group {
        match s.group(c, gname)? {
            None => {
                return c
                    .err("NOGROUP the consumer group this client was blocked on no longer exists");
            }
            Some(g) => {
                gt = g.g.last_id();
                group = Some(g);
            }
        }
    }
    if s.m.last_id() <= gt {
        return Ok(());
    }
    let start = gt.incr().unwrap_or(StreamId::MIN);
    let count = if r.count > 0 {
        r.count
    } else {
        BLOCKED_DEFAULT_COUNT
    };
    let mut body = Vec::new();
    if c.cl.resp3 {
        resp::map(&mut body, 1, true);
    } else {
        resp::array(&mut body, 1);
        resp::array(&mut body, 2);
    }
    resp::bulk(&mut body, &key);
    match (&mut group, r.group) {
        (Some(g), Some((_, cname))) => {
            let cons = consumer_for(c, g, cname, &key)?;
            reply_group(c, &s, g, &cons, start, count, r.noack, &mut body)?;
            g.flush(c.tx)?;
        }
        _ => {
            let mut b2 = Vec::new();
            let n = emit_range(c.tx, &s, start, StreamId::MAX, count, false, &mut b2)?;
            resp::array(&mut body, n as usize);
            body.extend_from_slice(&b2);
        }
    }
    drop(group);
    s.flush(c.tx)?;
    c.out.extend_from_slice(&body);
    Ok(())
}

// ---- XDEL and XSETID --------------------------------------------------------------------------

/// Parse every ID argument strictly (XDEL, XACK); None after the error reply.
fn parse_ids(c: &mut Ctx, args: &[&[u8]]) -> daisy::Result<Option<Vec<StreamId>>> {
    let mut ids = Vec::with_capacity(args.len());
    for a in args {
        ids.push(or_return_none!(id::parse_or_reply(c, a, 0, true)?));
    }
    Ok(Some(ids))
}

/// XDEL key id [id ...]
pub fn xdel(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(v) = typed_or_return!(lookup_write(c, a[1])?) else {
        resp::int(c.out, 0);
        return Ok(());
    };
    let ids = or_return!(parse_ids(c, &a[2..])?);
    let mut s = Stream::open(c, &v)?;
    let mut deleted = 0;
    let mut first_entry = false;
    for id in ids {
        if s.delete(c.tx, id)? {
            if id == s.m.first_id() {
                first_entry = true;
            }
            if id > s.m.max_deleted() {
                s.m.set_max_deleted(id);
            }
            deleted += 1;
        }
    }
    if deleted > 0 {
        if s.m.length == 0 {
            s.m.set_first_id(StreamId::MIN);
        } else if first_entry {
            let first = s.edge_id(c.tx, true, true)?.unwrap_or(StreamId::MAX);
            s.m.set_first_id(first);
        }
    }
    s.flush(c.tx)?;
    if deleted > 0 {
        c.touch(a[1]);
        c.notify(N_STREAM, "xdel", a[1]);
    }
    resp::int(c.out, deleted);
    Ok(())
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
pub fn xsetid(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let id = or_return!(id::parse_or_reply(c, a[2], 0, true)?);
    let (mut entries_added, mut maxdel) = (-1i64, StreamId::MIN);
    let mut i = 3;
    while i < a.len() {
        let more = a.len() - 1 - i;
        if a[i].eq_ignore_ascii_case(b"entriesadded") && more > 0 {
            entries_added = or_return!(ll_arg(c, a[i + 1], None)?);
            if entries_added < 0 {
                return c.err("ERR entries_added must be positive");
            }
            i += 2;
        } else if a[i].eq_ignore_ascii_case(b"maxdeletedid") && more > 0 {
            maxdel = or_return!(id::parse_or_reply(c, a[i + 1], 0, true)?);
            if id < maxdel {
                return c.err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id");
            }
            i += 2;
        } else {
            return c.err(E_SYNTAX);
        }
    }
    let Some(v) = typed_or_return!(lookup_write(c, a[1])?) else {
        return c.err("ERR no such key");
    };
    let mut s = Stream::open(c, &v)?;
    if s.m.length > 0 {
        if id < s.last_valid_id(c.tx)? {
            return c
                .err("ERR The ID specified in XSETID is smaller than the target stream top item");
        }
        if entries_added != -1 && s.m.length > entries_added as u64 {
            return c.err("ERR The entries_added specified in XSETID is smaller than the target stream length");
        }
    }
    s.m.set_last_id(id);
    if entries_added != -1 {
        s.m.entries_added = entries_added as u64;
    }
    if !maxdel.is_zero() {
        s.m.set_max_deleted(maxdel);
    }
    s.flush(c.tx)?;
    resp::ok(c.out);
    c.notify(N_STREAM, "xsetid", a[1]);
    Ok(())
}

// ---- XGROUP -----------------------------------------------------------------------------------

/// XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER|HELP (arities checked by the
/// command table's subcommands).
pub fn xgroup(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let opt = a[1];
    let is = |s: &str| opt.eq_ignore_ascii_case(s.as_bytes());
    let (mut mkstream, mut entries_read) = (false, INVALID_ENTRIES_READ);
    let mut found: Option<(Val, Stream)> = None;
    if a.len() >= 4 {
        let (create, setid) = (is("create"), is("setid"));
        let mut i = 5;
        while i < a.len() {
            if create && a[i].eq_ignore_ascii_case(b"mkstream") {
                mkstream = true;
                i += 1;
            } else if (create || setid)
                && a[i].eq_ignore_ascii_case(b"entriesread")
                && i + 1 < a.len()
            {
                entries_read = or_return!(ll_arg(c, a[i + 1], None)?);
                if entries_read < 0 && entries_read != INVALID_ENTRIES_READ {
                    return c.err("ERR value for ENTRIESREAD must be positive or -1");
                }
                i += 2;
            } else {
                return crate::admin::subcommand_error(c, a);
            }
        }
        if let Some(v) = typed_or_return!(lookup_write(c, a[2])?) {
            let s = Stream::open(c, &v)?;
            found = Some((v, s));
        }
    }
    let mut has_group = false;
    if a.len() >= 4 && !mkstream {
        let Some((_, s)) = found.as_mut() else {
            return c.err("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.");
        };
        has_group = s.group(c, a[3])?.is_some();
        if !has_group && (is("setid") || is("createconsumer") || is("delconsumer")) {
            return c.err(&format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                cstr(a[3]),
                cstr(a[2])
            ));
        }
    }
    if a.len() == 2 && is("help") {
        crate::admin::help_reply(
            c,
            a[0],
            &[
                "CREATE <key> <groupname> <id|$> [option]",
                "    Create a new consumer group. Options are:",
                "    * MKSTREAM",
                "      Create the empty stream if it does not exist.",
                "    * ENTRIESREAD entries_read",
                "      Set the group's entries_read counter (internal use).",
                "CREATECONSUMER <key> <groupname> <consumer>",
                "    Create a new consumer in the specified group.",
                "DELCONSUMER <key> <groupname> <consumer>",
                "    Remove the specified consumer.",
                "DESTROY <key> <groupname>",
                "    Remove the specified group.",
                "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                "    Set the current group ID and entries_read counter.",
            ],
        );
        return Ok(());
    }
    let key = a[2];
    if is("create") && (5..=8).contains(&a.len()) {
        let id = if a[4] == b"$" {
            found.as_ref().map_or(StreamId::MIN, |(_, s)| s.m.last_id())
        } else {
            or_return!(id::parse_or_reply(c, a[4], 0, true)?)
        };
        let mut s = match found {
            Some((_, s)) => s,
            None => {
                let (_, s) = create_stream(c, key)?;
                c.touch(key);
                s
            }
        };
        let created = s.create_group(c, a[3], id, entries_read)?;
        s.flush(c.tx)?;
        if created {
            resp::ok(c.out);
            c.notify(N_STREAM, "xgroup-create", key);
        } else {
            c.err("BUSYGROUP Consumer Group name already exists")?;
        }
        return Ok(());
    }
    let Some((_, mut s)) = found else {
        return crate::admin::subcommand_error(c, a);
    };
    if is("setid") && (a.len() == 5 || a.len() == 7) {
        let id = if a[4] == b"$" {
            s.m.last_id()
        } else {
            or_return!(id::parse_or_reply(c, a[4], 0, false)?)
        };
        let mut g = s.group(c, a[3])?.expect("checked");
        g.g.set_last_id(id);
        g.g.entries_read = entries_read;
        g.flush(c.tx)?;
        resp::ok(c.out);
        c.notify(N_STREAM, "xgroup-setid", key);
    } else if is("destroy") && a.len() == 4 {
        if !has_group {
            resp::int(c.out, 0);
            return Ok(());
        }
        let at = s.unlink_group(c, a[3])?.expect("checked");
        s.flush(c.tx)?;
        drop(s);
        c.ks.free_group(c.tx, at)?;
        resp::int(c.out, 1);
        c.notify(N_STREAM, "xgroup-destroy", key);
        let db = c.db();
        c.ks.signal_ready(db, key);
    } else if is("createconsumer") && a.len() == 5 {
        let mut g = s.group(c, a[3])?.expect("checked");
        let created = g.create_consumer(c.tx, a[4], c.now_ms)?.is_some();
        resp::int(c.out, created as i64);
        if created {
            c.notify(N_STREAM, "xgroup-createconsumer", key);
        }
    } else if is("delconsumer") && a.len() == 5 {
        let mut g = s.group(c, a[3])?.expect("checked");
        let pending = match g.consumer(c.tx, a[4])? {
            Some(cons) => {
                let n = g.delete_consumer(c.tx, &cons)?;
                c.notify(N_STREAM, "xgroup-delconsumer", key);
                n
            }
            None => 0,
        };
        resp::int(c.out, pending as i64);
    } else {
        return crate::admin::subcommand_error(c, a);
    }
    Ok(())
}

// ---- XACK, XPENDING, XCLAIM, XAUTOCLAIM -----------------------------------------------------

/// The stream and group of a consumer group command (lookupKeyRead + streamLookupCG): Ok(None)
/// when either is missing, Err(()) after a WRONGTYPE reply.
fn stream_and_group(
    c: &mut Ctx,
    key: &[u8],
    group: &[u8],
) -> daisy::Result<Result<Option<(Stream, Group)>, ()>> {
    let v = match lookup_read(c, key)? {
        Err(()) => return Ok(Err(())),
        Ok(v) => v,
    };
    let Some(v) = v else {
        return Ok(Ok(None));
    };
    let mut s = Stream::open(c, &v)?;
    match s.group(c, group)? {
        None => Ok(Ok(None)),
        Some(g) => Ok(Ok(Some((s, g)))),
    }
}

/// XACK key group id [id ...]
pub fn xack(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some((_s, mut g)) = typed_or_return!(stream_and_group(c, a[1], a[2])?) else {
        resp::int(c.out, 0);
        return Ok(());
    };
    let ids = or_return!(parse_ids(c, &a[3..])?);
    let mut acked = 0;
    for id in ids {
        if g.remove_nack(c.tx, id)?.is_some() {
            acked += 1;
        }
    }
    g.release(c);
    resp::int(c.out, acked);
    Ok(())
}

fn nogroup(c: &mut Ctx, key: &[u8], group: &[u8]) -> daisy::Result<()> {
    c.err(&format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        cstr(key),
        cstr(group)
    ))
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
pub fn xpending(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let justinfo = a.len() == 3;
    if a.len() != 3 && !(6..=9).contains(&a.len()) {
        return c.err(E_SYNTAX);
    }
    let (mut start, mut end, mut count, mut minidle) = (StreamId::MIN, StreamId::MAX, 0i64, 0i64);
    let mut consumer_name = None;
    if a.len() >= 6 {
        let mut at = 3;
        if a[3].eq_ignore_ascii_case(b"idle") {
            minidle = or_return!(ll_arg(c, a[4], None)?);
            if a.len() < 8 {
                return c.err(E_SYNTAX);
            }
            at += 2;
        }
        count = or_return!(ll_arg(c, a[at + 2], None)?).max(0);
        start = or_return!(id::parse_bound(c, a[at], 0, true)?);
        end = or_return!(id::parse_bound(c, a[at + 1], u64::MAX, false)?);
        if at + 3 < a.len() {
            consumer_name = Some(a[at + 3]);
        }
    }
    let Some((_s, g)) = typed_or_return!(stream_and_group(c, a[1], a[2])?) else {
        return nogroup(c, a[1], a[2]);
    };
    let mut names = HashMap::new();
    if justinfo {
        let total = g.pel(c.tx)?.len(c.tx)?;
        resp::array(c.out, 4);
        resp::int(c.out, total as i64);
        if total == 0 {
            c.nil();
            c.nil();
            c.null_array();
            return Ok(());
        }
        let (first, _) = g
            .pel(c.tx)?
            .first(c.tx)?
            .ok_or_else(|| damaged("an empty PEL"))?;
        let (last, _) = g
            .pel(c.tx)?
            .last(c.tx)?
            .ok_or_else(|| damaged("an empty PEL"))?;
        for k in [first, last] {
            bulk_id(
                c.out,
                StreamId::from_key(&k).ok_or_else(|| damaged("a PEL key"))?,
            );
        }
        let mut rows = Vec::new();
        for cons in g.all_consumers(c.tx)? {
            let n = g.pending_of(c.tx, cons.off)?;
            if n > 0 {
                rows.push((cons.name, n));
            }
        }
        resp::array(c.out, rows.len());
        for (name, n) in rows {
            resp::array(c.out, 2);
            resp::bulk(c.out, &name);
            resp::bulk(c.out, n.to_string().as_bytes());
        }
        return Ok(());
    }
    let entries: Vec<(StreamId, Nack)> = match consumer_name {
        Some(name) => {
            let Some(cons) = g.consumer(c.tx, name)? else {
                resp::array(c.out, 0);
                return Ok(());
            };
            let mut out = Vec::new();
            // The consumer's list, filtered by idle time, until `count` rows.
            let mut from = start;
            'outer: while (out.len() as i64) < count {
                let batch = g.pending_ids(c.tx, cons.off, from, end, 256)?;
                if batch.is_empty() {
                    break;
                }
                for id in &batch {
                    let n = g
                        .nack(c.tx, *id)?
                        .ok_or_else(|| damaged("a consumer PEL entry without NACK"))?;
                    if minidle == 0 || c.now_ms - n.time >= minidle {
                        out.push((*id, n));
                        if out.len() as i64 >= count {
                            break 'outer;
                        }
                    }
                }
                match batch.last().and_then(|l| l.incr()) {
                    Some(next) => from = next,
                    None => break,
                }
            }
            out
        }
        None => {
            let mut out = Vec::new();
            let mut from = start;
            'outer2: while (out.len() as i64) < count {
                let batch = g.pel_range(c.tx, from, end, 256)?;
                if batch.is_empty() {
                    break;
                }
                for (id, n) in &batch {
                    if minidle == 0 || c.now_ms - n.time >= minidle {
                        out.push((*id, *n));
                        if out.len() as i64 >= count {
                            break 'outer2;
                        }
                    }
                }
                match batch.last().and_then(|l| l.0.incr()) {
                    Some(next) => from = next,
                    None => break,
                }
            }
            out
        }
    };
    resp::array(c.out, entries.len());
    for (id, n) in entries {
        resp::array(c.out, 4);
        bulk_id(c.out, id);
        let name = Group::name_of(c.tx, n.consumer, &mut names)?.to_vec();
        resp::bulk(c.out, &name);
        resp::int(c.out, (c.now_ms - n.time).max(0));
        resp::int(c.out, n.count as i64);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
/// Claim pending entry `id` (NACK `n`, `None` for one FORCE creates) for `cons` (streams'
/// claim step shared by XCLAIM and XAUTOCLAIM): its time, count and owner.
fn claim(
    c: &mut Ctx,
    g: &mut Group,
    id: StreamId,
    n: Option<Nack>,
    cons: &Consumer,
    time: i64,
    retrycount: Option<u64>,
    justid: bool,
) -> daisy::Result<()> {
    let old_owner = n.map(|n| n.consumer);
    let mut n = n.unwrap_or(Nack {
        time: c.now_ms,
        count: 1,
        consumer: 0,
    });
    n.time = time;
    match retrycount {
        Some(r) => n.count = r,
        None if !justid => n.count += 1,
        None => {}
    }
    n.consumer = cons.off;
    g.put_nack(c.tx, id, &n, old_owner)
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-ms]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]
pub fn xclaim(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some((s, mut g)) = typed_or_return!(stream_and_group(c, a[1], a[2])?) else {
        return nogroup(c, a[1], a[2]);
    };
    let minidle = or_return!(ll_arg(
        c,
        a[4],
        Some("Invalid min-idle-time argument for XCLAIM")
    )?)
    .max(0);
    let strict = IdRules {
        missing_seq: 0,
        strict: true,
        seq_star: false,
    };
    let mut ids = Vec::new();
    let mut j = 5;
    while j < a.len() {
        match id::parse(a[j], strict) {
            Some((id, _)) => ids.push(id),
            None => break,
        }
        j += 1;
    }
    let now = c.now_ms;
    let (mut force, mut justid) = (false, false);
    let (mut deliverytime, mut retrycount, mut last_id) = (-1i64, -1i64, StreamId::MIN);
    while j < a.len() {
        let more = a.len() - 1 - j;
        let o = a[j];
        if o.eq_ignore_ascii_case(b"force") {
            force = true;
        } else if o.eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else if o.eq_ignore_ascii_case(b"idle") && more > 0 {
            j += 1;
            let v = or_return!(ll_arg(
                c,
                a[j],
                Some("Invalid IDLE option argument for XCLAIM")
            )?);
            deliverytime = now.wrapping_sub(v);
        } else if o.eq_ignore_ascii_case(b"time") && more > 0 {
            j += 1;
            deliverytime = or_return!(ll_arg(
                c,
                a[j],
                Some("Invalid TIME option argument for XCLAIM")
            )?);
        } else if o.eq_ignore_ascii_case(b"retrycount") && more > 0 {
            j += 1;
            retrycount = or_return!(ll_arg(
                c,
                a[j],
                Some("Invalid RETRYCOUNT option argument for XCLAIM")
            )?);
        } else if o.eq_ignore_ascii_case(b"lastid") && more > 0 {
            j += 1;
            last_id = or_return!(id::parse_or_reply(c, a[j], 0, true)?);
        } else {
            return c.err(&format!("ERR Unrecognized XCLAIM option '{}'", cstr(o)));
        }
        j += 1;
    }
    if last_id > g.g.last_id() {
        g.g.set_last_id(last_id);
    }
    let time = if deliverytime != -1 {
        if deliverytime < 0 || deliverytime > now {
            now
        } else {
            deliverytime
        }
    } else {
        now
    };
    let retry = (retrycount >= 0).then_some(retrycount as u64);
    let mut cons: Option<Consumer> = None;
    let mut body = Vec::new();
    let mut n_out = 0;
    for id in ids {
        let mut nack = g.nack(c.tx, id)?;
        if !s.exists(c.tx, id)? {
            if nack.is_some() {
                g.remove_nack(c.tx, id)?;
            }
            continue;
        }
        let forced = force && nack.is_none();
        if forced {
            nack = None;
        } else if nack.is_none() {
            continue;
        }
        if let Some(n) = nack {
            if minidle != 0 && now - n.time < minidle {
                continue;
            }
        }
        if cons.is_none() {
            cons = Some(consumer_for(c, &mut g, a[3], a[1])?);
        }
        let who = cons.as_ref().expect("set");
        claim(c, &mut g, id, nack, who, time, retry, justid)?;
        if justid {
            bulk_id(&mut body, id);
        } else {
            emit_one(c, &s, id, &mut body)?;
        }
        n_out += 1;
    }
    g.flush(c.tx)?;
    resp::array(c.out, n_out);
    c.out.extend_from_slice(&body);
    Ok(())
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
pub fn xautoclaim(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let minidle = or_return!(ll_arg(
        c,
        a[4],
        Some("Invalid min-idle-time argument for XAUTOCLAIM")
    )?)
    .max(0);
    let start = or_return!(id::parse_bound(c, a[5], 0, true)?);
    let (mut count, mut justid) = (100i64, false);
    let mut j = 6;
    while j < a.len() {
        let more = a.len() - 1 - j;
        if a[j].eq_ignore_ascii_case(b"count") && more > 0 {
            let max = i64::MAX / 16;
            match parse_i64(a[j + 1]) {
                Some(n) if (1..=max).contains(&n) => count = n,
                _ => return c.err("ERR COUNT must be > 0"),
            }
            j += 1;
        } else if a[j].eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else {
            return c.err(E_SYNTAX);
        }
        j += 1;
    }
    let Some((s, mut g)) = typed_or_return!(stream_and_group(c, a[1], a[2])?) else {
        return nogroup(c, a[1], a[2]);
    };
    let now = c.now_ms;
    let mut attempts = count.saturating_mul(10);
    let mut cons: Option<Consumer> = None;
    let mut body = Vec::new();
    let (mut claimed, mut deleted) = (0usize, Vec::new());
    let mut cur = Some(start);
    let mut eof = false;
    while attempts > 0 && count > 0 {
        attempts -= 1;
        let Some(from) = cur else {
            eof = true;
            break;
        };
        let Some((id, n)) = g.pel_next(c.tx, from)? else {
            eof = true;
            break;
        };
        cur = id.incr();
        if !s.exists(c.tx, id)? {
            g.remove_nack(c.tx, id)?;
            deleted.push(id);
            count -= 1;
            continue;
        }
        if minidle != 0 && now - n.time < minidle {
            continue;
        }
        if cons.is_none() {
            cons = Some(consumer_for(c, &mut g, a[3], a[1])?);
        }
        let who = cons.as_ref().expect("set");
        claim(c, &mut g, id, Some(n), who, now, None, justid)?;
        if justid {
            bulk_id(&mut body, id);
        } else {
            emit_one(c, &s, id, &mut body)?;
        }
        claimed += 1;
        count -= 1;
    }
    let next = if eof {
        StreamId::MIN
    } else {
        match cur {
            Some(from) => g.pel_next(c.tx, from)?.map_or(StreamId::MIN, |(id, _)| id),
            None => StreamId::MIN,
        }
    };
    g.flush(c.tx)?;
    resp::array(c.out, 3);
    bulk_id(c.out, next);
    resp::array(c.out, claimed);
    c.out.extend_from_slice(&body);
    resp::array(c.out, deleted.len());
    for id in deleted {
        bulk_id(c.out, id);
    }
    Ok(())
}

// ---- XINFO ------------------------------------------------------------------------------------

/// XINFO STREAM key [FULL [COUNT count]] | GROUPS key | CONSUMERS key group | HELP
pub fn xinfo(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a[1].eq_ignore_ascii_case(b"help") {
        if a.len() != 2 {
            return crate::admin::subcommand_error(c, a);
        }
        crate::admin::help_reply(
            c,
            a[0],
            &[
                "CONSUMERS <key> <groupname>",
                "    Show consumers of <groupname>.",
                "GROUPS <key>",
                "    Show the stream consumer groups.",
                "STREAM <key> [FULL [COUNT <count>]",
                "    Show information about the stream.",
            ],
        );
        return Ok(());
    } else if a.len() < 3 {
        return crate::admin::subcommand_error(c, a);
    }
    let Some(v) = typed_or_return!(lookup_read(c, a[2])?) else {
        return c.err("ERR no such key");
    };
    let mut s = Stream::open(c, &v)?;
    let opt = a[1];
    if opt.eq_ignore_ascii_case(b"consumers") && a.len() == 4 {
        let Some(g) = s.group(c, a[3])? else {
            return c.err(&format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                cstr(a[3]),
                cstr(a[2])
            ));
        };
        let all = g.all_consumers(c.tx)?;
        resp::array(c.out, all.len());
        for cons in all {
            let pending = g.pending_of(c.tx, cons.off)?;
            c.map(3);
            resp::bulk(c.out, b"name");
            resp::bulk(c.out, &cons.name);
            resp::bulk(c.out, b"pending");
            resp::int(c.out, pending as i64);
            resp::bulk(c.out, b"idle");
            resp::int(c.out, (c.now_ms - cons.seen_ms).max(0));
        }
    } else if opt.eq_ignore_ascii_case(b"groups") && a.len() == 3 {
        let list = s.group_list(c)?;
        resp::array(c.out, list.len());
        for (name, at) in list {
            let g = s.open_group(c, &name, at)?;
            c.map(6);
            resp::bulk(c.out, b"name");
            resp::bulk(c.out, &name);
            resp::bulk(c.out, b"consumers");
            resp::int(c.out, g.consumers(c.tx)?.len(c.tx)? as i64);
            resp::bulk(c.out, b"pending");
            resp::int(c.out, g.pel(c.tx)?.len(c.tx)? as i64);
            resp::bulk(c.out, b"last-delivered-id");
            bulk_id(c.out, g.g.last_id());
            resp::bulk(c.out, b"entries-read");
            entries_read_reply(c, g.g.entries_read);
            resp::bulk(c.out, b"lag");
            lag_reply(c, s.lag(&g.g));
        }
    } else if opt.eq_ignore_ascii_case(b"stream") {
        return xinfo_stream(c, a, &mut s);
    } else {
        return crate::admin::subcommand_error(c, a);
    }
    Ok(())
}

fn entries_read_reply(c: &mut Ctx, n: i64) {
    if n != INVALID_ENTRIES_READ {
        resp::int(c.out, n);
    } else {
        c.nil();
    }
}

fn lag_reply(c: &mut Ctx, lag: Option<i64>) {
    match lag {
        Some(n) => resp::int(c.out, n),
        None => c.nil(),
    }
}

fn xinfo_stream(c: &mut Ctx, a: &[&[u8]], s: &mut Stream) -> daisy::Result<()> {
    let optv = &a[3..];
    let (full, mut count) = (!optv.is_empty(), 10i64);
    if full {
        if optv.len() != 1 && optv.len() != 3 {
            return crate::admin::subcommand_error(c, a);
        }
        if !optv[0].eq_ignore_ascii_case(b"full") {
            return crate::admin::subcommand_error(c, a);
        }
        if optv.len() == 3 {
            if !optv[1].eq_ignore_ascii_case(b"count") {
                return crate::admin::subcommand_error(c, a);
            }
            count = or_return!(ll_arg(c, optv[2], None)?);
            if count < 0 {
                count = 10;
            }
        }
    }
    let count = count as u64;
    let nodes = s.nodes(c.tx)?;
    let rax = {
        let keys: Vec<[u8; 16]> = if nodes == 0 {
            Vec::new()
        } else {
            s.tree(c.tx)?
                .range_by_rank(c.tx, 0, nodes - 1, false)?
                .iter()
                .map(|(k, _)| k[..].try_into().unwrap_or([0; 16]))
                .collect()
        };
        super::rax_nodes(&keys)
    };
    c.map(if full { 9 } else { 10 });
    resp::bulk(c.out, b"length");
    resp::int(c.out, s.m.length as i64);
    resp::bulk(c.out, b"radix-tree-keys");
    resp::int(c.out, nodes as i64);
    resp::bulk(c.out, b"radix-tree-nodes");
    resp::int(c.out, rax as i64);
    resp::bulk(c.out, b"last-generated-id");
    bulk_id(c.out, s.m.last_id());
    resp::bulk(c.out, b"max-deleted-entry-id");
    bulk_id(c.out, s.m.max_deleted());
    resp::bulk(c.out, b"entries-added");
    resp::int(c.out, s.m.entries_added as i64);
    resp::bulk(c.out, b"recorded-first-entry-id");
    bulk_id(c.out, s.m.first_id());
    if !full {
        let ngroups = s.group_count(c)?;
        resp::bulk(c.out, b"groups");
        resp::int(c.out, ngroups as i64);
        for (label, rev) in [(&b"first-entry"[..], false), (&b"last-entry"[..], true)] {
            resp::bulk(c.out, label);
            let mut body = Vec::new();
            if emit_range(c.tx, s, StreamId::MIN, StreamId::MAX, 1, rev, &mut body)? == 0 {
                c.nil();
            } else {
                c.out.extend_from_slice(&body);
            }
        }
        return Ok(());
    }
    resp::bulk(c.out, b"entries");
    reply_range(c, s, StreamId::MIN, StreamId::MAX, count, false)?;
    resp::bulk(c.out, b"groups");
    let list = s.group_list(c)?;
    resp::array(c.out, list.len());
    let mut names = HashMap::new();
    for (name, at) in list {
        let g = s.open_group(c, &name, at)?;
        c.map(7);
        resp::bulk(c.out, b"name");
        resp::bulk(c.out, &name);
        resp::bulk(c.out, b"last-delivered-id");
        bulk_id(c.out, g.g.last_id());
        resp::bulk(c.out, b"entries-read");
        entries_read_reply(c, g.g.entries_read);
        resp::bulk(c.out, b"lag");
        lag_reply(c, s.lag(&g.g));
        resp::bulk(c.out, b"pel-count");
        resp::int(c.out, g.pel(c.tx)?.len(c.tx)? as i64);
        resp::bulk(c.out, b"pending");
        let pel = g.pel_range(c.tx, StreamId::MIN, StreamId::MAX, count)?;
        resp::array(c.out, pel.len());
        for (id, n) in pel {
            resp::array(c.out, 4);
            bulk_id(c.out, id);
            let who = Group::name_of(c.tx, n.consumer, &mut names)?.to_vec();
            resp::bulk(c.out, &who);
            resp::int(c.out, n.time);
            resp::int(c.out, n.count as i64);
        }
        resp::bulk(c.out, b"consumers");
        let all = g.all_consumers(c.tx)?;
        resp::array(c.out, all.len());
        for cons in all {
            c.map(4);
            resp::bulk(c.out, b"name");
            resp::bulk(c.out, &cons.name);
            resp::bulk(c.out, b"seen-time");
            resp::int(c.out, cons.seen_ms);
            resp::bulk(c.out, b"pel-count");
            resp::int(c.out, g.pending_of(c.tx, cons.off)? as i64);
            resp::bulk(c.out, b"pending");
            let ids = g.pending_ids(c.tx, cons.off, StreamId::MIN, StreamId::MAX, count)?;
            resp::array(c.out, ids.len());
            for id in ids {
                let n = g
                    .nack(c.tx, id)?
                    .ok_or_else(|| damaged("a consumer PEL entry without NACK"))?;
                resp::array(c.out, 3);
                bulk_id(c.out, id);
                resp::int(c.out, n.time);
                resp::int(c.out, n.count as i64);
            }
        }
    }
    Ok(())
}
