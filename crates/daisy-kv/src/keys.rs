//! Key and database commands (Redis's db.c, expire.c, object.c and DUMP/RESTORE from
//! cluster.c): they work on keys whatever their type, through the keyspace.

use crate::commands::{lossy, parse_i64, range_arg, upper, Ctx, E_INT, E_SYNTAX};
use crate::keyspace::{Enc, Header, Val};
use crate::pubsub::N_GENERIC;
use crate::rdb;
use crate::resp;
use crate::types::{self, hash, list, set, stream, string, zset, Type};

pub fn del(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let mut n = 0;
    let db = c.db();
    for k in &a[1..] {
        if let Some(v) = c.lookup(k)? {
            c.ks.delete(c.tx, db, k, &v)?;
            c.notify(N_GENERIC, "del", k);
            n += 1;
        }
    }
    resp::int(c.out, n);
    Ok(())
}

pub fn exists(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    // No access for OBJECT IDLETIME (Redis's LOOKUP_NOTOUCH); TOUCH is one.
    c.ks.clock.no_touch = a[0].eq_ignore_ascii_case(b"exists");
    let mut n = 0;
    for k in &a[1..] {
        n += c.lookup_read(k)?.is_some() as i64;
    }
    resp::int(c.out, n);
    Ok(())
}

/// TOUCH: Redis updates access times; Daisy keeps none, so it only counts the keys.
pub fn touch(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    exists(c, a)
}

pub fn type_(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    c.ks.clock.no_touch = true;
    let t = match c.lookup_read(a[1])? {
        Some(v) => v.ty.name(),
        None => "none",
    };
    resp::simple(c.out, t);
    Ok(())
}

/// Live keys of one scan step of the selected database that match `opts`.
fn scan_step(
    c: &mut Ctx,
    cursor: u64,
    count: usize,
    opts: &types::ScanOpts,
    keys: &mut Vec<Vec<u8>>,
) -> daisy::Result<u64> {
    let mut found = Vec::new();
    let db = c.db();
    let next = c.ks.scan(c.tx, db, cursor, count, &mut found)?;
    for (k, e) in found {
        if !opts.matches(&k) {
            continue;
        }
        let v = c.ks.val_of(c.tx, e)?;
        if v.expire_ms.is_some_and(|t| t < c.now_ms) {
            continue;
        }
        if opts
            .ty
            .as_ref()
            .is_some_and(|t| !t.eq_ignore_ascii_case(v.ty.name().as_bytes()))
        {
            continue;
        }
        keys.push(k);
    }
    Ok(next)
}

pub fn keys(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let opts = types::ScanOpts {
        pattern: (a[1] != b"*").then(|| a[1].to_vec()),
        count: 4096,
        ty: None,
    };
    let mut keys = Vec::new();
    let mut cursor = 0;
    loop {
        cursor = scan_step(c, cursor, 4096, &opts, &mut keys)?;
        if cursor == 0 {
            break;
        }
    }
    resp::array(c.out, keys.len());
    for k in keys {
        resp::bulk(c.out, &k);
    }
    Ok(())
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].
pub fn scan(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(cursor) = types::parse_cursor(c, a[1])? else {
        return Ok(());
    };
    let Some(opts) = types::ScanOpts::parse(c, a, 2)? else {
        return Ok(());
    };
    let mut keys = Vec::new();
    let next = scan_step(c, cursor, opts.count, &opts, &mut keys)?;
    resp::array(c.out, 2);
    resp::bulk(c.out, next.to_string().as_bytes());
    resp::array(c.out, keys.len());
    for k in keys {
        resp::bulk(c.out, &k);
    }
    Ok(())
}

