//! Sets (Redis's t_set.c): layout and commands.
//!
//! Layout, by the record's encoding:
//! * `IntSet`: members that are all integers, sorted, in an [`intset`] blob;
//! * `Packed` (Redis 7.2's listpack sets): the members in a [`packed`] blob, in insertion
//!   order;
//! * `Table` (Redis's hashtable): the offset of a `PBytesMap` from member to an empty value.
//!
//! The encodings and their thresholds are Redis 7.2's (`set-max-intset-entries` 512,
//! `set-max-listpack-entries` 128, `set-max-listpack-value` 64): Redis 7.0 keeps small sets of
//! strings in a hash table, which here would cost a 16 KiB segment per set. So OBJECT ENCODING
//! of a small set of strings answers `listpack` where Redis 7.0 answers `hashtable`; the
//! replies of every set command are Redis 7.0's. A set converts intset -> listpack -> table
//! as it grows, never back; an empty set is deleted.
//!
//! Invariants (`check`): an intset or packed blob decodes, holds at least one member and no
//! member twice (an intset is sorted); a table is a sound map with at least one entry, every
//! value empty. Crash reasoning: as every
//! type (module `types`).

use super::packed::PackedBuf;
use super::{intset, packed, table_entries, table_id, table_owned, DataType, Type, Value};
use crate::commands::{range_arg, Ctx, E_SYNTAX, E_WRONGTYPE};
use crate::keyspace::{Enc, Header, Val};
use crate::pubsub::{N_GENERIC, N_SET};
use crate::{resp, typed};
use daisy::{BytesMapView, Pool};

pub struct Sets;

impl DataType for Sets {
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
                        p.push("set table with no member".into());
                    }
                    if e.iter().any(|(_, v)| !v.is_empty()) {
                        p.push("set table with a value".into());
                    }
                    p
                }
                Err(e) => vec![e],
            },
            Enc::IntSet => match intset::decode(payload) {
                Ok((v, _)) if v.is_empty() => vec!["intset with no member".into()],
                Ok(_) => Vec::new(),
                Err(e) => vec![e],
            },
            _ => match packed::decode(payload) {
                Ok(m) if m.is_empty() => vec!["packed set with no member".into()],
                Ok(mut m) => {
                    m.sort_unstable();
                    if m.windows(2).any(|w| w[0] == w[1]) {
                        vec!["packed set holds a member twice".into()]
                    } else {
                        Vec::new()
                    }
                }
                Err(e) => vec![e],
            },
        }
    }

    fn dump(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Result<Value, String> {
        let members: Vec<Vec<u8>> = match enc {
            Enc::Table => table_entries(pool, payload)?
                .0
                .into_iter()
                .map(|e| e.0)
                .collect(),
            Enc::IntSet => intset::decode(payload)?
                .0
                .into_iter()
                .map(|n| n.to_string().into_bytes())
                .collect(),
            _ => packed::decode(payload)?
                .into_iter()
                .map(|m| m.to_vec())
                .collect(),
        };
        Ok(Value::Set(members.into_iter().collect()))
    }
}

fn damaged(why: String) -> daisy::Error {
    daisy::Error::Unsupported(format!("damaged set: {why} (run `daisy pool check`)"))
}

/// A set opened for a command.
pub enum SetVal {
    /// The members, ascending, and the intset's width (it never narrows, as Redis's).
    Ints(Vec<i64>, u8),
    /// A packed set's blob, edited where it is.
    Packed(PackedBuf),
    /// `fresh`: created by this command (the record must be written).
    Table { view: BytesMapView, fresh: bool },
}

impl SetVal {
    pub fn open(c: &mut Ctx, v: &Val) -> daisy::Result<SetVal> {
        let p = c.payload(v)?;
        Ok(match v.enc {
            Enc::Table => SetVal::Table {
                view: c
                    .ks
                    .map_view(c.tx, table_id(&p).map_err(damaged)?.offset())?,
                fresh: false,
            },
            Enc::IntSet => {
                let (v, width) = intset::decode(&p).map_err(damaged)?;
                SetVal::Ints(v, width)
            }
            _ => SetVal::Packed(PackedBuf::from_payload(p).map_err(damaged)?),
        })
    }

    /// Done without a change: give a table's view back to the transaction's view cache, so
    /// that the next command on this set takes it instead of opening one (`crate::views`).
    /// (A SADD of a member already there, on a big set, is most of a benchmark's SADDs.)
    pub fn release(self, c: &mut Ctx) {
        if let SetVal::Table { view, fresh: false } = self {
            c.ks.views.keep_map(c.tx, view);
        }
    }

