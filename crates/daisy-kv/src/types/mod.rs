//! Value types: one module per Redis type (Redis's t_string.c, t_hash.c, t_set.c, t_zset.c,
//! t_stream.c), each with
//! its persistent layout, its invariants and crash reasoning, and its commands; and the
//! [`DataType`] trait through which the rest of the server (the keyspace's checks, `daisy pool
//! check`, the test models) handles values without knowing their layouts.
//!
//! Encodings (the record header's encoding field, `keyspace::Enc`), as Redis's:
//! * strings: the bytes in the record;
//! * small collections packed into the record ([`packed`], Redis's listpack; a sorted set's
//!   kept in (score, member) order), and sets of integers sorted in the record ([`intset`]);
//! * large collections in a byte-string map of their own (`PBytesMap`, Redis's hashtable):
//!   the record's payload is the map's header offset (a big sorted set's map goes from member
//!   to score, and its payload has room for the offset of an ordered index: [`zset`]). A
//!   collection converts from a packed
//!   encoding to a table past the thresholds Redis uses (`hash-max-listpack-entries` and
//!   friends, the same defaults, settable with CONFIG SET) and never back, as in Redis.
//!
//! Crash reasoning common to every type: a command changes a value inside the server's
//! transaction, either by writing a new record (a packed value is rewritten whole: the new
//! record is a fresh object, the old one freed in the same transaction) or by changing the
//! value's own map through a transaction-scoped view (`PBytesMap::view`); a conversion
//! creates the map, fills it and rewrites the record in one transaction. So a crash leaves
//! each command whole or absent, and a value never half-converted.

pub mod bitops;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod intset;
pub mod list;
pub mod packed;
pub mod set;
pub mod stream;
pub mod string;
pub mod zset;

use crate::keyspace::Enc;
use daisy::{PBytesMap, PPtr, Pool};
use std::collections::{BTreeMap, BTreeSet};

/// (field, value) or (key, value) pairs, in order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// A value's type (the record header's type field; the numbers are Redis's `OBJ_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    String = 0,
    List = 1,
    Set = 2,
    ZSet = 3,
    Hash = 4,
    Stream = 6,
}

impl Type {
    pub fn from_bits(b: u8) -> Option<Type> {
        Some(match b {
            0 => Type::String,
            1 => Type::List,
            2 => Type::Set,
            3 => Type::ZSet,
            4 => Type::Hash,
            6 => Type::Stream,
            _ => return None,
        })
    }

    /// The name TYPE replies with.
    pub fn name(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::List => "list",
            Type::Set => "set",
            Type::ZSet => "zset",
            Type::Hash => "hash",
            Type::Stream => "stream",
        }
    }

    /// The type named `n` (SCAN's TYPE option), if this server has it.
    pub fn by_name(n: &[u8]) -> Option<Type> {
        [
            Type::String,
            Type::List,
            Type::Set,
            Type::ZSet,
            Type::Hash,
            Type::Stream,
        ]
        .into_iter()
        .find(|t| t.name().as_bytes().eq_ignore_ascii_case(n))
    }
}

/// Whether a record may have type `ty` with encoding `enc`.
pub fn valid_encoding(ty: Type, enc: Enc) -> bool {
    matches!(
        (ty, enc),
        (Type::String, Enc::Auto | Enc::Raw | Enc::Embstr | Enc::Int)
            | (Type::Hash, Enc::Packed | Enc::Table)
            | (Type::List, Enc::Packed | Enc::Seq)
            | (Type::Set, Enc::Packed | Enc::IntSet | Enc::Table)
            | (Type::ZSet, Enc::Packed | Enc::SkipList)
            | (Type::Stream, Enc::Stream)
    )
}

/// A value as the tests' models see it (no encoding).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    Set(BTreeSet<Vec<u8>>),
    /// member -> score
    ZSet(BTreeMap<Vec<u8>, Score>),
    Stream(Box<stream::StreamValue>),
}

/// A sorted set's score in a [`Value`]: equal when the same bits (so -0 differs from 0),
/// ordered by `f64::total_cmp`.
#[derive(Clone, Copy, Debug)]
pub struct Score(pub f64);

