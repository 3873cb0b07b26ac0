//! Sorted sets (Redis's t_zset.c): layout, invariants, crash reasoning and commands.
//!
//! Layout, by the record's encoding (type 3, `Type::ZSet`):
//! * `Packed` (Redis's listpack, OBJECT ENCODING `listpack`): a [`packed`] blob of member,
//!   score, member, score, ... sorted by (score, member), each score 8 bytes (an `f64`,
//!   little-endian). A score of -0 is stored as 0, as Redis's listpack stores it.
//! * `SkipList` (Redis's skiplist + dict, OBJECT ENCODING `skiplist`): 16 bytes, the offset of
//!   a `PBytesMap` from member to score (8 bytes, `f64` little-endian, -0 kept) and the offset
//!   of a `PTreeMap` (the ordered index) whose keys are [`score::tree_key`]s (8 order-preserving
//!   score bytes, then the member) with empty values, both owned by the record: ranks, ranges
//!   and counts are O(log n) through the tree's order statistics (`index::ZBig`).
//!
//! A sorted set is created packed unless `zset-max-listpack-entries` is 0 or the first member
//! is longer than `zset-max-listpack-value` (ZADD, ZINCRBY), and becomes big in the command
//! that adds an element past `zset-max-listpack-entries` or a member longer than
//! `zset-max-listpack-value` (Redis's `zsetAdd`); it never converts back, except that a
//! destination written whole (ZRANGESTORE, ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE) or a RESTOREd
//! value is packed when it fits, as Redis does. An empty sorted set is deleted with its key.
//!
//! Invariants (`check`): a packed blob decodes to at least one (member, score) pair, scores
//! 8 bytes, not NaN, not -0, in strictly ascending (score, member) order, no member twice; a
//! big set's payload is 16 bytes naming a map and a tree, the map is sound, has at least one
//! entry, and every value is an 8-byte non-NaN score; the tree is sound, its values are empty
//! and its keys are exactly the tree keys of the map's elements.
//!
//! Crash reasoning: as every type (module `types`): a packed set is rewritten whole in the
//! command's transaction; a big set's map and tree change through views in that transaction
//! (every change writes both); a conversion builds both and rewrites the record in one
//! transaction; a deleted big set's map and tree are freed in the same transaction when
//! small, else queued for lazyfree in it (`LazyKind::Table` and `LazyKind::Tree`).

pub mod commands;
pub mod index;
pub mod score;

use super::{packed, table_entries, table_owned, DataType, Score, Type, Value};
use crate::commands::{Ctx, E_WRONGTYPE};
use crate::keyspace::{Enc, Header, Val};
use daisy::{PBytesMap, PPtr, PTreeMap, Pool};
use index::{damaged, Elem, ZBig, ZIndex, ZPacked};
use std::collections::BTreeMap;

pub use commands::*;

/// Bytes of a big set's payload: the map's offset, then the ordered index's.
pub const BIG_PAYLOAD: usize = 16;

/// A big set's payload naming `map` and `tree`.
pub fn big_payload(map: u64, tree: u64) -> Vec<u8> {
    let mut p = map.to_le_bytes().to_vec();
    p.extend_from_slice(&tree.to_le_bytes());
    p
}

/// The map and the ordered index a big set's payload names (checked: 16 bytes, neither 0).
pub fn big_ids(payload: &[u8]) -> Result<(PPtr<PBytesMap>, PPtr<PTreeMap>), String> {
    if payload.len() != BIG_PAYLOAD {
        return Err(format!(
            "sorted set payload of {} bytes (want {BIG_PAYLOAD})",
            payload.len()
        ));
    }
    let map = u64::from_le_bytes(payload[..8].try_into().expect("8 bytes"));
    let tree = u64::from_le_bytes(payload[8..16].try_into().expect("8 bytes"));
    if map == 0 || tree == 0 {
        return Err("sorted set payload names no map or no ordered index".into());
    }
    Ok((PPtr::from_offset(map), PPtr::from_offset(tree)))
}

/// A big set's payload for its views.
fn payload_of(b: &ZBig) -> Vec<u8> {
    big_payload(b.view.id().offset(), b.tree.id().offset())
}

pub struct ZSets;