    /// An empty set of the encoding Redis would create for a first member `first` with
    /// `hint` members to come (Redis 7.2's `setTypeCreate`).
    pub fn new_for(c: &mut Ctx, first: &[u8], hint: usize) -> daisy::Result<SetVal> {
        let cfg = &c.sv.config;
        if intset::as_int(first).is_some() && hint <= cfg.set_max_intset_entries {
            Ok(SetVal::Ints(Vec::new(), 2))
        } else if hint <= cfg.set_max_listpack_entries && first.len() <= cfg.set_max_listpack_value
        {
            Ok(SetVal::Packed(PackedBuf::new()))
        } else {
            let view = super::create_table(c, std::iter::empty())?;
            Ok(SetVal::Table { view, fresh: true })
        }
    }

    pub fn len(&self, c: &Ctx) -> daisy::Result<u64> {
        Ok(match self {
            SetVal::Ints(v, _) => v.len() as u64,
            SetVal::Packed(v) => v.count() as u64,
            SetVal::Table { view, .. } => view.len(c.tx)?,
        })
    }

    pub fn contains(&self, c: &Ctx, m: &[u8]) -> daisy::Result<bool> {
        Ok(match self {
            SetVal::Ints(v, _) => intset::as_int(m).is_some_and(|n| v.binary_search(&n).is_ok()),
            SetVal::Packed(v) => v.find(1, m).is_some(),
            SetVal::Table { view, .. } => view.entry(c.tx, m)?.is_some(),
        })
    }

    /// Add `m`; true when it is new. Converts as Redis 7.2's `setTypeAddAux` does.
    pub fn add(&mut self, c: &mut Ctx, m: &[u8]) -> daisy::Result<bool> {
        let (max_ints, max_lp, max_lp_value) = {
            let cfg = &c.sv.config;
            (
                cfg.set_max_intset_entries,
                cfg.set_max_listpack_entries,
                cfg.set_max_listpack_value,
            )
        };
        match self {
            SetVal::Ints(v, width) => {
                if let Some(n) = intset::as_int(m) {
                    let Err(at) = v.binary_search(&n) else {
                        return Ok(false);
                    };
                    v.insert(at, n);
                    *width = (*width).max(intset::width_of(n));
                    if v.len() > max_ints {
                        self.convert_to_table(c)?;
                    }
                    return Ok(true);
                }
                // A string joins integers: a packed set if it stays small, else a table.
                let ints_fit = v.iter().all(|n| n.to_string().len() <= max_lp_value);
                if v.len() < max_lp && m.len() <= max_lp_value && ints_fit {
                    let mut p = PackedBuf::new();
                    for n in v.iter() {
                        p.push(&[n.to_string().as_bytes()]);
                    }
                    p.push(&[m]);
                    *self = SetVal::Packed(p);
                    return Ok(true);
                }
                self.convert_to_table(c)?;
                self.add(c, m)
            }
            SetVal::Packed(v) => {
                if v.find(1, m).is_some() {
                    return Ok(false);
                }
                if v.count() >= max_lp || m.len() > max_lp_value {
                    self.convert_to_table(c)?;
                    return self.add(c, m);
                }
                v.push(&[m]);
                Ok(true)
            }
            // A member already there is left as it is (no rewrite of its entry).
            SetVal::Table { view, .. } => Ok(view.upsert(c.tx, m, |_, old, _| {
                Ok(if old.is_some() {
                    daisy::Upsert::Keep
                } else {
                    daisy::Upsert::Put
                })
            })? == daisy::Upsert::Put),
        }
    }

    /// Remove `m`; true when it was there.
    pub fn remove(&mut self, c: &mut Ctx, m: &[u8]) -> daisy::Result<bool> {
        Ok(match self {
            SetVal::Ints(v, _) => match intset::as_int(m).map(|n| v.binary_search(&n)) {
                Some(Ok(i)) => {
                    v.remove(i);
                    true
                }
                _ => false,
            },
            SetVal::Packed(v) => match v.find(1, m) {
                Some((_, at)) => {
                    v.remove(&at, 1);
                    true
                }
                None => false,
            },
            SetVal::Table { view, .. } => view.remove(c.tx, m)?,
        })
    }