impl PartialEq for Score {
    fn eq(&self, o: &Score) -> bool {
        self.0.to_bits() == o.0.to_bits()
    }
}

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, o: &Score) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Score {
    fn cmp(&self, o: &Score) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// What the server needs of every type, whatever its layout. `payload` is the record's
/// payload (after the header).
pub trait DataType: Sync {
    /// Objects the value owns besides its record (the reachability check of `pool check`).
    fn owned(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Result<Vec<u64>, String>;
    /// The value's invariants that do not hold (empty when sound).
    fn check(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Vec<String>;
    /// The value, read-only (for models and checkers).
    fn dump(&self, pool: &Pool, enc: Enc, payload: &[u8]) -> Result<Value, String>;
}

/// The type module of `ty`.
pub fn of(ty: Type) -> &'static dyn DataType {
    match ty {
        Type::String => &string::Strings,
        Type::Hash => &hash::Hashes,
        Type::Set => &set::Sets,
        Type::List => &list::Lists,
        Type::ZSet => &zset::ZSets,
        Type::Stream => &stream::Streams,
    }
}

/// A sorted set's members in score order (SORT).
pub fn zset_members(
    c: &mut crate::commands::Ctx,
    v: &crate::keyspace::Val,
) -> daisy::Result<Vec<Vec<u8>>> {
    zset::members(c, v)
}

/// The map a table-encoded payload names.
pub fn table_id(payload: &[u8]) -> Result<PPtr<PBytesMap>, String> {
    let w: [u8; 8] = payload
        .try_into()
        .map_err(|_| format!("table payload of {} bytes (want 8)", payload.len()))?;
    Ok(PPtr::from_offset(u64::from_le_bytes(w)))
}

/// Objects of the table a payload names.
fn table_owned(pool: &Pool, payload: &[u8]) -> Result<Vec<u64>, String> {
    daisy::map_objects(pool, table_id(payload)?.offset()).map_err(|e| e.to_string())
}

/// Every (field, value) of the table a payload names, and the map's own problems.
fn table_entries(pool: &Pool, payload: &[u8]) -> Result<(Pairs, Vec<String>), String> {
    let m = PBytesMap::open(pool, table_id(payload)?).map_err(|e| e.to_string())?;
    let problems = m.check().problems;
    let mut out = Vec::new();
    for e in m.iter().map_err(|e| e.to_string())? {
        out.push(e.map_err(|e| e.to_string())?);
    }
    Ok((out, problems))
}

// ---- helpers the collection types share ------------------------------------------------------

/// A new table (a `PBytesMap` in the command's transaction) holding `items`, through a view.
pub fn create_table<'i>(
    c: &mut crate::commands::Ctx,
    items: impl Iterator<Item = (&'i [u8], &'i [u8])>,
) -> daisy::Result<daisy::BytesMapView> {
    let id = PBytesMap::create_in(c.tx)?;
    let mut view = PBytesMap::view(c.ks.pool(), c.tx, id)?;
    for (k, v) in items {
        view.insert(c.tx, k, v)?;
    }
    Ok(view)
}

/// Every (key, value) of a table, in its hash order.
pub fn table_all(c: &crate::commands::Ctx, view: &daisy::BytesMapView) -> daisy::Result<Pairs> {
    let (_, out) = table_scan_all(c, view, 0, usize::MAX)?;
    Ok(out)
}

/// One cursor step over a table: about `count` entries and the next cursor (0: done).
pub fn table_scan(
    c: &crate::commands::Ctx,
    view: &daisy::BytesMapView,
    cursor: u64,
    count: usize,
) -> daisy::Result<(u64, Pairs)> {
    table_scan_all(c, view, cursor, count)
}

fn table_scan_all(
    c: &crate::commands::Ctx,
    view: &daisy::BytesMapView,
    mut cursor: u64,
    count: usize,
) -> daisy::Result<(u64, Pairs)> {
    let mut found = Vec::new();
    let mut out = Vec::new();
    loop {
        found.clear();
        cursor = view.scan(c.tx, cursor, count.min(1 << 16), &mut found)?;
        for (k, e) in found.drain(..) {
            let mut v = vec![0u8; e.value_len()];
            view.read_value(c.tx, &e, 0, &mut v)?;
            out.push((k, v));
        }
        if cursor == 0 || out.len() >= count {
            return Ok((cursor, out));
        }
    }
}

/// A SCAN-family cursor (Redis: an unsigned number, else "invalid cursor"); None after the
/// error reply.
pub fn parse_cursor(c: &mut crate::commands::Ctx, arg: &[u8]) -> daisy::Result<Option<u64>> {
    match std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(n) => Ok(Some(n)),
        None => {
            c.err("ERR invalid cursor")?;
            Ok(None)
        }
    }
}

/// The reply of HSCAN/SSCAN for a missing key (Redis's `shared.emptyscan`).
pub fn empty_scan(c: &mut crate::commands::Ctx) -> daisy::Result<()> {
    crate::resp::array(c.out, 2);
    crate::resp::bulk(c.out, b"0");
    crate::resp::array(c.out, 0);
    Ok(())
}

/// MATCH, COUNT (and, for SCAN, TYPE) options of the SCAN family.
pub struct ScanOpts {
    pub pattern: Option<Vec<u8>>,
    pub count: usize,
    pub ty: Option<Vec<u8>>,
}

