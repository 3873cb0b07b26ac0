//! Hashes (Redis's t_hash.c): layout and commands.
//!
//! Layout, by the record's encoding:
//! * `Packed` (Redis's listpack): the payload is a [`packed`] blob of field, value, field,
//!   value, ... in insertion order (a new field goes last; changing a value keeps its place;
//!   HGETALL answers in this order, as Redis does for a listpack hash);
//! * `Table` (Redis's hashtable): the payload is the offset of a `PBytesMap` from field to
//!   value, owned by the record.
//!
//! A hash starts packed and becomes a table, in the command that crosses a threshold, when
//! it would hold more than `hash-max-listpack-entries` fields, or when a command is given a
//! field or value longer than `hash-max-listpack-value` bytes (Redis's
//! `hashTypeTryConversion` and `hashTypeSet`); it never goes back. A hash left without
//! fields is deleted.
//!
//! Invariants (`check`): a packed blob decodes, has an even number of items, no field twice,
//! and at least one field; a table is a sound map with at least one entry. Crash reasoning:
//! see the module `types` (a packed hash is rewritten whole; a table changes through a view
//! in the command's transaction; a conversion builds the table and rewrites the record in
//! that same transaction).

use super::packed::PackedBuf;
use super::{packed, table_entries, table_id, table_owned, DataType, Type, Value};
use crate::commands::{parse_i64, range_arg, Ctx, E_INT, E_SYNTAX};
use crate::keyspace::{Enc, Header, Val};
use crate::pubsub::{N_GENERIC, N_HASH};
use crate::{longdouble, resp, typed};
use daisy::{BytesMapView, Pool};

pub struct Hashes;