    /// Every member, in the set's order (intsets ascending, packed in insertion order).
    pub fn all(&self, c: &Ctx) -> daisy::Result<Vec<Vec<u8>>> {
        Ok(match self {
            SetVal::Ints(v, _) => v.iter().map(|n| n.to_string().into_bytes()).collect(),
            SetVal::Packed(v) => v.items().map(|at| v.get(&at).to_vec()).collect(),
            SetVal::Table { view, .. } => super::table_all(c, view)?
                .into_iter()
                .map(|e| e.0)
                .collect(),
        })
    }

    /// A member chosen uniformly at random from a non-empty set.
    /// Remove a member chosen as [`SetVal::random`] chooses, and return it (a table picks and
    /// removes in one probe).
    pub fn pop(&mut self, c: &mut Ctx) -> daisy::Result<Vec<u8>> {
        if let SetVal::Table { view, .. } = self {
            let sv = &mut *c.sv;
            return Ok(view
                .take_random(c.tx, &mut || sv.next_random())?
                .ok_or_else(|| damaged("empty table".into()))?
                .0);
        }
        let m = self.random(c)?;
        self.remove(c, &m)?;
        Ok(m)
    }

    pub fn random(&self, c: &mut Ctx) -> daisy::Result<Vec<u8>> {
        Ok(match self {
            SetVal::Ints(v, _) => v[(c.random() % v.len() as u64) as usize]
                .to_string()
                .into_bytes(),
            SetVal::Packed(v) => {
                let i = (c.random() % v.count() as u64) as usize;
                v.get(&v.items().nth(i).expect("a member of the blob"))
                    .to_vec()
            }
            SetVal::Table { view, .. } => {
                let sv = &mut *c.sv;
                view.random_entry(c.tx, &mut || sv.next_random())?
                    .ok_or_else(|| damaged("empty table".into()))?
                    .0
            }
        })
    }

    fn convert_to_table(&mut self, c: &mut Ctx) -> daisy::Result<()> {
        if matches!(self, SetVal::Table { .. }) {
            return Ok(());
        }
        let members = self.all(c)?;
        let view = super::create_table(c, members.iter().map(|m| (&m[..], &b""[..])))?;
        *self = SetVal::Table { view, fresh: true };
        Ok(())
    }