fn rename_generic(c: &mut Ctx, a: &[&[u8]], nx: bool) -> daisy::Result<()> {
    let Some(v) = c.lookup(a[1])? else {
        return c.err("ERR no such key");
    };
    if a[1] == a[2] {
        if nx {
            resp::int(c.out, 0);
        } else {
            resp::ok(c.out);
        }
        return Ok(());
    }
    let dst = c.lookup(a[2])?;
    if nx && dst.is_some() {
        resp::int(c.out, 0);
        return Ok(());
    }
    // The record moves as it is (a collection's table goes with it); the old destination's
    // value is freed.
    let payload = c.payload(&v)?;
    let db = c.db();
    c.ks.unlink(c.tx, db, a[1], &v)?;
    c.ks.put(c.tx, db, a[2], v.header(), &[&payload], dst.as_ref(), false)?;
    c.touch(a[1]);
    c.touch(a[2]);
    c.notify(N_GENERIC, "rename_from", a[1]);
    c.notify(N_GENERIC, "rename_to", a[2]);
    if nx {
        resp::int(c.out, 1);
    } else {
        resp::ok(c.out);
    }
    Ok(())
}

pub fn rename(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    rename_generic(c, a, false)
}

pub fn renamenx(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    rename_generic(c, a, true)
}

/// A database index argument (Redis's `getIntFromObjectOrReply` with `msg`, then
/// `selectDb`): Ok(index), or the error reply was sent.
fn db_index(c: &mut Ctx, arg: &[u8], msg: Option<&str>) -> daisy::Result<Result<usize, ()>> {
    let Some(n) = range_arg(c, arg, i32::MIN as i64, i32::MAX as i64, msg)? else {
        return Ok(Err(()));
    };
    if n < 0 || n as usize >= c.ks.databases() {
        c.err("ERR DB index is out of range")?;
        return Ok(Err(()));
    }
    Ok(Ok(n as usize))
}

macro_rules! or_return {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(()) => return Ok(()),
        }
    };
}

/// COPY source destination [DB destination-db] [REPLACE].
pub fn copy(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let src_db = c.db();
    let mut dst_db = src_db;
    let mut replace = false;
    let mut j = 3;
    while j < a.len() {
        let more = a.len() - j - 1;
        match &upper(a[j])[..] {
            b"REPLACE" => replace = true,
            b"DB" if more >= 1 => {
                dst_db = or_return!(db_index(c, a[j + 1], None)?);
                j += 1;
            }
            _ => return c.err(E_SYNTAX),
        }
        j += 1;
    }
    if src_db == dst_db && a[1] == a[2] {
        return c.err("ERR source and destination objects are the same");
    }
    let Some(v) = c.lookup_read(a[1])? else {
        resp::int(c.out, 0);
        return Ok(());
    };
    let dst = c.ks.lookup(c.tx, dst_db, a[2], c.now_ms, false)?;
    if dst.is_some() && !replace {
        resp::int(c.out, 0);
        return Ok(());
    }
    let p = c.payload(&v)?;
    let copied = types::copy_payload(c, v.enc, &p)?;
    let mut hdr = v.header();
    // Redis's copy of an integer string keeps the encoding, not the sharing.
    if v.ty == Type::String && string::encoding_name(v.enc, &p) == "int" {
        hdr.enc = Enc::Int;
    }
    c.ks.put(c.tx, dst_db, a[2], hdr, &[&copied], dst.as_ref(), false)?;
    c.ks.touch(c.tx, dst_db, a[2]);
    c.notify_db(N_GENERIC, "copy_to", a[2], dst_db);
    resp::int(c.out, 1);
    Ok(())
}

/// MOVE key db.
pub fn move_(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let src_db = c.db();
    let dst_db = or_return!(db_index(c, a[2], None)?);
    if src_db == dst_db {
        return c.err("ERR source and destination objects are the same");
    }
    let Some(v) = c.lookup(a[1])? else {
        resp::int(c.out, 0);
        return Ok(());
    };
    if c.ks.lookup(c.tx, dst_db, a[1], c.now_ms, false)?.is_some() {
        resp::int(c.out, 0);
        return Ok(());
    }
    let p = c.payload(&v)?;
    c.ks.unlink(c.tx, src_db, a[1], &v)?;
    c.ks.put(c.tx, dst_db, a[1], v.header(), &[&p], None, false)?;
    c.touch(a[1]);
    c.ks.touch(c.tx, dst_db, a[1]);
    c.notify(N_GENERIC, "move_from", a[1]);
    c.notify_db(N_GENERIC, "move_to", a[1], dst_db);
    resp::int(c.out, 1);
    Ok(())
}

/// OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ|HELP (the subcommand and its arity were checked
/// with the command table's, `commands::precheck`).
pub fn object(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let sub = upper(a[1]);
    if sub == b"HELP" {
        let help = [
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Prints this help.",
        ];
        resp::array(c.out, help.len());
        for l in help {
            resp::simple(c.out, l);
        }
        return Ok(());
    }
    c.ks.clock.no_touch = true;
    let Some(v) = c.lookup_read(a[2])? else {
        c.nil();
        return Ok(());
    };
    let lfu =
        c.sv.config
            .get("maxmemory-policy")
            .is_some_and(|p| p.ends_with("lfu"));
    match &sub[..] {
        b"ENCODING" => {
            let name = match (v.ty, v.enc) {
                (Type::String, enc) => {
                    let p = c.payload(&v)?;
                    string::encoding_name(enc, &p)
                }
                // Redis 7.0 keeps every list in a quicklist.
                (Type::List, _) => "quicklist",
                (Type::Stream, _) => "stream",
                (_, Enc::Table) => "hashtable",
                (_, Enc::SkipList) => "skiplist",
                (_, Enc::IntSet) => "intset",
                _ => "listpack",
            };
            resp::bulk(c.out, name.as_bytes());
        }
        b"REFCOUNT" => {
            // Redis shares the integers 0..9999 (reported as INT_MAX); values are otherwise
            // referenced once.
            let shared = v.ty == Type::String && v.enc == Enc::Auto && {
                let p = c.payload(&v)?;
                crate::types::intset::as_int(&p).is_some_and(|n| (0..10_000).contains(&n))
            };
            resp::int(c.out, if shared { i32::MAX as i64 } else { 1 });
        }
        b"IDLETIME" => {
            if lfu {
                return c.err("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
            }
            // The DRAM clock (`access`): seconds since the last read or write.
            let db = c.db();
            let idle = c.ks.clock.idle_s(db, a[2]);
            resp::int(c.out, idle as i64);
        }
        _ => {
            if !lfu {
                return c.err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
            }
            resp::int(c.out, 0);
        }
    }
    Ok(())
}

/// The value of `v` as DUMP serializes it, and the RDB encoding Redis would use.
fn rdb_value(c: &mut Ctx, v: &Val) -> daisy::Result<(rdb::Value, rdb::Encoding)> {
    let compact = if matches!(v.enc, Enc::Table | Enc::SkipList) {
        rdb::Encoding::Plain
    } else {
        rdb::Encoding::Compact
    };
    let value = match v.ty {
        Type::String => rdb::Value::String(c.payload(v)?),
        Type::Hash => rdb::Value::Hash(hash::HashVal::open(c, v)?.all(c)?),
        Type::Set => rdb::Value::Set(set::SetVal::open(c, v)?.all(c)?),
        Type::ZSet => rdb::Value::ZSet(zset::ZVal::open(c, v)?.idx().all(c.tx)?),
        Type::List => rdb::Value::List(list::ListVal::open(c, v)?.all(c)?),
        Type::Stream => rdb::Value::Stream(Box::new(stream::dump_of(c, v)?)),
    };
    Ok((value, compact))
}

pub fn dump(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(v) = c.lookup_read(a[1])? else {
        c.nil();
        return Ok(());
    };
    let payload = dump_payload(c, &v)?;
    resp::bulk(c.out, &payload);
    Ok(())
}

/// The DUMP payload of a key's value (Redis's RDB serialization with version and checksum).
fn dump_payload(c: &mut Ctx, v: &Val) -> daisy::Result<Vec<u8>> {
    if v.ty == Type::Set && v.enc == Enc::IntSet {
        if let set::SetVal::Ints(values, width) = set::SetVal::open(c, v)? {
            // An intset is serialized as it is held, at its width.
            return Ok(rdb::dump_intset(&values, width));
        }
    }
    let (value, enc) = rdb_value(c, v)?;
    Ok(rdb::dump(&value, enc))
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password |
/// AUTH2 username password] [KEYS key ...] (Redis 7.0's `migrateCommand` without cluster
/// mode): each key is sent as RESTORE with its remaining time to live and its DUMP payload
/// (after AUTH and SELECT), and deleted here once the target accepted it, unless COPY. As in
/// Redis, the server waits for the target (up to `timeout` ms per step): MIGRATE blocks the
/// event loop for that long. The connection is not cached (Redis keeps one for 10 s).
pub fn migrate(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let (mut copy, mut replace) = (false, false);
    let mut auth: Vec<&[u8]> = Vec::new();
    let mut first_key = 3;
    let mut nkeys = 1;
    let mut j = 6;
    while j < a.len() {
        let more = a.len() - j - 1;
        match &upper(a[j])[..] {
            b"COPY" => copy = true,
            b"REPLACE" => replace = true,
            b"AUTH" if more >= 1 => {
                auth = vec![a[j + 1]];
                j += 1;
            }
            b"AUTH2" if more >= 2 => {
                auth = vec![a[j + 1], a[j + 2]];
                j += 2;
            }
            b"KEYS" => {
                if !a[3].is_empty() {
                    return c.err("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string");
                }
                first_key = j + 1;
                nkeys = a.len() - j - 1;
                j = a.len();
                continue;
            }
            _ => return c.err(E_SYNTAX),
        }
        j += 1;
    }
    let (Some(timeout), Some(dbid)) = (parse_i64(a[5]), parse_i64(a[4])) else {
        return c.err(E_INT);
    };
    if !(i32::MIN as i64..=i32::MAX as i64).contains(&dbid) {
        return c.err(E_INT);
    }
    let timeout =
        std::time::Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    // The keys that exist, with what RESTORE needs.
    let mut sent: Vec<(&[u8], Val)> = Vec::new();
    let mut req = Vec::new();
    if !auth.is_empty() {
        let mut cmd: Vec<&[u8]> = vec![b"AUTH"];
        cmd.extend(&auth);
        resp_command(&mut req, &cmd);
    }
    resp_command(&mut req, &[b"SELECT", dbid.to_string().as_bytes()]);
    for &k in &a[first_key..first_key + nkeys] {
        let Some(v) = c.lookup_read(k)? else {
            continue;
        };
        let ttl = match v.expire_ms {
            None => 0,
            Some(t) if t - c.now_ms < 0 => continue,
            Some(t) => (t - c.now_ms).max(1),
        };
        let payload = dump_payload(c, &v)?;
        let ttl = ttl.to_string();
        let mut cmd: Vec<&[u8]> = vec![b"RESTORE", k, ttl.as_bytes(), &payload];
        if replace {
            cmd.push(b"REPLACE");
        }
        resp_command(&mut req, &cmd);
        sent.push((k, v));
    }
    if sent.is_empty() {
        resp::simple(c.out, "NOKEY");
        return Ok(());
    }
    let host = String::from_utf8_lossy(a[1]).into_owned();
    let port = std::str::from_utf8(a[2])
        .ok()
        .and_then(|p| p.parse::<u16>().ok());
    let addr = port.and_then(|p| {
        use std::net::ToSocketAddrs;
        (host.as_str(), p).to_socket_addrs().ok()?.next()
    });
    // Redis connects without blocking and learns of a refused connection when it writes:
    // only a connection that times out (or a name that does not resolve) is a connect error.
    let stream = match addr.map(|addr| std::net::TcpStream::connect_timeout(&addr, timeout)) {
        Some(Ok(s)) => s,
        Some(Err(e)) if e.kind() != std::io::ErrorKind::TimedOut => {
            return c.err("IOERR error or timeout writing to target instance")
        }
        _ => return c.err("IOERR error or timeout connecting to the client"),
    };
    let mut stream = stream;
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(timeout));
    let _ = stream.set_read_timeout(Some(timeout));
    if std::io::Write::write_all(&mut stream, &req).is_err() {
        return c.err("IOERR error or timeout writing to target instance");
    }
    // One status line per command sent: AUTH, SELECT, then a RESTORE per key.
    let mut lines = std::io::BufReader::new(stream);
    let mut read_line = || {
        let mut l = Vec::new();
        match std::io::BufRead::read_until(&mut lines, b'\n', &mut l) {
            Ok(n) if n > 0 => Some(l.trim_ascii_end().to_vec()),
            _ => None,
        }
    };
    let target_error =
        |l: &[u8]| format!("ERR Target instance replied with error: {}", lossy(&l[1..]));
    for _ in 0..1 + !auth.is_empty() as usize {
        match read_line() {
            None => return c.err("IOERR error or timeout reading to target instance"),
            Some(l) if l.first() == Some(&b'-') => return c.err(&target_error(&l)),
            Some(_) => {}
        }
    }
    let mut error = None;
    let db = c.db();
    for (k, v) in &sent {
        match read_line() {
            None => {
                error = Some("IOERR error or timeout reading to target instance".to_string());
                break;
            }
            Some(l) if l.first() == Some(&b'-') => error = Some(target_error(&l)),
            Some(_) if !copy => {
                c.ks.delete(c.tx, db, k, v)?;
                c.notify(N_GENERIC, "del", k);
            }
            Some(_) => {}
        }
    }
    match error {
        Some(e) => c.err(&e),
        None => {
            resp::ok(c.out);
            Ok(())
        }
    }
}

/// One command as a RESP array of bulk strings.
fn resp_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    resp::array(out, args.len());
    for a in args {
        resp::bulk(out, a);
    }
}