impl ScanOpts {
    /// Parse from `a[from..]` (Redis's `scanGenericCommand`); None after an error reply.
    /// TYPE is accepted only when `from` is 2 (SCAN itself).
    pub fn parse(
        c: &mut crate::commands::Ctx,
        a: &[&[u8]],
        from: usize,
    ) -> daisy::Result<Option<ScanOpts>> {
        let mut o = ScanOpts {
            pattern: None,
            count: 10,
            ty: None,
        };
        let mut i = from;
        while i < a.len() {
            let more = a.len() - i;
            let opt = a[i].to_ascii_lowercase();
            if opt == b"count" && more >= 2 {
                match crate::commands::parse_i64(a[i + 1]) {
                    Some(n) if n >= 1 => o.count = n as usize,
                    Some(_) => {
                        c.err(crate::commands::E_SYNTAX)?;
                        return Ok(None);
                    }
                    None => {
                        c.err(crate::commands::E_INT)?;
                        return Ok(None);
                    }
                }
            } else if opt == b"match" && more >= 2 {
                o.pattern = (a[i + 1] != b"*").then(|| a[i + 1].to_vec());
            } else if opt == b"type" && from == 2 && more >= 2 {
                o.ty = Some(a[i + 1].to_vec());
            } else {
                c.err(crate::commands::E_SYNTAX)?;
                return Ok(None);
            }
            i += 2;
        }
        Ok(Some(o))
    }

    pub fn matches(&self, item: &[u8]) -> bool {
        self.pattern
            .as_ref()
            .is_none_or(|p| crate::glob::matches(p, item))
    }
}

/// A table whose entries fill less than 1/[`SPARSE_FILL`] of the slots its directory addresses
/// is rebuilt smaller (Redis shrinks a dict under 10% fill; Daisy's tables never shrink in
/// place, and a sparse one makes random picks and scans walk empty buckets).
pub const SPARSE_FILL: u64 = 10;

/// Segments a shrink may free in one command (their frees fit the redo record with room to
/// spare); a bigger sparse table keeps its size until a later removal finds it smaller.
const SHRINK_MAX_SEGMENTS: usize = 4096;

/// After removals from a table: rebuild it at the size its entries need when it has become
/// sparse (fewer entries than 1/[`SPARSE_FILL`] of the slots its directory addresses), in the
/// command's transaction (`BytesMapView::shrink`: the entries' slots move into new segments,
/// nothing is copied per entry). Amortized O(1) per removal: a shrink costs the old table's
/// segments, and at least most of its entries were removed since it was that big.
pub fn shrink_if_sparse(
    c: &mut crate::commands::Ctx,
    view: &mut daisy::BytesMapView,
) -> daisy::Result<()> {
    if !view.removed_any() {
        // Inserts alone never make a table sparser: skip the header reads.
        return Ok(());
    }
    let len = view.len(c.tx)?;
    let cap = view.capacity(c.tx)?;
    // One segment (1024 slots) is as small as a table gets.
    if cap > 1024 && len > 0 && len * SPARSE_FILL < cap {
        view.shrink(c.tx, SHRINK_MAX_SEGMENTS)?;
    }
    Ok(())
}

/// A copy of a value's payload for another key (COPY): a table (or a big sorted set's map) is
/// copied into a new one, everything else is the same bytes.
pub fn copy_payload(
    c: &mut crate::commands::Ctx,
    enc: Enc,
    payload: &[u8],
) -> daisy::Result<Vec<u8>> {
    if enc == Enc::SkipList {
        return zset::copy_big(c, payload);
    }
    if enc == Enc::Stream {
        return stream::copy(c, payload);
    }
    if enc == Enc::Seq {
        let src = list::seq_view(c, payload)?;
        let n = src.len(c.tx)?;
        let items = if n == 0 {
            Vec::new()
        } else {
            src.range(c.tx, 0, n as i64 - 1, false)?
        };
        drop(src);
        let id = daisy::PSeq::create_in(c.tx)?;
        let mut view = daisy::PSeq::view(c.ks.pool(), c.tx, id)?;
        let refs: Vec<&[u8]> = items.iter().map(|i| &i[..]).collect();
        view.push_back_many(c.tx, &refs)?;
        return Ok(id.offset().to_le_bytes().to_vec());
    }
    if enc != Enc::Table {
        return Ok(payload.to_vec());
    }
    let id = table_id(payload).map_err(daisy::Error::Unsupported)?;
    let src = c.ks.map_view(c.tx, id.offset())?;
    let items = table_all(c, &src)?;
    drop(src);
    let view = create_table(c, items.iter().map(|(k, v)| (&k[..], &v[..])))?;
    Ok(view.id().offset().to_le_bytes().to_vec())
}