    /// Write the set back under `key` after a change (see `HashVal::store`): an empty set is
    /// deleted. `old` is the key's record before the command (None: the key is new or was
    /// replaced, e.g. by a STORE command that deleted it first).
    pub fn store(self, c: &mut Ctx, key: &[u8], old: Option<&Val>) -> daisy::Result<()> {
        let db = c.db();
        let exp = old.and_then(|v| v.expire_ms);
        // A table that only gained entries in this command cannot be empty.
        let grew_only = matches!(&self, SetVal::Table { view, .. } if !view.removed_any());
        if !grew_only && self.len(c)? == 0 {
            drop(self);
            if let Some(o) = old {
                c.ks.delete(c.tx, db, key, o)?;
                c.notify(N_GENERIC, "del", key);
            }
            return Ok(());
        }
        let (enc, payload) = match self {
            SetVal::Ints(v, width) => (Enc::IntSet, intset::encode(&v, width)),
            SetVal::Packed(v) => (Enc::Packed, v.bytes().to_vec()),
            SetVal::Table { view, fresh: true } => {
                let id = view.id().offset().to_le_bytes().to_vec();
                c.ks.views.keep_map(c.tx, view);
                (Enc::Table, id)
            }
            SetVal::Table {
                mut view,
                fresh: false,
            } => {
                super::shrink_if_sparse(c, &mut view)?;
                c.ks.views.keep_map(c.tx, view);
                c.touch(key);
                return Ok(());
            }
        };
        let hdr = Header::new(Type::Set, enc).with_expire(exp);
        c.ks.put(c.tx, db, key, hdr, &[&payload], old, false)?;
        c.touch(key);
        Ok(())
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

/// The set at `key` for reading (None when absent); Err after a WRONGTYPE reply.
fn open_read(c: &mut Ctx, key: &[u8]) -> daisy::Result<Result<Option<SetVal>, ()>> {
    match c.lookup_typed_read(key, Type::Set)? {
        Err(_) => {
            c.err(E_WRONGTYPE)?;
            Ok(Err(()))
        }
        Ok(None) => Ok(Ok(None)),
        Ok(Some(v)) => Ok(Ok(Some(SetVal::open(c, &v)?))),
    }
}

/// Reply with members as a set (RESP3 `~`, an array in RESP2).
fn reply_set(c: &mut Ctx, members: &[Vec<u8>]) {
    c.set_header(members.len());
    for m in members {
        resp::bulk(c.out, m);
    }
}

pub fn sadd(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let old = typed!(c, c.lookup_typed(a[1], Type::Set)?);
    let mut s = match &old {
        Some(v) => SetVal::open(c, v)?,
        None => SetVal::new_for(c, a[2], a.len() - 2)?,
    };
    let mut added = 0;
    for m in &a[2..] {
        added += s.add(c, m)? as i64;
    }
    if added > 0 || old.is_none() {
        s.store(c, a[1], old.as_ref())?;
        c.notify(N_SET, "sadd", a[1]);
    } else {
        s.release(c);
    }
    resp::int(c.out, added);
    Ok(())
}

pub fn srem(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(v) = typed!(c, c.lookup_typed(a[1], Type::Set)?) else {
        resp::int(c.out, 0);
        return Ok(());
    };
    let mut s = SetVal::open(c, &v)?;
    let mut n = 0;
    for m in &a[2..] {
        n += s.remove(c, m)? as i64;
    }
    if n > 0 {
        c.notify(N_SET, "srem", a[1]);
        s.store(c, a[1], Some(&v))?;
    } else {
        s.release(c);
    }
    resp::int(c.out, n);
    Ok(())
}

pub fn scard(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let s = or_return!(open_read(c, a[1])?);
    let n = match s {
        Some(s) => s.len(c)?,
        None => 0,
    };
    resp::int(c.out, n as i64);
    Ok(())
}

pub fn sismember(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let s = or_return!(open_read(c, a[1])?);
    let n = match s {
        Some(s) => {
            let n = s.contains(c, a[2])?;
            s.release(c);
            n
        }
        None => false,
    };
    resp::int(c.out, n as i64);
    Ok(())
}

pub fn smismember(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let s = or_return!(open_read(c, a[1])?);
    resp::array(c.out, a.len() - 2);
    for m in &a[2..] {
        let n = match &s {
            Some(s) => s.contains(c, m)?,
            None => false,
        };
        resp::int(c.out, n as i64);
    }
    Ok(())
}

pub fn smembers(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let s = or_return!(open_read(c, a[1])?);
    let all = match s {
        Some(s) => s.all(c)?,
        None => Vec::new(),
    };
    reply_set(c, &all);
    Ok(())
}

/// SRANDMEMBER key [count] (Redis 7.0's `srandmemberWithCountCommand`).
pub fn srandmember(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a.len() > 3 {
        return c.err(E_SYNTAX);
    }
    if a.len() == 2 {
        let s = or_return!(open_read(c, a[1])?);
        match s {
            Some(s) => {
                let m = s.random(c)?;
                resp::bulk(c.out, &m);
            }
            None => c.nil(),
        }
        return Ok(());
    }
    let Some(l) = range_arg(c, a[2], -i64::MAX, i64::MAX, None)? else {
        return Ok(());
    };
    let s = match c.lookup_typed_read(a[1], Type::Set)? {
        Err(_) => return c.err(E_WRONGTYPE),
        Ok(None) => {
            resp::array(c.out, 0);
            return Ok(());
        }
        Ok(Some(v)) => SetVal::open(c, &v)?,
    };
    if l == 0 {
        resp::array(c.out, 0);
        return Ok(());
    }
    if l < 0 {
        let n = l.unsigned_abs() as usize;
        resp::array(c.out, n);
        for _ in 0..n {
            let m = s.random(c)?;
            resp::bulk(c.out, &m);
        }
        return Ok(());
    }
    let picked = distinct_random(c, &s, l as u64)?;
    resp::array(c.out, picked.len());
    for m in picked {
        resp::bulk(c.out, &m);
    }
    Ok(())
}

/// `count` distinct members chosen at random (all of them when the set is no larger).
fn distinct_random(c: &mut Ctx, s: &SetVal, count: u64) -> daisy::Result<Vec<Vec<u8>>> {
    let size = s.len(c)?;
    let table = matches!(s, SetVal::Table { .. });
    let mut all = if count >= size || count * 3 > size || !table {
        s.all(c)?
    } else {
        let mut got = Vec::with_capacity(count as usize);
        let mut seen = std::collections::HashSet::new();
        while (got.len() as u64) < count {
            let m = s.random(c)?;
            if seen.insert(m.clone()) {
                got.push(m);
            }
        }
        got
    };
    while all.len() as u64 > count {
        let i = (c.random() % all.len() as u64) as usize;
        all.swap_remove(i);
    }
    Ok(all)
}

/// SPOP key [count].
pub fn spop(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
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
    let v = match c.lookup_typed(a[1], Type::Set)? {
        Err(_) => return c.err(E_WRONGTYPE),
        Ok(None) => {
            match count {
                Some(_) => c.set_header(0),
                None => c.nil(),
            }
            return Ok(());
        }
        Ok(Some(v)) => v,
    };
    let mut s = SetVal::open(c, &v)?;
    let Some(count) = count else {
        let m = s.pop(c)?;
        c.notify(N_SET, "spop", a[1]);
        s.store(c, a[1], Some(&v))?;
        resp::bulk(c.out, &m);
        return Ok(());
    };
    if count == 0 {
        c.set_header(0);
        return Ok(());
    }
    let size = s.len(c)?;
    let picked = distinct_random(c, &s, count)?;
    for m in &picked {
        s.remove(c, m)?;
    }
    // Redis's third strategy (few members left: count >= 5 x remaining) builds a new set of
    // the remaining members, which is an intset exactly when they fit one (and a new intset
    // is as narrow as its members allow). A set that stays out of the intset encoding is
    // kept as it is: a hash table either way, to Redis 7.0 (and no table is copied).
    let remaining = size - picked.len() as u64;
    if remaining > 0 && remaining * 5 <= count {
        let rest = s.all(c)?;
        let intset = intset_fits(c, &rest);
        if intset || matches!(s, SetVal::Ints(..)) {
            drop(s);
            s = create_encoded(c, &rest, intset)?;
        }
    }
    c.notify(N_SET, "spop", a[1]);
    s.store(c, a[1], Some(&v))?;
    reply_set(c, &picked);
    Ok(())
}

pub fn smove(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let src = c.lookup(a[1])?;
    let dst = c.lookup(a[2])?;
    let Some(src) = src else {
        resp::int(c.out, 0);
        return Ok(());
    };
    if src.ty != Type::Set || dst.is_some_and(|d| d.ty != Type::Set) {
        return c.err(E_WRONGTYPE);
    }
    let mut s = SetVal::open(c, &src)?;
    if a[1] == a[2] {
        let n = s.contains(c, a[3])?;
        resp::int(c.out, n as i64);
        return Ok(());
    }
    if !s.remove(c, a[3])? {
        resp::int(c.out, 0);
        return Ok(());
    }
    c.notify(N_SET, "srem", a[1]);
    s.store(c, a[1], Some(&src))?;
    // The destination's record may have moved in the table: look it up again.
    let dst = c.lookup(a[2])?;
    let mut d = match &dst {
        Some(v) => SetVal::open(c, v)?,
        None => SetVal::new_for(c, a[3], 1)?,
    };
    if d.add(c, a[3])? || dst.is_none() {
        d.store(c, a[2], dst.as_ref())?;
        c.notify(N_SET, "sadd", a[2]);
    }
    resp::int(c.out, 1);
    Ok(())
}

/// The sets at `keys` (None for a missing key); Err after a WRONGTYPE reply.
/// Each key's members (None for a missing key).
type SetsOf = Vec<Option<Vec<Vec<u8>>>>;

fn open_all(c: &mut Ctx, keys: &[&[u8]]) -> daisy::Result<Result<SetsOf, ()>> {
    let mut vals = Vec::with_capacity(keys.len());
    for k in keys {
        match c.lookup_read(k)? {
            Some(v) if v.ty != Type::Set => {
                c.err(E_WRONGTYPE)?;
                return Ok(Err(()));
            }
            v => vals.push(v),
        }
    }
    let mut out = Vec::with_capacity(vals.len());
    for v in vals {
        out.push(match v {
            Some(v) => {
                let s = SetVal::open(c, &v)?;
                Some(s.all(c)?)
            }
            None => None,
        });
    }
    Ok(Ok(out))
}

enum Op {
    Inter,
    Union,
    Diff,
}

/// Whether Redis keeps `members` in an intset when it builds a set of them from an empty
/// intset, one member at a time (its `dstset`: SUNION, SDIFF, the STORE commands, SPOP's
/// rebuilt remainder): every member an integer, and no more than `set-max-intset-entries`.
fn intset_fits(c: &Ctx, members: &[Vec<u8>]) -> bool {
    members.len() <= c.sv.config.set_max_intset_entries
        && members.iter().all(|m| intset::as_int(m).is_some())
}

/// A set operation's result, and whether Redis's `dstset` for it ends an intset (its members
/// are then replied in ascending order, and a STORE command stores an intset).
struct Computed {
    members: Vec<Vec<u8>>,
    intset: bool,
}

/// Redis 7.0's `sinterGenericCommand` and `sunionDiffGenericCommand` over the members of
/// `keys` (None: a missing key). `limit` stops an intersection early (SINTERCARD; 0: none).
fn compute(
    c: &Ctx,
    keys: &[&[u8]],
    sets: &[Option<Vec<Vec<u8>>>],
    op: &Op,
    limit: usize,
) -> Computed {
    use std::collections::HashSet;
    let members = match op {
        Op::Inter => {
            if sets.iter().any(|s| s.is_none()) {
                return Computed {
                    members: Vec::new(),
                    intset: true,
                };
            }
            // The smallest set is iterated (its order is the reply's).
            let mut order: Vec<&Vec<Vec<u8>>> = sets.iter().flatten().collect();
            order.sort_by_key(|s| s.len());
            let others: Vec<HashSet<&[u8]>> = order[1..]
                .iter()
                .map(|s| s.iter().map(|m| &m[..]).collect())
                .collect();
            let mut out = Vec::new();
            for m in order[0] {
                if others.iter().all(|o| o.contains(&m[..])) {
                    out.push(m.clone());
                    if limit > 0 && out.len() >= limit {
                        break;
                    }
                }
            }
            out
        }
        Op::Union => {
            let mut seen = HashSet::new();
            let mut out = Vec::new();
            for m in sets.iter().flatten().flatten() {
                if seen.insert(&m[..]) {
                    out.push(m.clone());
                }
            }
            out
        }
        Op::Diff => {
            let Some(first) = &sets[0] else {
                return Computed {
                    members: Vec::new(),
                    intset: true,
                };
            };
            // The first key given again: nothing is left (Redis's `sameset`).
            if keys[1..]
                .iter()
                .zip(&sets[1..])
                .any(|(k, s)| *k == keys[0] && s.is_some())
            {
                return Computed {
                    members: Vec::new(),
                    intset: true,
                };
            }
            let rest: HashSet<&[u8]> = sets[1..]
                .iter()
                .flatten()
                .flatten()
                .map(|m| &m[..])
                .collect();
            let out: Vec<Vec<u8>> = first
                .iter()
                .filter(|m| !rest.contains(&m[..]))
                .cloned()
                .collect();
            // Redis's second algorithm copies the whole first set into its dstset before
            // removing the others' members: the dstset's encoding is then the first set's.
            let one: usize = sets.iter().flatten().map(|_| first.len()).sum::<usize>() / 2;
            let two: usize = sets.iter().flatten().map(|s| s.len()).sum();
            if one > two {
                let intset = intset_fits(c, first);
                return Computed {
                    members: out,
                    intset,
                };
            }
            out
        }
    };
    let intset = intset_fits(c, &members);
    Computed { members, intset }
}

fn set_op(c: &mut Ctx, keys: &[&[u8]], op: Op) -> daisy::Result<()> {
    let sets = or_return!(open_all(c, keys)?);
    let mut r = compute(c, keys, &sets, &op, 0);
    // A union or difference is replied from Redis's dstset: ascending while an intset. (An
    // intersection is replied as its smallest set is iterated.)
    if r.intset && !matches!(op, Op::Inter) {
        r.members.sort_by_key(|m| intset::as_int(m));
    }
    reply_set(c, &r.members);
    Ok(())
}

fn set_op_store(c: &mut Ctx, dst: &[u8], keys: &[&[u8]], op: Op) -> daisy::Result<()> {
    let sets = or_return!(open_all(c, keys)?);
    let r = compute(c, keys, &sets, &op, 0);
    // The destination is replaced whatever it held (its type and expiry go); an empty result
    // deletes it, and touches it (WATCH) only if it was there.
    let existed = if let Some(old) = c.lookup(dst)? {
        let db = c.db();
        c.ks.delete(c.tx, db, dst, &old)?;
        true
    } else {
        false
    };
    if !r.members.is_empty() {
        let s = create_encoded(c, &r.members, r.intset)?;
        s.store(c, dst, None)?;
        let event = match op {
            Op::Inter => "sinterstore",
            Op::Union => "sunionstore",
            Op::Diff => "sdiffstore",
        };
        c.notify(N_SET, event, dst);
    } else if existed {
        c.notify(N_GENERIC, "del", dst);
    }
    resp::int(c.out, r.members.len() as i64);
    Ok(())
}

pub fn sinter(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    set_op(c, &a[1..], Op::Inter)
}

pub fn sunion(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    set_op(c, &a[1..], Op::Union)
}

pub fn sdiff(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    set_op(c, &a[1..], Op::Diff)
}

pub fn sinterstore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    set_op_store(c, a[1], &a[2..], Op::Inter)
}

pub fn sunionstore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    set_op_store(c, a[1], &a[2..], Op::Union)
}