/// CLUSTER, READONLY, READWRITE, ASKING: this server runs as a Redis without cluster mode.
pub fn cluster(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    c.err("ERR This instance has cluster support disabled")
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
/// (Redis 7.0's `restoreCommand`: options, BUSYKEY, the TTL, the payload, in that order; the
/// old key goes only once the payload decoded). IDLETIME sets the key's access clock (as
/// Redis does under any policy but LFU; FREQ, for LFU, has no counter here to set).
pub fn restore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let before = c.out.len();
    restore_value(c, a)?;
    if &c.out[before..] == b"+OK\r\n" {
        let idle = a[4..]
            .windows(2)
            .find(|w| w[0].eq_ignore_ascii_case(b"IDLETIME"))
            .and_then(|w| parse_i64(w[1]));
        if let Some(idle) = idle {
            let db = c.db();
            c.ks.clock.set_idle(db, a[1], idle.max(0) as u64);
        }
    }
    Ok(())
}

fn restore_value(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let (mut replace, mut absttl) = (false, false);
    // IDLETIME and FREQ exclude each other (the second one is a syntax error).
    let (mut idle, mut freq) = (false, false);
    let mut j = 4;
    while j < a.len() {
        let more = a.len() - j - 1;
        match &upper(a[j])[..] {
            b"REPLACE" => replace = true,
            b"ABSTTL" => absttl = true,
            b"IDLETIME" if more >= 1 && !freq => {
                match parse_i64(a[j + 1]) {
                    Some(n) if n >= 0 => idle = true,
                    Some(_) => return c.err("ERR Invalid IDLETIME value, must be >= 0"),
                    None => return c.err(E_INT),
                }
                j += 1;
            }
            b"FREQ" if more >= 1 && !idle => {
                match parse_i64(a[j + 1]) {
                    Some(n) if (0..=255).contains(&n) => freq = true,
                    Some(_) => return c.err("ERR Invalid FREQ value, must be >= 0 and <= 255"),
                    None => return c.err(E_INT),
                }
                j += 1;
            }
            _ => return c.err(E_SYNTAX),
        }
        j += 1;
    }
    let old = c.lookup(a[1])?;
    if old.is_some() && !replace {
        return c.err("BUSYKEY Target key name already exists.");
    }
    let ttl = match parse_i64(a[2]) {
        Some(n) if n >= 0 => n,
        Some(_) => return c.err("ERR Invalid TTL value, must be >= 0"),
        None => return c.err(E_INT),
    };
    let value = match rdb::restore(a[3]) {
        Ok(v) => v,
        Err(e) => return c.err(e),
    };
    match &value {
        rdb::Value::List(x) if x.is_empty() => return c.err("ERR Bad data format"),
        rdb::Value::Hash(x) if x.is_empty() => return c.err("ERR Bad data format"),
        rdb::Value::Set(x) if x.is_empty() => return c.err("ERR Bad data format"),
        rdb::Value::ZSet(x) if x.is_empty() => return c.err("ERR Bad data format"),
        _ => {}
    }
    // A relative TTL that overflows wraps in Redis (`ttl += mstime()`), and so reads as
    // already expired.
    let expire = match ttl {
        0 => None,
        t if absttl => Some(t),
        t => Some(c.now_ms.wrapping_add(t)),
    };
    let db = c.db();
    if let Some(o) = &old {
        c.ks.delete(c.tx, db, a[1], o)?;
    }
    if expire.is_some_and(|t| t <= c.now_ms) {
        // Already expired: nothing is stored (Redis deletes it at once), the reply is OK.
        if old.is_some() {
            c.notify(N_GENERIC, "del", a[1]);
        }
        resp::ok(c.out);
        return Ok(());
    }
    let (ty, enc, payload) = match value {
        rdb::Value::Hash(pairs) => {
            let (enc, p) = hash::create(c, pairs, !rdb::is_packed_hash(a[3]))?;
            (Type::Hash, enc, p)
        }
        rdb::Value::Set(members) => {
            let mut s = set::create(c, &members)?;
            // An intset payload is loaded as it is, at its width.
            if let (set::SetVal::Ints(_, w), Some(pw)) = (&mut s, rdb::intset_width(a[3])) {
                *w = (*w).max(pw);
            }
            s.store(c, a[1], None)?;
            if let Some(t) = expire {
                if let Some(v) = c.lookup(a[1])? {
                    c.ks.set_expire(c.tx, db, a[1], &v, Some(t))?;
                }
            }
            c.notify(N_GENERIC, "restore", a[1]);
            resp::ok(c.out);
            return Ok(());
        }
        rdb::Value::ZSet(elems) => {
            let (enc, p) = zset::create_restored(c, &elems, rdb::is_packed_zset(a[3]))?;
            (Type::ZSet, enc, p)
        }
        rdb::Value::List(items) => {
            let refs: Vec<&[u8]> = items.iter().map(|i| &i[..]).collect();
            let mut l = list::ListVal::new();
            l.push(c, &refs, list::End::Tail)?;
            l.store(c, a[1], None)?;
            if let Some(t) = expire {
                if let Some(v) = c.lookup(a[1])? {
                    c.ks.set_expire(c.tx, db, a[1], &v, Some(t))?;
                }
            }
            c.notify(N_GENERIC, "restore", a[1]);
            resp::ok(c.out);
            return Ok(());
        }
        rdb::Value::Stream(d) => {
            let p = stream::restore(c, &d)?;
            (Type::Stream, Enc::Stream, p)
        }
        // A string is stored as SET would (Redis: `tryObjectEncoding`).
        rdb::Value::String(s) => (Type::String, Enc::Auto, s),
    };
    let hdr = Header::new(ty, enc).with_expire(expire);
    c.ks.put(c.tx, db, a[1], hdr, &[&payload], None, false)?;
    c.touch(a[1]);
    c.notify(N_GENERIC, "restore", a[1]);
    resp::ok(c.out);
    Ok(())
}