/// The elements of a packed payload, or what is wrong with it.
fn packed_elems(payload: &[u8]) -> Result<Vec<(Vec<u8>, f64)>, String> {
    let items = packed::decode(payload)?;
    if items.len() % 2 != 0 {
        return Err("packed sorted set with an odd number of items".into());
    }
    items
        .chunks(2)
        .map(|p| {
            let w: [u8; 8] = p[1]
                .try_into()
                .map_err(|_| format!("packed sorted set: a score of {} bytes", p[1].len()))?;
            Ok((p[0].to_vec(), f64::from_le_bytes(w)))
        })
        .collect()
}

/// The elements of a big set's map, and the problems of its map, of its ordered index, and
/// of the two together (the index must hold exactly the key of every element of the map).
fn big_elems(pool: &Pool, payload: &[u8]) -> Result<(Vec<Elem>, Vec<String>), String> {
    let (_, tree) = big_ids(payload)?;
    let (entries, mut problems) = table_entries(pool, &payload[..8])?;
    let mut out = Vec::with_capacity(entries.len());
    for (m, v) in entries {
        let w: [u8; 8] = v[..]
            .try_into()
            .map_err(|_| format!("sorted set table: a score of {} bytes", v.len()))?;
        out.push((m, f64::from_le_bytes(w)));
    }
    let t = PTreeMap::open(pool, tree).map_err(|e| format!("sorted set index: {e}"))?;
    problems.extend(
        t.check()
            .problems
            .into_iter()
            .map(|p| format!("sorted set index: {p}")),
    );
    drop(t);
    let keys = daisy::tree_entries(pool, tree.offset()).map_err(|e| e.to_string())?;
    let mut want: Vec<Vec<u8>> = out.iter().map(|(m, s)| score::tree_key(*s, m)).collect();
    want.sort_unstable();
    let got: Vec<&Vec<u8>> = keys.iter().map(|(k, _)| k).collect();
    if got.len() != want.len() || got.iter().zip(&want).any(|(g, w)| *g != w) {
        problems.push(format!(
            "sorted set index holds {} keys that do not match its table's {} elements",
            got.len(),
            want.len()
        ));
    }
    if keys.iter().any(|(_, v)| !v.is_empty()) {
        problems.push("sorted set index holds a value".into());
    }
    Ok((out, problems))
}