pub fn sdiffstore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    set_op_store(c, a[1], &a[2..], Op::Diff)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit].
pub fn sintercard(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Some(numkeys) = range_arg(
        c,
        a[1],
        1,
        i64::MAX,
        Some("numkeys should be greater than 0"),
    )?
    else {
        return Ok(());
    };
    let numkeys = numkeys as usize;
    if numkeys > a.len() - 2 {
        return c.err("ERR Number of keys can't be greater than number of args");
    }
    let mut limit = 0usize;
    let mut j = 2 + numkeys;
    while j < a.len() {
        let more = a.len() - 1 - j;
        if a[j].eq_ignore_ascii_case(b"LIMIT") && more > 0 {
            j += 1;
            match range_arg(c, a[j], 0, i64::MAX, Some("LIMIT can't be negative"))? {
                Some(n) => limit = n as usize,
                None => return Ok(()),
            }
        } else {
            return c.err(E_SYNTAX);
        }
        j += 1;
    }
    let keys = &a[2..2 + numkeys];
    let sets = or_return!(open_all(c, keys)?);
    let r = compute(c, keys, &sets, &Op::Inter, limit);
    resp::int(c.out, r.members.len() as i64);
    Ok(())
}

/// SSCAN key cursor [MATCH pattern] [COUNT count].
pub fn sscan(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    // Redis's order: the cursor, the key (missing: an empty reply; WRONGTYPE), the options.
    let Some(cursor) = super::parse_cursor(c, a[2])? else {
        return Ok(());
    };
    let Some(s) = or_return!(open_read(c, a[1])?) else {
        return super::empty_scan(c);
    };
    let Some(opts) = super::ScanOpts::parse(c, a, 3)? else {
        return Ok(());
    };
    let (next, items) = match &s {
        SetVal::Table { view, .. } => {
            let (n, e) = super::table_scan(c, view, cursor, opts.count)?;
            (n, e.into_iter().map(|e| e.0).collect())
        }
        s => (0, s.all(c)?),
    };
    resp::array(c.out, 2);
    resp::bulk(c.out, next.to_string().as_bytes());
    let keep: Vec<&Vec<u8>> = items.iter().filter(|m| opts.matches(m)).collect();
    resp::array(c.out, keep.len());
    for m in keep {
        resp::bulk(c.out, m);
    }
    Ok(())
}

/// A new set of `members` (distinct, at least one): an intset when `intset` (they fit one),
/// else what Redis 7.0 keeps in a hash table even when every member is an integer (a packed
/// set or a table, by Daisy's listpack thresholds).
fn create_encoded(c: &mut Ctx, members: &[Vec<u8>], intset: bool) -> daisy::Result<SetVal> {
    if intset {
        return create(c, members);
    }
    let cfg = &c.sv.config;
    if members.len() <= cfg.set_max_listpack_entries
        && members
            .iter()
            .all(|m| m.len() <= cfg.set_max_listpack_value)
    {
        let mut p = PackedBuf::new();
        for m in members {
            p.push(&[m]);
        }
        return Ok(SetVal::Packed(p));
    }
    let view = super::create_table(c, members.iter().map(|m| (&m[..], &b""[..])))?;
    Ok(SetVal::Table { view, fresh: true })
}

/// A new set of `members` (distinct) in the encoding Redis would give it.
pub fn create(c: &mut Ctx, members: &[Vec<u8>]) -> daisy::Result<SetVal> {
    let mut s = SetVal::new_for(c, &members[0], members.len())?;
    for m in members {
        s.add(c, m)?;
    }
    Ok(s)
}