pub fn dbsize(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    let db = c.db();
    let n = c.ks.len(c.tx, db)?;
    resp::int(c.out, n as i64);
    Ok(())
}

pub fn randomkey(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    // As Redis does on a master: an expired key that is picked is removed, and picking goes
    // on until a live key turns up or the keyspace is empty. Each removal takes redo log, so
    // this ends: once the group's record runs low, picks go on without removing for a while,
    // and then a scan finds a live key if there is one. Nil only for a keyspace whose keys
    // have all expired.
    let db = c.db();
    loop {
        let k = {
            let sv = &mut *c.sv;
            c.ks.random_key(c.tx, db, &mut || sv.next_random())?
        };
        let Some(k) = k else {
            c.nil();
            return Ok(());
        };
        if c.tx.log_room() < crate::keyspace::LAZY_EXPIRY_MIN_ROOM {
            break;
        }
        if c.lookup(&k)?.is_some() {
            resp::bulk(c.out, &k);
            return Ok(());
        }
    }
    for _ in 0..100 {
        let k = {
            let sv = &mut *c.sv;
            c.ks.random_key(c.tx, db, &mut || sv.next_random())?
        };
        let Some(k) = k else {
            break;
        };
        if c.lookup_read(&k)?.is_some() {
            resp::bulk(c.out, &k);
            return Ok(());
        }
    }
    let opts = types::ScanOpts {
        pattern: None,
        count: 1024,
        ty: None,
    };
    let mut cursor = 0;
    loop {
        let mut live = Vec::new();
        cursor = scan_step(c, cursor, 1024, &opts, &mut live)?;
        if let Some(k) = live.first() {
            resp::bulk(c.out, k);
            return Ok(());
        }
        if cursor == 0 {
            break;
        }
    }
    c.nil();
    Ok(())
}