impl DataType for ZSets {
    fn owned(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Result<Vec<u64>, String> {
        match enc {
            Enc::SkipList => {
                let (_, tree) = big_ids(payload)?;
                let mut o = table_owned(pool, &payload[..8])?;
                o.extend(daisy::tree_objects(pool, tree.offset()).map_err(|e| e.to_string())?);
                Ok(o)
            }
            _ => Ok(Vec::new()),
        }
    }

    fn check(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Vec<String> {
        match enc {
            Enc::SkipList => match big_elems(pool, payload) {
                Ok((e, mut p)) => {
                    if e.is_empty() {
                        p.push("sorted set table with no member".into());
                    }
                    if e.iter().any(|(_, s)| s.is_nan()) {
                        p.push("sorted set table holds a NaN score".into());
                    }
                    p
                }
                Err(e) => vec![e],
            },
            _ => match packed_elems(payload) {
                Err(e) => vec![e],
                Ok(e) if e.is_empty() => vec!["packed sorted set with no member".into()],
                Ok(e) => {
                    let mut p = Vec::new();
                    if e.iter()
                        .any(|(_, s)| s.is_nan() || (*s == 0.0 && s.is_sign_negative()))
                    {
                        p.push("packed sorted set holds a NaN or -0 score".into());
                    } else if e
                        .windows(2)
                        .any(|w| !score::cmp_entry((w[0].1, &w[0].0), (w[1].1, &w[1].0)).is_lt())
                    {
                        p.push("packed sorted set out of (score, member) order".into());
                    }
                    let mut m: Vec<&[u8]> = e.iter().map(|x| &x.0[..]).collect();
                    m.sort_unstable();
                    if m.windows(2).any(|w| w[0] == w[1]) {
                        p.push("packed sorted set holds a member twice".into());
                    }
                    p
                }
            },
        }
    }

    fn dump(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Result<Value, String> {
        let elems = match enc {
            Enc::SkipList => big_elems(pool, payload)?.0,
            _ => packed_elems(payload)?,
        };
        Ok(Value::ZSet(
            elems
                .into_iter()
                .map(|(m, s)| (m, Score(s)))
                .collect::<BTreeMap<_, _>>(),
        ))
    }
}

/// A sorted set opened for a command.
pub enum ZVal {
    Packed(ZPacked),
    Big(ZBig),
}

impl ZVal {
    /// Open the sorted set whose record is `v`.
    pub fn open(c: &mut Ctx, v: &Val) -> daisy::Result<ZVal> {
        let p = c.payload(v)?;
        Ok(match v.enc {
            Enc::SkipList => {
                let (map, tree) = big_ids(&p).map_err(damaged)?;
                ZVal::Big(ZBig {
                    view: c.ks.map_view(c.tx, map.offset())?,
                    tree: c.ks.tree_view(c.tx, tree.offset())?,
                    fresh: false,
                })
            }
            _ => ZVal::Packed(ZPacked::from_payload(p).map_err(damaged)?),
        })
    }

    /// An empty sorted set of the encoding ZADD creates for a first member `first`.
    pub fn new_for(c: &mut Ctx, first: &[u8]) -> daisy::Result<ZVal> {
        let cfg = &c.sv.config;
        if cfg.zset_max_listpack_entries == 0 || cfg.zset_max_listpack_value < first.len() {
            Ok(ZVal::Big(ZBig::create(c)?))
        } else {
            Ok(ZVal::Packed(ZPacked::new()))
        }
    }

    /// A new sorted set of `elems` (distinct members, any order): packed when it has no more
    /// than `zset-max-listpack-entries` elements and, if `check_values`, no member longer
    /// than `zset-max-listpack-value` (what Redis ends with for a STORE destination, and for
    /// a RESTOREd listpack, whose members' lengths it does not look at); else big.
    pub fn create(c: &mut Ctx, elems: &[Elem], check_values: bool) -> daisy::Result<ZVal> {
        let cfg = &c.sv.config;
        let fits = elems.len() <= cfg.zset_max_listpack_entries
            && (!check_values
                || elems
                    .iter()
                    .all(|(m, _)| m.len() <= cfg.zset_max_listpack_value));
        if fits {
            let mut sorted: Vec<&Elem> = elems.iter().collect();
            sorted.sort_by(|a, b| score::cmp_entry((a.1, &a.0[..]), (b.1, &b.0[..])));
            let scores: Vec<[u8; 8]> = sorted
                .iter()
                .map(|(_, s)| index::packed_score(*s).to_le_bytes())
                .collect();
            let flat: Vec<&[u8]> = sorted
                .iter()
                .zip(&scores)
                .flat_map(|((m, _), s)| [&m[..], &s[..]])
                .collect();
            let z = ZPacked::from_payload(packed::encode(flat.into_iter())).map_err(damaged)?;
            return Ok(ZVal::Packed(z));
        }
        let mut b = ZBig::create(c)?;
        for (m, s) in elems {
            b.set(c.tx, m, *s)?;
        }
        Ok(ZVal::Big(b))
    }

    pub fn idx(&self) -> &dyn ZIndex {
        match self {
            ZVal::Packed(p) => p,
            ZVal::Big(b) => b,
        }
    }

    pub fn idx_mut(&mut self) -> &mut dyn ZIndex {
        match self {
            ZVal::Packed(p) => p,
            ZVal::Big(b) => b,
        }
    }

    pub fn is_packed(&self) -> bool {
        matches!(self, ZVal::Packed(_))
    }

    pub fn len(&self, c: &Ctx) -> daisy::Result<u64> {
        self.idx().len(c.tx)
    }

    /// Become big (a new map holding every element).
    pub fn convert_to_big(&mut self, c: &mut Ctx) -> daisy::Result<()> {
        if let ZVal::Packed(p) = self {
            let all = p.all(c.tx)?;
            let mut b = ZBig::create(c)?;
            for (m, s) in &all {
                b.set(c.tx, m, *s)?;
            }
            *self = ZVal::Big(b);
        }
        Ok(())
    }

    /// Add a member known to be absent (Redis's `zsetAdd` for a new element): a packed set
    /// becomes big first when the element would pass `zset-max-listpack-entries` or the
    /// member is longer than `zset-max-listpack-value`.
    pub fn add_new(&mut self, c: &mut Ctx, member: &[u8], score: f64) -> daisy::Result<()> {
        if let ZVal::Packed(p) = self {
            let cfg = &c.sv.config;
            if p.count() + 1 > cfg.zset_max_listpack_entries
                || member.len() > cfg.zset_max_listpack_value
            {
                self.convert_to_big(c)?;
            }
        }
        match self {
            // Known absent: no look-up of the member in the map.
            ZVal::Big(b) => b.set_found(c.tx, member, None, None, score)?,
            ZVal::Packed(p) => p.set(c.tx, member, score)?,
        };
        Ok(())
    }

    /// Write the set back under `key` after a change: a packed set rewrites its record, a new
    /// map gets its record, an empty set is deleted. `old` is the key's record before the
    /// command (None: the key is new, or was deleted first).
    pub fn store(self, c: &mut Ctx, key: &[u8], old: Option<&Val>) -> daisy::Result<()> {
        let db = c.db();
        let exp = old.and_then(|v| v.expire_ms);
        // A big set that only gained members in this command cannot be empty.
        let grew_only = matches!(&self, ZVal::Big(b) if !b.view.removed_any());
        if !grew_only && self.len(c)? == 0 {
            drop(self);
            if let Some(o) = old {
                c.ks.delete(c.tx, db, key, o)?;
                c.notify(crate::pubsub::N_GENERIC, "del", key);
            }
            return Ok(());
        }
        match self {
            ZVal::Packed(p) => {
                let hdr = Header::new(Type::ZSet, Enc::Packed).with_expire(exp);
                c.ks.put(c.tx, db, key, hdr, &[p.bytes()], old, false)?;
            }
            ZVal::Big(b) if b.fresh => {
                let p = payload_of(&b);
                c.ks.views.keep_map(c.tx, b.view);
                c.ks.views.keep_tree(c.tx, b.tree);
                let hdr = Header::new(Type::ZSet, Enc::SkipList).with_expire(exp);
                c.ks.put(c.tx, db, key, hdr, &[&p], old, false)?;
            }
            ZVal::Big(mut b) => {
                super::shrink_if_sparse(c, &mut b.view)?;
                c.ks.views.keep_map(c.tx, b.view);
                c.ks.views.keep_tree(c.tx, b.tree);
            }
        }
        c.touch(key);
        Ok(())
    }
}

/// The sorted set at `key` for reading (None when absent); Err after a WRONGTYPE reply.
pub fn open_read(c: &mut Ctx, key: &[u8]) -> daisy::Result<Result<Option<ZVal>, ()>> {
    match c.lookup_typed_read(key, Type::ZSet)? {
        Err(_) => {
            c.err(E_WRONGTYPE)?;
            Ok(Err(()))
        }
        Ok(None) => Ok(Ok(None)),
        Ok(Some(v)) => Ok(Ok(Some(ZVal::open(c, &v)?))),
    }
}

/// A copy of a big set's payload for another key (COPY): a new map and index with the same
/// elements.
pub fn copy_big(c: &mut Ctx, payload: &[u8]) -> daisy::Result<Vec<u8>> {
    let (map, tree) = big_ids(payload).map_err(damaged)?;
    let all = {
        let src = ZBig {
            view: c.ks.map_view(c.tx, map.offset())?,
            tree: c.ks.tree_view(c.tx, tree.offset())?,
            fresh: false,
        };
        src.all(c.tx)?
    };
    let mut b = ZBig::create(c)?;
    for (m, s) in &all {
        b.set(c.tx, m, *s)?;
    }
    Ok(payload_of(&b))
}

/// A sorted set's members in ascending order (SORT).
pub fn members(c: &mut Ctx, v: &Val) -> daisy::Result<Vec<Vec<u8>>> {
    let z = ZVal::open(c, v)?;
    Ok(z.idx().all(c.tx)?.into_iter().map(|(m, _)| m).collect())
}

/// The payload of a big set made by [`ZVal::create`] (RESTORE).
pub fn big_payload_of(b: &ZBig) -> Vec<u8> {
    payload_of(b)
}