impl DataType for Hashes {
    fn owned(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Result<Vec<u64>, String> {
        match enc {
            Enc::Table => table_owned(pool, payload),
            _ => Ok(Vec::new()),
        }
    }

    fn check(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Vec<String> {
        match enc {
            Enc::Table => match table_entries(pool, payload) {
                Ok((e, mut p)) => {
                    if e.is_empty() {
                        p.push("hash table with no field".into());
                    }
                    p
                }
                Err(e) => vec![e],
            },
            _ => match decode_packed(payload) {
                Ok(pairs) if pairs.is_empty() => vec!["packed hash with no field".into()],
                Ok(pairs) => {
                    let mut f: Vec<&[u8]> = pairs.iter().map(|p| p.0).collect();
                    f.sort_unstable();
                    if f.windows(2).any(|w| w[0] == w[1]) {
                        vec!["packed hash holds a field twice".into()]
                    } else {
                        Vec::new()
                    }
                }
                Err(e) => vec![e],
            },
        }
    }

    fn dump(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Result<Value, String> {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = match enc {
            Enc::Table => table_entries(pool, payload)?.0,
            _ => decode_packed(payload)?
                .into_iter()
                .map(|(f, v)| (f.to_vec(), v.to_vec()))
                .collect(),
        };
        Ok(Value::Hash(pairs.into_iter().collect()))
    }
}

/// A packed hash's (field, value) slices.
type PackedPairs<'a> = Vec<(&'a [u8], &'a [u8])>;

fn decode_packed(payload: &[u8]) -> Result<PackedPairs<'_>, String> {
    let items = packed::decode(payload)?;
    if items.len() % 2 != 0 {
        return Err("packed hash with an odd number of items".into());
    }
    Ok(items.chunks(2).map(|p| (p[0], p[1])).collect())
}

fn encode_packed(pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    packed::encode(
        pairs
            .iter()
            .flat_map(|(f, v)| [&f[..], &v[..]])
            .collect::<Vec<_>>()
            .into_iter(),
    )
}

/// The (field, value) pairs of a packed hash, in order.
fn packed_pairs(p: &PackedBuf) -> super::Pairs {
    let items: Vec<super::packed::ItemAt> = p.items().collect();
    items
        .chunks(2)
        .map(|fv| (p.get(&fv[0]).to_vec(), p.get(&fv[1]).to_vec()))
        .collect()
}

/// A hash opened for a command.
pub enum HashVal {
    /// A packed hash's blob, edited where it is (or a new hash's, empty).
    Packed(PackedBuf),
    /// A table, through a view in the command's transaction; `fresh` when this command
    /// created it (the record must then be written).
    Table { view: BytesMapView, fresh: bool },
}

impl HashVal {
    /// Open the hash whose record is `v`.
    pub fn open(c: &mut Ctx, v: &Val) -> daisy::Result<HashVal> {
        Ok(Self::open_locating(c, v, None)?.0)
    }

    /// Open the hash whose record is `v`; when it is packed and `field` is given, locate that
    /// field in the same pass that checks the blob.
    fn open_locating(
        c: &mut Ctx,
        v: &Val,
        field: Option<&[u8]>,
    ) -> daisy::Result<(HashVal, Option<Located>)> {
        let p = c.payload(v)?;
        match v.enc {
            Enc::Table => {
                let id = table_id(&p).map_err(damaged)?;
                c.ks.recycle_payload(p);
                let view = c.ks.map_view(c.tx, id.offset())?;
                Ok((HashVal::Table { view, fresh: false }, None))
            }
            _ => {
                let (b, at) = PackedBuf::from_payload_find(p, 2, field).map_err(damaged)?;
                if b.count() % 2 != 0 {
                    return Err(damaged("packed hash with an odd number of items".into()));
                }
                let located = field.map(|_| Located {
                    at: at.map(|(_, at)| at),
                });
                Ok((HashVal::Packed(b), located))
            }
        }
    }

    /// Done without a change: give a table's view back to the transaction's view cache (see
    /// `SetVal::release`).
    pub fn release(self, c: &mut Ctx) {
        if let HashVal::Table { view, fresh: false } = self {
            c.ks.views.keep_map(c.tx, view);
        }
    }

    pub fn len(&self, c: &Ctx) -> daisy::Result<u64> {
        match self {
            HashVal::Packed(p) => Ok(p.count() as u64 / 2),
            HashVal::Table { view, .. } => view.len(c.tx),
        }
    }

    pub fn get(&self, c: &Ctx, field: &[u8]) -> daisy::Result<Option<Vec<u8>>> {
        match self {
            HashVal::Packed(p) => Ok(p.find(2, field).map(|(_, at)| p.get(&p.next(&at)).to_vec())),
            HashVal::Table { view, .. } => view.get(c.tx, field),
        }
    }

    /// Set `field`; true when it is new. As Redis's `hashTypeSet`, a packed hash becomes a
    /// table before the change when the field or the value is longer than
    /// `hash-max-listpack-value`, and after it when it holds more than
    /// `hash-max-listpack-entries` fields (so HDEL never converts, even past a threshold
    /// lowered since).
    pub fn set(&mut self, c: &mut Ctx, field: &[u8], value: &[u8]) -> daisy::Result<bool> {
        self.set_located(c, field, value, None)
    }

    /// [`HashVal::set`], with `field` already located in the packed blob when `located` is
    /// given (by `open_write`, for this field, the blob unchanged since).
    fn set_located(
        &mut self,
        c: &mut Ctx,
        field: &[u8],
        value: &[u8],
        located: Option<Located>,
    ) -> daisy::Result<bool> {
        self.convert_for_items(c, &[field, value])?;
        let new = self.set_here(c, field, value, located)?;
        if matches!(self, HashVal::Packed(p) if p.count() / 2 > c.sv.config.hash_max_listpack_entries)
        {
            self.convert_to_table(c)?;
        }
        Ok(new)
    }

    /// Set `field` in the present encoding.
    fn set_here(
        &mut self,
        c: &mut Ctx,
        field: &[u8],
        value: &[u8],
        located: Option<Located>,
    ) -> daisy::Result<bool> {
        match self {
            HashVal::Packed(p) => {
                match located.map_or_else(|| p.find(2, field).map(|(_, at)| at), |l| l.at) {
                    Some(at) => {
                        let v = p.next(&at);
                        p.replace(&v, value);
                        Ok(false)
                    }
                    None => {
                        p.push(&[field, value]);
                        Ok(true)
                    }
                }
            }
            HashVal::Table { view, .. } => Ok(!view.insert(c.tx, field, value)?),
        }
    }

    /// Remove `field`; true when it was there.
    pub fn del(&mut self, c: &mut Ctx, field: &[u8]) -> daisy::Result<bool> {
        match self {
            HashVal::Packed(p) => match p.find(2, field) {
                Some((_, at)) => {
                    p.remove(&at, 2);
                    Ok(true)
                }
                None => Ok(false),
            },
            HashVal::Table { view, .. } => view.remove(c.tx, field),
        }
    }

    /// Every (field, value), in the hash's order.
    pub fn all(&self, c: &Ctx) -> daisy::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        match self {
            HashVal::Packed(p) => Ok(packed_pairs(p)),
            HashVal::Table { view, .. } => super::table_all(c, view),
        }
    }

    /// Become a table when a packed hash would be given an item longer than
    /// `hash-max-listpack-value` (Redis's `hashTypeTryConversion`, before the change).
    fn convert_for_items(&mut self, c: &mut Ctx, items: &[&[u8]]) -> daisy::Result<()> {
        if matches!(self, HashVal::Packed(_))
            && items
                .iter()
                .any(|i| i.len() > c.sv.config.hash_max_listpack_value)
        {
            self.convert_to_table(c)?;
        }
        Ok(())
    }

    fn convert_to_table(&mut self, c: &mut Ctx) -> daisy::Result<()> {
        if let HashVal::Packed(p) = self {
            let pairs = packed_pairs(p);
            let view = super::create_table(c, pairs.iter().map(|(f, v)| (&f[..], &v[..])))?;
            *self = HashVal::Table { view, fresh: true };
        }
        Ok(())
    }

    /// Write the hash back under `key` after a change: a packed hash rewrites its record, a
    /// new table gets its record, an empty hash is deleted. `old` is the key's record before
    /// the command.
    pub fn store(self, c: &mut Ctx, key: &[u8], old: Option<&Val>) -> daisy::Result<()> {
        let db = c.db();
        let exp = old.and_then(|v| v.expire_ms);
        // A table that only gained entries in this command cannot be empty.
        let grew_only = matches!(&self, HashVal::Table { view, .. } if !view.removed_any());
        if !grew_only && self.len(c)? == 0 {
            drop(self);
            if let Some(o) = old {
                c.ks.delete(c.tx, db, key, o)?;
                c.notify(N_GENERIC, "del", key);
            }
            return Ok(());
        }
        match self {
            HashVal::Packed(p) => {
                // Edits that kept the blob's length (a field's value replaced by one as long:
                // the usual HSET of a field already there) write only the bytes they changed,
                // over the record they were read from (same header, same length), instead of
                // logging the whole record again.
                let in_place = old
                    .filter(|o| o.enc == Enc::Packed && o.len == p.bytes().len())
                    .and_then(|o| Some((o, p.in_place_change()?)));
                match in_place {
                    Some((_, None)) => {}
                    Some((o, Some(r))) => c.ks.patch_payload(c.tx, o, r.start, &p.bytes()[r])?,
                    None => {
                        let hdr = Header::new(Type::Hash, Enc::Packed).with_expire(exp);
                        c.ks.put(c.tx, db, key, hdr, &[p.bytes()], old, false)?;
                    }
                }
                c.ks.recycle_payload(p.into_bytes());
            }
            HashVal::Table { view, fresh: true } => {
                let id = view.id().offset().to_le_bytes();
                c.ks.views.keep_map(c.tx, view);
                let hdr = Header::new(Type::Hash, Enc::Table).with_expire(exp);
                c.ks.put(c.tx, db, key, hdr, &[&id], old, false)?;
            }
            HashVal::Table {
                mut view,
                fresh: false,
            } => {
                super::shrink_if_sparse(c, &mut view)?;
                c.ks.views.keep_map(c.tx, view);
            }
        }
        c.touch(key);
        Ok(())
    }
}

/// Where a packed hash's field is (None: not there), found by `open_write` while it checked
/// the blob: it serves the command's first `set`, of that field, before the blob changes.
struct Located {
    at: Option<super::packed::ItemAt>,
}

fn damaged(why: String) -> daisy::Error {
    daisy::Error::Unsupported(format!("damaged hash: {why} (run `daisy pool check`)"))
}

/// The hash at `key` for a write (a new empty one when absent), with its record.
fn open_write(c: &mut Ctx, key: &[u8]) -> daisy::Result<Result<(HashVal, Option<Val>), ()>> {
    Ok(open_write_locating(c, key, None)?.map(|(h, v, _)| (h, v)))
}

/// [`open_write`], locating `field` in a packed hash as it is checked (for the command's
/// first `set_located`).
#[allow(clippy::type_complexity)]
fn open_write_locating(
    c: &mut Ctx,
    key: &[u8],
    field: Option<&[u8]>,
) -> daisy::Result<Result<(HashVal, Option<Val>, Option<Located>), ()>> {
    let v = match c.lookup_typed(key, Type::Hash)? {
        Ok(v) => v,
        Err(_) => {
            c.err(crate::commands::E_WRONGTYPE)?;
            return Ok(Err(()));
        }
    };
    let (h, located) = match &v {
        Some(v) => HashVal::open_locating(c, v, field)?,
        None => (HashVal::Packed(PackedBuf::new()), None),
    };
    Ok(Ok((h, v, located)))
}

/// The hash at `key` for a read: None when absent (after a WRONGTYPE reply, Err).
fn open_read(c: &mut Ctx, key: &[u8]) -> daisy::Result<Result<Option<HashVal>, ()>> {
    match c.lookup_typed_read(key, Type::Hash)? {
        Err(_) => {
            c.err(crate::commands::E_WRONGTYPE)?;
            Ok(Err(()))
        }
        Ok(None) => Ok(Ok(None)),
        Ok(Some(v)) => Ok(Ok(Some(HashVal::open(c, &v)?))),
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

fn hset_generic(c: &mut Ctx, a: &[&[u8]], reply_count: bool) -> daisy::Result<()> {
    if a.len() % 2 == 1 {
        let name = if reply_count { "hset" } else { "hmset" };
        return c.err(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    // The first field is located while the packed blob is checked.
    let (mut h, old, mut located) = or_return!(open_write_locating(c, a[1], Some(a[2]))?);
    h.convert_for_items(c, &a[2..])?;
    let mut created = 0;
    for fv in a[2..].chunks(2) {
        created += h.set_located(c, fv[0], fv[1], located.take())? as i64;
    }
    h.store(c, a[1], old.as_ref())?;
    c.notify(N_HASH, "hset", a[1]);
    if reply_count {
        resp::int(c.out, created);
    } else {
        resp::ok(c.out);
    }
    Ok(())
}

pub fn hset(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    hset_generic(c, a, true)
}

pub fn hmset(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    hset_generic(c, a, false)
}

pub fn hsetnx(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let (mut h, old) = or_return!(open_write(c, a[1])?);
    if h.get(c, a[2])?.is_some() {
        h.release(c);
        resp::int(c.out, 0);
        return Ok(());
    }
    h.convert_for_items(c, &a[2..4])?;
    h.set(c, a[2], a[3])?;
    h.store(c, a[1], old.as_ref())?;
    c.notify(N_HASH, "hset", a[1]);
    resp::int(c.out, 1);
    Ok(())
}

pub fn hget(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(h) = or_return!(open_read(c, a[1])?) else {
        c.nil();
        return Ok(());
    };
    match h.get(c, a[2])? {
        Some(v) => resp::bulk(c.out, &v),
        None => c.nil(),
    }
    h.release(c);
    Ok(())
}

pub fn hmget(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let h = or_return!(open_read(c, a[1])?);
    resp::array(c.out, a.len() - 2);
    for f in &a[2..] {
        match &h {
            Some(h) => match h.get(c, f)? {
                Some(v) => resp::bulk(c.out, &v),
                None => c.nil(),
            },
            None => c.nil(),
        }
    }
    Ok(())
}

pub fn hdel(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let v = typed!(c, c.lookup_typed(a[1], Type::Hash)?);
    let Some(v) = v else {
        resp::int(c.out, 0);
        return Ok(());
    };
    let mut h = HashVal::open(c, &v)?;
    let mut n = 0;
    for f in &a[2..] {
        n += h.del(c, f)? as i64;
    }
    if n > 0 {
        c.notify(N_HASH, "hdel", a[1]);
        h.store(c, a[1], Some(&v))?;
    } else {
        h.release(c);
    }
    resp::int(c.out, n);
    Ok(())
}

pub fn hlen(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let h = or_return!(open_read(c, a[1])?);
    let n = match h {
        Some(h) => h.len(c)?,
        None => 0,
    };
    resp::int(c.out, n as i64);
    Ok(())
}

pub fn hstrlen(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let h = or_return!(open_read(c, a[1])?);
    let n = match h {
        Some(h) => h.get(c, a[2])?.map_or(0, |v| v.len()),
        None => 0,
    };
    resp::int(c.out, n as i64);
    Ok(())
}

pub fn hexists(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let h = or_return!(open_read(c, a[1])?);
    let n = match h {
        Some(h) => h.get(c, a[2])?.is_some(),
        None => false,
    };
    resp::int(c.out, n as i64);
    Ok(())
}

fn hgetall_generic(c: &mut Ctx, a: &[&[u8]], fields: bool, values: bool) -> daisy::Result<()> {
    let h = or_return!(open_read(c, a[1])?);
    let all = match h {
        Some(h) => h.all(c)?,
        None => Vec::new(),
    };
    if fields && values {
        c.map(all.len());
    } else {
        resp::array(c.out, all.len());
    }
    for (f, v) in all {
        if fields {
            resp::bulk(c.out, &f);
        }
        if values {
            resp::bulk(c.out, &v);
        }
    }
    Ok(())
}

pub fn hkeys(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    hgetall_generic(c, a, true, false)
}

pub fn hvals(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    hgetall_generic(c, a, false, true)
}

pub fn hgetall(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    hgetall_generic(c, a, true, true)
}

pub fn hincrby(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(incr) = parse_i64(a[3]) else {
        return c.err(E_INT);
    };
    let (mut h, old) = or_return!(open_write(c, a[1])?);
    let cur = match h.get(c, a[2])? {
        Some(v) => {
            match super::intset::as_int(&v).or_else(|| parse_i64(&v).filter(|_| v.len() <= 20)) {
                Some(n) => n,
                None => return c.err("ERR hash value is not an integer"),
            }
        }
        None => 0,
    };
    let Some(n) = cur.checked_add(incr) else {
        return c.err("ERR increment or decrement would overflow");
    };
    h.set(c, a[2], n.to_string().as_bytes())?;
    h.store(c, a[1], old.as_ref())?;
    c.notify(N_HASH, "hincrby", a[1]);
    resp::int(c.out, n);
    Ok(())
}

pub fn hincrbyfloat(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(incr) = longdouble::parse(a[3]) else {
        return c.err(crate::commands::E_FLOAT);
    };
    if longdouble::add(incr, longdouble::parse(b"0").expect("zero")).is_none() {
        return c.err("ERR value is NaN or Infinity");
    }
    let (mut h, old) = or_return!(open_write(c, a[1])?);
    let cur = match h.get(c, a[2])? {
        Some(v) => match longdouble::parse(&v) {
            Some(n) => n,
            None => return c.err("ERR hash value is not a float"),
        },
        None => longdouble::parse(b"0").expect("zero"),
    };
    let Some(n) = longdouble::add(cur, incr) else {
        return c.err("ERR increment would produce NaN or Infinity");
    };
    let s = longdouble::format(n);
    h.set(c, a[2], s.as_bytes())?;
    h.store(c, a[1], old.as_ref())?;
    c.notify(N_HASH, "hincrbyfloat", a[1]);
    resp::bulk(c.out, s.as_bytes());
    Ok(())
}

/// HRANDFIELD key [count [WITHVALUES]] (Redis 7.0's `hrandfieldCommand`: a positive count
/// gives distinct fields, at most the whole hash; a negative one may repeat).
pub fn hrandfield(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a.len() == 2 {
        let h = or_return!(open_read(c, a[1])?);
        let Some(h) = h else {
            c.nil();
            return Ok(());
        };
        let (f, _) = random_pair(c, &h)?;
        resp::bulk(c.out, &f);
        return Ok(());
    }
    let Some(l) = range_arg(c, a[2], -i64::MAX, i64::MAX, None)? else {
        return Ok(());
    };
    let withvalues = match a.len() {
        3 => false,
        4 if a[3].eq_ignore_ascii_case(b"withvalues") => {
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
                return c.err("ERR value is out of range");
            }
            true
        }
        _ => return c.err(E_SYNTAX),
    };
    let h = match c.lookup_typed_read(a[1], Type::Hash)? {
        Err(_) => return c.err(crate::commands::E_WRONGTYPE),
        Ok(None) => {
            resp::array(c.out, 0);
            return Ok(());
        }
        Ok(Some(v)) => HashVal::open(c, &v)?,
    };
    let resp3 = c.cl.resp3;
    let pair = |out: &mut Vec<u8>, f: &[u8], v: &[u8]| {
        if withvalues && resp3 {
            resp::array(out, 2);
        }
        resp::bulk(out, f);
        if withvalues {
            resp::bulk(out, v);
        }
    };
    let per = if withvalues && !resp3 { 2 } else { 1 };
    if l == 0 {
        resp::array(c.out, 0);
        return Ok(());
    }
    if l < 0 {
        let n = l.unsigned_abs() as usize;
        resp::array(c.out, n * per);
        for _ in 0..n {
            let (f, v) = random_pair(c, &h)?;
            pair(c.out, &f, &v);
        }
        return Ok(());
    }
    let count = l as usize;
    let size = h.len(c)? as usize;
    let mut all = if count >= size || count * 3 > size || matches!(h, HashVal::Packed(_)) {
        h.all(c)?
    } else {
        // Few out of many: draw until `count` distinct fields.
        let mut got: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(count);
        let mut seen = std::collections::HashSet::new();
        while got.len() < count {
            let (f, v) = random_pair(c, &h)?;
            if seen.insert(f.clone()) {
                got.push((f, v));
            }
        }
        got
    };
    // Keep `count` of them, chosen at random (all when the hash is no larger).
    while all.len() > count {
        let i = (c.random() % all.len() as u64) as usize;
        all.swap_remove(i);
    }
    resp::array(c.out, all.len() * per);
    for (f, v) in all {
        pair(c.out, &f, &v);
    }
    Ok(())
}

/// A field and its value chosen uniformly at random from a non-empty hash.
fn random_pair(c: &mut Ctx, h: &HashVal) -> daisy::Result<(Vec<u8>, Vec<u8>)> {
    match h {
        HashVal::Packed(p) => {
            let i = (c.random() % (p.count() as u64 / 2)) as usize;
            let f = p.items().nth(2 * i).expect("a field of the blob");
            let v = p.next(&f);
            Ok((p.get(&f).to_vec(), p.get(&v).to_vec()))
        }
        HashVal::Table { view, .. } => {
            let sv = &mut *c.sv;
            let (f, e) = view
                .random_entry(c.tx, &mut || sv.next_random())?
                .ok_or_else(|| damaged("empty table".into()))?;
            let mut v = vec![0u8; e.value_len()];
            view.read_value(c.tx, &e, 0, &mut v)?;
            Ok((f, v))
        }
    }
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]: a packed hash answers whole with cursor 0
/// (as Redis's listpack); a table by the map's cursor.
pub fn hscan(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    // Redis's order: the cursor, the key (missing: an empty reply; WRONGTYPE), the options.
    let Some(cursor) = super::parse_cursor(c, a[2])? else {
        return Ok(());
    };
    let Some(h) = or_return!(open_read(c, a[1])?) else {
        return super::empty_scan(c);
    };
    let Some(opts) = super::ScanOpts::parse(c, a, 3)? else {
        return Ok(());
    };
    let (next, items) = match &h {
        HashVal::Packed(p) => (0, packed_pairs(p)),
        HashVal::Table { view, .. } => super::table_scan(c, view, cursor, opts.count)?,
    };
    resp::array(c.out, 2);
    resp::bulk(c.out, next.to_string().as_bytes());
    let keep: Vec<&(Vec<u8>, Vec<u8>)> = items.iter().filter(|(f, _)| opts.matches(f)).collect();
    resp::array(c.out, keep.len() * 2);
    for (f, v) in keep {
        resp::bulk(c.out, f);
        resp::bulk(c.out, v);
    }
    Ok(())
}

/// A new hash of `pairs` (RESTORE): its header encoding and payload, packed when it has no
/// more than `hash-max-listpack-entries` fields and, if `check_values`, no field or value
/// longer than `hash-max-listpack-value` (Redis does not look at the lengths of a hash that
/// arrives as a listpack); else a new table.
pub fn create(
    c: &mut Ctx,
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    check_values: bool,
) -> daisy::Result<(Enc, Vec<u8>)> {
    let cfg = &c.sv.config;
    let max = cfg.hash_max_listpack_value;
    if pairs.len() <= cfg.hash_max_listpack_entries
        && (!check_values || pairs.iter().all(|(f, v)| f.len() <= max && v.len() <= max))
    {
        return Ok((Enc::Packed, encode_packed(&pairs)));
    }
    let view = super::create_table(c, pairs.iter().map(|(f, v)| (&f[..], &v[..])))?;
    Ok((Enc::Table, view.id().offset().to_le_bytes().to_vec()))
}