pub fn select(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let db = or_return!(db_index(c, a[1], None)?);
    c.cl.db = db;
    resp::ok(c.out);
    Ok(())
}

pub fn swapdb(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    // Both indexes are read before either is checked against the databases.
    let (lo, hi) = (i32::MIN as i64, i32::MAX as i64);
    let Some(x) = range_arg(c, a[1], lo, hi, Some("invalid first DB index"))? else {
        return Ok(());
    };
    let Some(y) = range_arg(c, a[2], lo, hi, Some("invalid second DB index"))? else {
        return Ok(());
    };
    let n = c.ks.databases() as i64;
    if !(0..n).contains(&x) || !(0..n).contains(&y) {
        return c.err("ERR DB index is out of range");
    }
    c.ks.swap_db(c.tx, x as usize, y as usize, c.now_ms)?;
    // Cached keys now name other values: every tracking client is told (Redis 7.0 tells
    // none; a stale cache is the worse answer).
    if x != y {
        crate::tracking::flushed(c);
    }
    resp::ok(c.out);
    Ok(())
}

fn flush_args(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<bool> {
    if a.len() > 2 || (a.len() == 2 && !matches!(&upper(a[1])[..], b"ASYNC" | b"SYNC")) {
        c.err(E_SYNTAX)?;
        return Ok(false);
    }
    Ok(true)
}

/// FLUSHDB [ASYNC|SYNC]: the database's map is queued for freeing (in bounded steps, so
/// either form answers at once), in the command's transaction.
pub fn flushdb(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if !flush_args(c, a)? {
        return Ok(());
    }
    let db = c.db();
    c.ks.dirty += c.ks.len(c.tx, db)?;
    c.ks.flush_db(c.tx, db, c.now_ms)?;
    crate::tracking::flushed(c);
    resp::ok(c.out);
    Ok(())
}

pub fn flushall(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if !flush_args(c, a)? {
        return Ok(());
    }
    for db in 0..c.ks.databases() {
        // Each key removed counts as a change (Redis's `server.dirty += emptyData(...)`).
        c.ks.dirty += c.ks.len(c.tx, db)?;
        c.ks.flush_db(c.tx, db, c.now_ms)?;
    }
    crate::tracking::flushed(c);
    resp::ok(c.out);
    Ok(())
}

// ---- expiry ----------------------------------------------------------------------------

fn expire_generic(c: &mut Ctx, a: &[&[u8]], base: i64, unit: i64, name: &str) -> daisy::Result<()> {
    // Redis checks the options before the time argument.
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &a[3..] {
        match &upper(opt)[..] {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => return c.err(&format!("ERR Unsupported option {}", lossy(opt))),
        }
    }
    if nx && (xx || gt || lt) {
        return c.err("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return c.err("ERR GT and LT options at the same time are not compatible");
    }
    let Some(n) = parse_i64(a[2]) else {
        return c.err(E_INT);
    };
    let Some(when) = c.abs_time(base, n, unit) else {
        return c.err(&format!("ERR invalid expire time in '{name}' command"));
    };
    let Some(v) = c.lookup(a[1])? else {
        resp::int(c.out, 0);
        return Ok(());
    };
    let cur = v.expire_ms;
    let refuse = (nx && cur.is_some())
        || (xx && cur.is_none())
        || (gt && cur.is_none_or(|t| when <= t))
        || (lt && cur.is_some_and(|t| when >= t));
    if refuse {
        resp::int(c.out, 0);
        return Ok(());
    }
    let db = c.db();
    if when <= c.now_ms {
        c.ks.delete(c.tx, db, a[1], &v)?;
        c.notify(N_GENERIC, "del", a[1]);
    } else {
        c.ks.set_expire(c.tx, db, a[1], &v, Some(when))?;
        c.touch(a[1]);
        c.notify(N_GENERIC, "expire", a[1]);
    }
    resp::int(c.out, 1);
    Ok(())
}

pub fn expire(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    expire_generic(c, a, c.now_ms, 1000, "expire")
}

pub fn pexpire(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    expire_generic(c, a, c.now_ms, 1, "pexpire")
}

pub fn expireat(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    expire_generic(c, a, 0, 1000, "expireat")
}

pub fn pexpireat(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    expire_generic(c, a, 0, 1, "pexpireat")
}

fn ttl_generic(c: &mut Ctx, a: &[&[u8]], ms: bool, absolute: bool) -> daisy::Result<()> {
    c.ks.clock.no_touch = true;
    let r = match c.lookup_read(a[1])? {
        None => -2,
        Some(Val {
            expire_ms: None, ..
        }) => -1,
        Some(Val {
            expire_ms: Some(t), ..
        }) => {
            if absolute {
                if ms {
                    t
                } else {
                    t / 1000
                }
            } else {
                let left = (t - c.now_ms).max(0);
                if ms {
                    left
                } else {
                    (left + 500) / 1000
                }
            }
        }
    };
    resp::int(c.out, r);
    Ok(())
}

pub fn ttl(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    ttl_generic(c, a, false, false)
}

pub fn pttl(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    ttl_generic(c, a, true, false)
}

pub fn expiretime(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    ttl_generic(c, a, false, true)
}

pub fn pexpiretime(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    ttl_generic(c, a, true, true)
}

pub fn persist(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match c.lookup(a[1])? {
        Some(v) if v.expire_ms.is_some() => {
            let db = c.db();
            c.ks.set_expire(c.tx, db, a[1], &v, None)?;
            c.touch(a[1]);
            c.notify(N_GENERIC, "persist", a[1]);
            resp::int(c.out, 1);
        }
        _ => resp::int(c.out, 0),
    }
    Ok(())
}
