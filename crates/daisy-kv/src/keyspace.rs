//! The keyspace (Redis's db.c): databases of keys in a pool, each key's *value record*, lookup
//! with lazy expiry, delete, rename, scan, the type check, the queue of collections being
//! freed (lazyfree), and the keys clients WATCH.
//!
//! Format (docs/FORMAT.md section 8b, keyspace format version [`KV_VERSION`]):
//! * the pool's root object is a [`KvRoot`] naming a [`KvMeta`];
//! * `KvMeta` holds the databases (an array of [`DbEntry`]: a byte-string map per database,
//!   0 while the database has never been written or since it was flushed, and its count of keys
//!   with an expiry time) and the lazyfree queue;
//! * each database map's values are value records: a [`Header`] (type, encoding, expiry
//!   time) and the payload, whose layout the value's type module defines (`types`).
//!
//! Crash reasoning: every change of a key (its record, the database's `expires` count, a
//! collection queued for freeing) is made inside the caller's transaction, so a crash leaves
//! each command whole or absent. A collection too large to free inside a command is unlinked
//! and queued in the same transaction, then freed in bounded transactions by
//! [`Keyspace::lazyfree_step`]; the queue is persistent, so freeing resumes after a restart.
//!
//! DRAM state kept here (never persistent): a handle per database map, the expired-keys
//! counter, and the WATCH registry. After a transaction that failed, [`Keyspace::resync`]
//! brings the handles back to what the pool holds.

use crate::types::{self, Type};
use bytemuck::{Pod, Zeroable};
use daisy::{EntryRef, Error, PBytesMap, PPtr, PTreeMap, Pool, Tx, Upsert};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// Redo-log bytes a transaction must have left for a read to remove an expired key it meets
/// (a removal logs a few words; the margin leaves room for the command's own writes).
pub const LAZY_EXPIRY_MIN_ROOM: usize = 16 * 1024;

/// Pool layout name of a KV server's pool.
pub const LAYOUT: &str = "daisy.kv";
pub const KV_MAGIC: u64 = u64::from_le_bytes(*b"DAISYKV\0");
/// Keyspace format version: 5. Version 2 added databases, types and lazyfree; version 3 lists
/// and sorted sets (their records, encodings and lazyfree kinds: lists' `Seq` (8), sorted
/// sets' type 3 with `Packed` and `SkipList` (7), lazyfree kinds `Seq` and `Tree`); version 4
/// scripting's maps (`KvMeta::reserved`); version 5 streams (type 6 with encoding `Stream`
/// (9), lazyfree kinds `Stream` and `StreamGroup`). Versions 1 to 4 are read and upgraded at
/// open; a build that knows only an older version would take a newer record for damage, so
/// the version refuses this pool to it instead.
pub const KV_VERSION: u32 = 5;
const KV_VERSION_1: u32 = 1;
const KV_VERSION_2: u32 = 2;
const KV_VERSION_4: u32 = 4;
/// `KvMeta::reserved` words that name scripting's maps (version 4): the script cache (SHA-1
/// in hex -> body) and the function libraries (name -> code).
pub const SCRIPTS_SLOT: usize = 0;
pub const FUNCTIONS_SLOT: usize = 1;
/// Most databases a pool may have (Redis allows any positive int; more than this is surely a
/// typo, and each costs 16 bytes of pool even when unused).
pub const MAX_DATABASES: usize = 1 << 16;
/// Collections of at most this many elements are freed inside the command that deletes them;
/// larger ones are queued (Redis's LAZYFREE_THRESHOLD).
pub const LAZYFREE_THRESHOLD: u64 = 64;
/// Queue slots kept inside [`KvMeta`]: queuing a collection there needs no allocation, so a
/// FLUSHALL of a completely full pool works. More go to overflow nodes.
pub const LAZY_INLINE: usize = 28;
/// Queue slots per overflow node.
const LAZY_NODE_SLOTS: usize = 31;

/// The pool's root object (32 bytes in every version; version 1 used the two words as the
/// map offset and the expires count).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct KvRoot {
    pub magic: u64,
    pub version: u32,
    pub _pad: u32,
    /// Version 2: offset of the [`KvMeta`]. (Version 1: the map.)
    pub meta: u64,
    /// Version 2: 0. (Version 1: the expires count.)
    pub word2: u64,
}

/// The keyspace's metadata.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct KvMeta {
    /// Entries of the `dbs` array.
    pub ndb: u64,
    /// Offset of `[DbEntry; ndb]`.
    pub dbs: u64,
    /// Collections queued for freeing (INFO's `lazyfree_pending_objects`).
    pub lazy_count: u64,
    /// First overflow node of the queue (0: none).
    pub lazy_overflow: u64,
    /// Queue slots: 0 free, else a [`LazyItem`] word.
    pub lazy_slots: [u64; LAZY_INLINE],
    /// Version 4: `reserved[SCRIPTS_SLOT]` and `reserved[FUNCTIONS_SLOT]` are the offsets of
    /// scripting's byte-string maps (0: none yet). The rest are zero; room for later versions.
    pub reserved: [u64; 8],
}

/// A database.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, Default, PartialEq, Eq)]
pub struct DbEntry {
    /// Offset of the database's byte-string map header; 0 for an empty database.
    pub map: u64,
    /// Keys of this database whose record carries an expiry time.
    pub expires: u64,
}

/// An overflow node of the lazyfree queue.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
struct LazyNode {
    next: u64,
    slots: [u64; LAZY_NODE_SLOTS],
}

/// What a queued object is, in the top byte of its queue word (offsets are below 2^56).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LazyKind {
    /// A byte-string map whose values own nothing (a hash's or set's table, a big sorted
    /// set's map).
    Table = 1,
    /// A database's map: its values are records that may own collections.
    Database = 2,
    /// A big list's sequence (`daisy::PSeq`).
    Seq = 3,
    /// A big sorted set's ordered index (a `PTreeMap`; the set's map is queued beside it as a
    /// `Table`), freed in bounded steps by `PTreeMap::free_step`.
    Tree = 4,
    /// A stream's meta, with everything it owns (`types::stream::free_step`).
    Stream = 5,
    /// A consumer group unlinked from its stream (XGROUP DESTROY), with its maps and
    /// consumers (`types::stream::group::free_step`).
    StreamGroup = 6,
}

/// A queue word: kind and offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LazyItem {
    pub kind: LazyKind,
    pub off: u64,
}

impl LazyItem {
    fn word(self) -> u64 {
        (self.kind as u64) << 56 | self.off
    }
    fn from_word(w: u64) -> Option<LazyItem> {
        let off = w & ((1 << 56) - 1);
        let kind = match w >> 56 {
            1 => LazyKind::Table,
            2 => LazyKind::Database,
            3 => LazyKind::Seq,
            4 => LazyKind::Tree,
            5 => LazyKind::Stream,
            6 => LazyKind::StreamGroup,
            _ => return None,
        };
        Some(LazyItem { kind, off })
    }
}

// ---- value records -----------------------------------------------------------------------

/// Flags byte: bit 0, an expiry time follows; bits 1-3, the type; bits 4-7, the encoding.
const F_EXPIRE: u8 = 1;

/// How a value is stored (the type module says what the payload is for each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enc {
    /// Strings: the bytes; OBJECT ENCODING tells int/embstr/raw as Redis's
    /// `tryObjectEncoding` would for a freshly set value.
    Auto = 0,
    /// Strings changed in place (APPEND, SETRANGE): Redis reports them `raw`.
    Raw = 1,
    /// Small collections packed into the record (Redis's listpack).
    Packed = 2,
    /// Sets of integers, sorted (Redis's intset).
    IntSet = 3,
    /// A byte-string map of its own; the payload is its header offset (Redis's hashtable).
    Table = 4,
    /// Strings created as they are, never integer-encoded (INCRBYFLOAT's result, Redis's
    /// `createStringObject`): OBJECT ENCODING `embstr` up to 44 bytes, else `raw`.
    Embstr = 5,
    /// Integer strings that are not shared (COPY's copy of an integer, Redis's
    /// `dupStringObject`): OBJECT ENCODING `int`, REFCOUNT 1.
    Int = 6,
    /// Big sorted sets (Redis's skiplist): the payload is the offset of a byte-string map
    /// (member -> score, 8 bytes) then the offset of an ordered index (a `PTreeMap` keyed by
    /// score and member), both owned by the record (`types::zset`).
    SkipList = 7,
    /// Big lists: a sequence of their own (`daisy::PSeq`, Redis's quicklist); the payload is
    /// its header offset.
    Seq = 8,
    /// Streams: the payload is the offset of the stream's meta (`types::stream`), which owns
    /// its nodes and consumer groups.
    Stream = 9,
}

impl Enc {
    fn from_bits(b: u8) -> Option<Enc> {
        Some(match b {
            0 => Enc::Auto,
            1 => Enc::Raw,
            2 => Enc::Packed,
            3 => Enc::IntSet,
            4 => Enc::Table,
            5 => Enc::Embstr,
            6 => Enc::Int,
            7 => Enc::SkipList,
            8 => Enc::Seq,
            9 => Enc::Stream,
            _ => return None,
        })
    }
}

/// A value record's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub ty: Type,
    pub enc: Enc,
    pub expire_ms: Option<i64>,
}

impl Header {
    /// A header without an expiry time.
    pub fn new(ty: Type, enc: Enc) -> Header {
        Header {
            ty,
            enc,
            expire_ms: None,
        }
    }

    /// The encoded header into `buf` (1 or 9 bytes); returns its bytes.
    pub fn encode(self, buf: &mut [u8; 9]) -> &[u8] {
        buf[0] = (self.ty as u8) << 1 | (self.enc as u8) << 4;
        match self.expire_ms {
            Some(t) => {
                buf[0] |= F_EXPIRE;
                buf[1..].copy_from_slice(&t.to_le_bytes());
                &buf[..]
            }
            None => &buf[..1],
        }
    }

    /// Decode the header at the start of `rec` (at least its first 9 bytes, or all of a
    /// shorter record): the header and its length, or what is wrong.
    pub fn decode(rec: &[u8]) -> Result<(Header, usize), String> {
        let Some(&f) = rec.first() else {
            return Err("empty value record".into());
        };
        let ty =
            Type::from_bits((f >> 1) & 7).ok_or_else(|| format!("unknown type in flags {f:#x}"))?;
        let enc =
            Enc::from_bits(f >> 4).ok_or_else(|| format!("unknown encoding in flags {f:#x}"))?;
        if !types::valid_encoding(ty, enc) {
            return Err(format!("type {} cannot have encoding {enc:?}", ty.name()));
        }
        if f & F_EXPIRE != 0 {
            let Some(t) = rec.get(1..9) else {
                return Err("record too short for its expiry time".into());
            };
            let t = i64::from_le_bytes(t.try_into().unwrap());
            Ok((
                Header {
                    ty,
                    enc,
                    expire_ms: Some(t),
                },
                9,
            ))
        } else {
            Ok((
                Header {
                    ty,
                    enc,
                    expire_ms: None,
                },
                1,
            ))
        }
    }
}

/// A key's value as found: where it is, its header, and its payload's extent.
#[derive(Clone, Copy, Debug)]
pub struct Val {
    pub entry: EntryRef,
    pub ty: Type,
    pub enc: Enc,
    pub expire_ms: Option<i64>,
    /// Payload start inside the record.
    pub off: usize,
    pub len: usize,
}

impl Val {
    pub fn header(&self) -> Header {
        Header {
            ty: self.ty,
            enc: self.enc,
            expire_ms: self.expire_ms,
        }
    }
}

fn damaged(why: String) -> Error {
    Error::Unsupported(format!(
        "damaged value record: {why} (run `daisy pool check`)"
    ))
}

fn decode_val(tx: &Tx, e: EntryRef) -> daisy::Result<Val> {
    let mut h = [0u8; 9];
    let n = e.value_len().min(9);
    e.read_tx(tx, 0, &mut h[..n])?;
    let (hd, at) = Header::decode(&h[..n]).map_err(damaged)?;
    Ok(Val {
        entry: e,
        ty: hd.ty,
        enc: hd.enc,
        expire_ms: hd.expire_ms,
        off: at,
        len: e.value_len() - at,
    })
}

/// SET's options.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetOpts {
    pub nx: bool,
    pub xx: bool,
    /// Return the old value.
    pub get: bool,
    pub keepttl: bool,
    /// Absolute expiry time (ms).
    pub expire: Option<i64>,
}

/// What SET did.
#[derive(Debug, Default)]
pub struct SetOutcome {
    pub written: bool,
    /// The old live value, when asked for with `get` (a string).
    pub old: Option<Vec<u8>>,
    /// `get` was asked and the old value is not a string: nothing was written.
    pub wrong_type: bool,
}

// ---- WATCH -------------------------------------------------------------------------------

/// Clients watching a key, each with whether the key was already expired when it watched.
type Watchers = Vec<(u64, bool)>;

/// The keys clients WATCH (Redis's `watched_keys`), and the clients whose watched keys were
/// touched since. DRAM only: a restart ends every connection, and with it every WATCH.
#[derive(Default)]
pub struct Watches {
    /// (database, key) -> clients watching it, with whether the key was already expired when
    /// each watched it (Redis 7: such a key expiring does not fail the EXEC).
    keys: HashMap<(u32, Vec<u8>), Watchers>,
    /// Client -> its watched keys.
    by_client: HashMap<u64, Vec<(u32, Vec<u8>)>>,
    /// Clients whose EXEC must fail.
    dirty: HashSet<u64>,
    /// Clients made dirty in the current transaction (undone if it fails).
    dirty_undo: Vec<u64>,
}

impl Watches {
    pub fn watch(&mut self, client: u64, db: u32, key: &[u8], expired: bool) {
        let list = self.by_client.entry(client).or_default();
        if list.iter().any(|(d, k)| *d == db && k == key) {
            return;
        }
        list.push((db, key.to_vec()));
        self.keys
            .entry((db, key.to_vec()))
            .or_default()
            .push((client, expired));
    }

    /// Forget everything `client` watches (UNWATCH, EXEC, DISCARD, disconnect).
    pub fn unwatch_all(&mut self, client: u64) {
        if let Some(list) = self.by_client.remove(&client) {
            for k in list {
                if let Some(v) = self.keys.get_mut(&k) {
                    v.retain(|(c, _)| *c != client);
                    if v.is_empty() {
                        self.keys.remove(&k);
                    }
                }
            }
        }
        self.dirty.remove(&client);
    }

    pub fn is_dirty(&self, client: u64) -> bool {
        self.dirty.contains(&client)
    }

    /// The keys `client` watches.
    pub fn watched_by(&self, client: u64) -> &[(u32, Vec<u8>)] {
        self.by_client.get(&client).map_or(&[], |v| &v[..])
    }

    /// Whether `client` watched `key` when it was already expired.
    pub fn watched_expired(&self, client: u64, db: u32, key: &[u8]) -> bool {
        self.keys
            .get(&(db, key.to_vec()))
            .and_then(|v| v.iter().find(|(c, _)| *c == client))
            .is_some_and(|(_, e)| *e)
    }

    /// Mark `client` dirty (an EXEC-time check found a watched key expired).
    pub fn mark_dirty(&mut self, client: u64) {
        if self.dirty.insert(client) {
            self.dirty_undo.push(client);
        }
    }

    /// Every watched key of `db` (FLUSHDB, SWAPDB touch those that exist).
    fn keys_of(&self, db: u32) -> Vec<Vec<u8>> {
        self.keys
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// The current transaction committed: its touches stand.
    pub fn commit(&mut self) {
        self.dirty_undo.clear();
    }

    /// The current transaction failed: its touches are undone.
    pub fn rollback(&mut self) {
        for c in self.dirty_undo.drain(..) {
            self.dirty.remove(&c);
        }
    }
}

// ---- the keyspace ------------------------------------------------------------------------

/// The record the last [`Keyspace::peek`] found, for the next peek of the same key in the same
/// transaction. Why: a round's commands often take one key after another (a queue's LPUSHes, a
/// set's SADDs, a counter's INCRs), and each lookup hashed the key, probed the map and
/// compared the key through the transaction's read-your-writes overlay for the record the
/// lookup before had found (a tenth of an LPUSH in a group commit).
///
/// Why it is right: a record found by transaction `serial` stays where it is, with the same
/// header and length, until the key's map changes. Every change of a database's map goes
/// through [`Keyspace::map_mut`] (inserts, rewrites), [`Keyspace::unlink`] (removals),
/// `flush_db`, `swap_db` or `resync`, and each of them forgets the record, as do the end of
/// the transaction (`committed`, `resync`) and a write into a record's payload
/// (`patch_payload`, which keeps its place and length, forgotten anyway). A record of another
/// transaction is never used (`serial`). Only a found record is kept (an absent key is looked
/// up again: its next write creates it).
#[derive(Default)]
struct Found {
    /// [`Tx::serial`] of the transaction that found it; 0: nothing kept (serials of lane 0
    /// start at 1).
    serial: u64,
    db: usize,
    key: Vec<u8>,
    val: Option<Val>,
}

/// The keyspace of a pool, opened by [`Keyspace::open`].
pub struct Keyspace {
    pool: Pool,
    meta: PPtr<KvMeta>,
    /// Offset of the `[DbEntry]` array and its length (fixed while the server runs).
    dbs_off: u64,
    ndb: usize,
    /// A handle per database map (None: the database has no map).
    maps: Vec<Option<PBytesMap>>,
    /// Keys removed because their time passed (INFO stats).
    pub expired_keys: u64,
    /// CLIENT PAUSE holds writes: a key whose time passed reads as missing but is not
    /// removed (Redis's `expireIfNeeded` during a pause).
    pub expire_paused: bool,
    /// Collections freed by lazyfree since start (INFO `lazyfreed_objects`).
    pub lazyfreed_objects: u64,
    /// Clients' WATCHed keys.
    pub watches: Watches,
    /// The last key [`Keyspace::prefetch_member`] looked up: (database, key, its table or 0).
    member_memo: std::cell::RefCell<(usize, Vec<u8>, u64)>,
    /// The record the last [`Keyspace::peek`] found (see [`Found`]).
    found: std::cell::RefCell<Found>,
    /// Keys that blocked clients wait on, and in which databases (kept by the event loop).
    pub blocking: std::collections::HashMap<Vec<u8>, Vec<usize>>,
    /// Keys that got a list or a sorted set while clients wait on them (Redis's
    /// `signalKeyAsReady`), in the order they got it: the event loop serves those clients
    /// after the command.
    pub ready: Vec<(usize, Vec<u8>)>,
    /// Keyspace notifications wanted for keys that expire (class `x`) and keys created
    /// (class `n`): set by the event loop from `notify-keyspace-events`; while off, nothing
    /// is noted.
    pub note_expired: bool,
    pub note_new: bool,
    /// What happened to keys in the running command, for the notifications
    /// (`pubsub::flush_key_events`): (event, database, key).
    pub events: Vec<(KeyEvent, usize, Vec<u8>)>,
    /// Some client tracks keys (client-side caching, `tracking`): every key touched is noted
    /// in `touched` (with whether an expiry removed it), for the invalidations. Set by the
    /// commands that turn tracking on and off; while false, nothing is noted.
    pub track: bool,
    pub touched: Vec<(Vec<u8>, bool)>,
    /// Keys changed by commands since start (Redis's `server.dirty`, INFO's
    /// rdb_changes_since_last_save once the last backup's share is taken off): one per key a
    /// write command touched (`touch`), so a command counts the keys it changed.
    pub dirty: u64,
    /// When each key was last accessed (OBJECT IDLETIME; DRAM only, `access`).
    pub clock: crate::access::AccessClock,
    /// Views of collections the transaction's commands gave back for the next ones (emptied
    /// at the end of every transaction: `committed`, `resync`; module `views`).
    pub views: crate::views::ViewCache,
    /// Where stream reads of the transaction left off inside nodes (valid in their
    /// transaction only; module `types::stream::seek`).
    pub stream_seek: crate::types::stream::seek::SeekHints,
    /// A payload buffer given back once its command stored it (`recycle_payload`), for the
    /// next [`Keyspace::payload`]: a small collection's blob is read whole by every command
    /// on it, and a fresh allocation of a kilobyte or more each time showed in profiles
    /// (glibc consolidates its free lists on every such request).
    spare_payload: std::cell::Cell<Vec<u8>>,
}

/// A key event the keyspace notes for keyspace notifications.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEvent {
    /// Removed because its time passed (lazily or by active expiry).
    Expired,
    /// Created (Redis's `dbAdd`).
    New,
}

fn map_of(id: u64) -> PPtr<PBytesMap> {
    PPtr::from_offset(id)
}

impl Keyspace {
    /// Note that `key` of database `db` got a list or sorted set, if clients wait on it.
    pub fn signal_ready(&mut self, db: usize, key: &[u8]) {
        if self.blocking.get(key).is_some_and(|dbs| dbs.contains(&db))
            && !self.ready.iter().any(|(d, k)| *d == db && k == key)
        {
            self.ready.push((db, key.to_vec()));
        }
    }

    /// Reach (or, in a new pool, create) the keyspace, with at least `databases` databases.
    /// Refuses a pool whose root is some other program's, a keyspace format this build does
    /// not know, and fewer databases than the pool holds data in. A version-1 keyspace is
    /// upgraded (one transaction).
    pub fn open(pool: &Pool, databases: usize) -> Result<Keyspace, String> {
        let path = pool.path().display().to_string();
        let what = |e: Error| format!("{path}: {e}");
        if databases == 0 || databases > MAX_DATABASES {
            return Err(format!(
                "databases must be between 1 and {MAX_DATABASES} (got {databases})"
            ));
        }
        let root = pool
            .root::<KvRoot>()
            .map_err(|e| format!("{path}: not a daisy serve pool ({e}); use another --pool"))?;
        let r = pool.read(root);
        if r.magic == 0 && r.meta == 0 && r.word2 == 0 {
            pool.transaction(|tx| {
                // Database 0's table exists from the start, as Redis's dicts exist from
                // initServer: an emptied server then holds the same table it started with,
                // and INFO's used_memory returns to its starting figure after a big key is
                // freed (Redis's lazyfree test compares against twice the start).
                let db0 = DbEntry {
                    map: PBytesMap::create_in(tx)?.offset(),
                    expires: 0,
                };
                let meta = Self::create_meta(tx, databases, db0)?;
                tx.write(
                    root,
                    &KvRoot {
                        magic: KV_MAGIC,
                        version: KV_VERSION,
                        _pad: 0,
                        meta,
                        word2: 0,
                    },
                )
            })
            .map_err(what)?;
        } else if r.magic != KV_MAGIC {
            return Err(format!(
                "{path}: the pool's root is not a daisy serve keyspace"
            ));
        } else if r.version == KV_VERSION_1 {
            // Upgrade: database 0 is the old map, with its expires count.
            pool.transaction(|tx| {
                let db0 = DbEntry {
                    map: r.meta,
                    expires: r.word2,
                };
                let meta = Self::create_meta(tx, databases, db0)?;
                tx.write(
                    root,
                    &KvRoot {
                        magic: KV_MAGIC,
                        version: KV_VERSION,
                        _pad: 0,
                        meta,
                        word2: 0,
                    },
                )
            })
            .map_err(what)?;
        } else if (KV_VERSION_2..=KV_VERSION_4).contains(&r.version) {
            // Version 2 is version 3 without lists and sorted sets, version 3 is version 4
            // without scripts (its reserved words are zero), version 4 is version 5 without
            // streams: only the number changes.
            pool.transaction(|tx| tx.update(root, |r| r.version = KV_VERSION))
                .map_err(what)?;
        } else if r.version != KV_VERSION {
            return Err(format!(
                "{path}: keyspace format version {} (this build reads {KV_VERSION_1} to {KV_VERSION})",
                r.version
            ));
        }
        let r = pool.read(root);
        let meta = PPtr::<KvMeta>::from_offset(r.meta);
        let m = pool.try_read(meta).map_err(what)?;
        if m.ndb == 0 || m.ndb > MAX_DATABASES as u64 {
            return Err(format!("{path}: damaged keyspace ({} databases)", m.ndb));
        }
        let mut dbs = read_dbs(pool, &m).map_err(what)?;
        if dbs.len() < databases {
            // More databases asked for: a longer array, copied, in one transaction.
            pool.transaction(|tx| {
                let mut grown = dbs.clone();
                grown.resize(databases, DbEntry::default());
                let arr = tx.alloc_bytes(bytemuck::cast_slice(&grown))?;
                tx.free(PPtr::<u8>::from_offset(m.dbs))?;
                tx.update(meta, |mm| {
                    mm.dbs = arr.offset();
                    mm.ndb = databases as u64;
                })
            })
            .map_err(what)?;
            dbs.resize(databases, DbEntry::default());
        } else if let Some(i) = (databases..dbs.len()).find(|&i| dbs[i].map != 0) {
            return Err(format!(
                "{path}: the pool holds database {i}; start with --databases {} or more",
                i + 1
            ));
        }
        let m = pool.read(meta);
        let mut maps = Vec::with_capacity(dbs.len());
        for d in &dbs {
            maps.push(if d.map == 0 {
                None
            } else {
                Some(PBytesMap::open(pool, map_of(d.map)).map_err(what)?)
            });
        }
        Ok(Keyspace {
            pool: pool.clone(),
            meta,
            dbs_off: m.dbs,
            ndb: databases.min(dbs.len()),
            maps,
            expired_keys: 0,
            note_expired: false,
            note_new: false,
            events: Vec::new(),
            views: Default::default(),
            stream_seek: Default::default(),
            expire_paused: false,
            lazyfreed_objects: 0,
            watches: Watches::default(),
            member_memo: std::cell::RefCell::new((usize::MAX, Vec::new(), 0)),
            found: Default::default(),
            blocking: std::collections::HashMap::new(),
            ready: Vec::new(),
            track: false,
            touched: Vec::new(),
            dirty: 0,
            spare_payload: Default::default(),
            clock: crate::access::AccessClock::new(
                dbs.len(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as u32),
            ),
        })
    }

    fn create_meta(tx: &mut Tx, databases: usize, db0: DbEntry) -> daisy::Result<u64> {
        let mut dbs = vec![DbEntry::default(); databases];
        dbs[0] = db0;
        let arr = tx.alloc_bytes(bytemuck::cast_slice(&dbs))?;
        let meta = KvMeta {
            ndb: databases as u64,
            dbs: arr.offset(),
            ..Zeroable::zeroed()
        };
        Ok(tx.alloc(&meta)?.offset())
    }

    fn internal_slot(&self, slot: usize) -> PPtr<u64> {
        assert!(slot < 8);
        PPtr::from_offset(
            self.meta.offset() + (std::mem::offset_of!(KvMeta, reserved) + slot * 8) as u64,
        )
    }

    /// The offset of one of scripting's maps ([`SCRIPTS_SLOT`], [`FUNCTIONS_SLOT`]) as `tx`
    /// sees it; 0 when there is none.
    pub fn internal_map(&self, tx: &Tx, slot: usize) -> daisy::Result<u64> {
        tx.read(self.internal_slot(slot))
    }

    /// The same, committed (at startup, outside a transaction).
    pub fn internal_map_committed(&self, slot: usize) -> u64 {
        self.pool.read(self.internal_slot(slot))
    }

    /// Name a new map in a scripting slot (in the caller's transaction).
    pub fn set_internal_map(&mut self, tx: &mut Tx, slot: usize, off: u64) -> daisy::Result<()> {
        tx.write(self.internal_slot(slot), &off)
    }

    /// Unlink a scripting map and queue it for lazyfree, in one transaction (SCRIPT FLUSH,
    /// FUNCTION FLUSH): its values own nothing.
    pub fn drop_internal_map(&mut self, tx: &mut Tx, slot: usize) -> daisy::Result<()> {
        let off = self.internal_map(tx, slot)?;
        if off != 0 {
            tx.write(self.internal_slot(slot), &0u64)?;
            lazy_push(
                tx,
                self.meta,
                LazyItem {
                    kind: LazyKind::Table,
                    off,
                },
            )?;
        }
        Ok(())
    }

    /// Number of databases (SELECT's range).
    pub fn databases(&self) -> usize {
        self.ndb
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A view of the value map at `off` for a command of `tx`: one an earlier command of
    /// `tx` kept ([`crate::views`]), or a new one. Give it back with `views.keep_map`.
    pub fn map_view(&mut self, tx: &Tx, off: u64) -> daisy::Result<daisy::BytesMapView> {
        self.views.map(&self.pool, tx, off)
    }

    /// A view of the list sequence at `off` (see [`Keyspace::map_view`]).
    pub fn seq_view(&mut self, tx: &Tx, off: u64) -> daisy::Result<daisy::SeqView> {
        self.views.seq(&self.pool, tx, off)
    }

    /// A view of the ordered map at `off` (see [`Keyspace::map_view`]).
    pub fn tree_view(&mut self, tx: &Tx, off: u64) -> daisy::Result<daisy::TreeMapView> {
        self.views.tree(&self.pool, tx, off)
    }

    fn db_ptr(&self, db: usize) -> PPtr<DbEntry> {
        debug_assert!(db < self.maps.len());
        PPtr::from_offset(self.dbs_off + (db * std::mem::size_of::<DbEntry>()) as u64)
    }

    /// A database's entry as `tx` sees it.
    pub fn db_entry(&self, tx: &Tx, db: usize) -> daisy::Result<DbEntry> {
        tx.read(self.db_ptr(db))
    }

    /// After a transaction that failed: bring the DRAM handles back to the databases the
    /// pool holds (a map created in the failed transaction is gone; one it detached is
    /// back), and undo its WATCH touches.
    pub fn resync(&mut self) {
        self.forget_found();
        self.views.clear();
        self.stream_seek.clear();
        self.watches.rollback();
        self.clock.rollback();
        self.events.clear();
        self.touched.clear();
        for db in 0..self.maps.len() {
            let want = self.pool.read(self.db_ptr(db)).map;
            let have = self.maps[db].as_ref().map_or(0, |m| m.id().offset());
            if want != have {
                self.maps[db] = None; // released before a reopen claims it again
                if want != 0 {
                    self.maps[db] = PBytesMap::open(&self.pool, map_of(want)).ok();
                }
            }
        }
    }

    /// The transaction of the commands so far committed (their WATCH touches stand).
    pub fn committed(&mut self) {
        self.forget_found();
        self.views.clear();
        self.stream_seek.clear();
        self.watches.commit();
        self.clock.committed();
        // Records may name other tables now: look the next key up afresh.
        self.member_memo.get_mut().0 = usize::MAX;
    }

    /// Number of keys of `db` as `tx` sees them (expired ones not yet removed included, as
    /// Redis counts them).
    pub fn len(&self, tx: &Tx, db: usize) -> daisy::Result<u64> {
        match &self.maps[db] {
            Some(m) => m.len_tx(tx),
            None => Ok(0),
        }
    }

    /// Number of keys of `db`, committed.
    pub fn len_committed(&self, db: usize) -> daisy::Result<u64> {
        match &self.maps[db] {
            Some(m) => m.len(),
            None => Ok(0),
        }
    }

    /// Keys of every database, committed.
    pub fn total_keys(&self) -> daisy::Result<u64> {
        (0..self.maps.len()).map(|d| self.len_committed(d)).sum()
    }

    /// Keys of `db` with an expiry time, as `tx` sees them.
    pub fn expires(&self, tx: &Tx, db: usize) -> daisy::Result<u64> {
        Ok(self.db_entry(tx, db)?.expires)
    }

    fn adjust_expires(&self, tx: &mut Tx, db: usize, delta: i64) -> daisy::Result<()> {
        if delta != 0 {
            tx.update(self.db_ptr(db), |e| {
                e.expires = e.expires.wrapping_add(delta as u64)
            })?;
        }
        Ok(())
    }

    /// Prefetch hint for a key a later command of the round will touch (see
    /// [`PBytesMap::prefetch`]).
    #[inline]
    pub fn prefetch(&self, db: usize, key: &[u8], stage: u8) {
        if self.is_found(db, key) {
            return; // its lookup will not touch the map
        }
        if let Some(Some(m)) = self.maps.get(db) {
            m.prefetch(key, stage)
        }
        if stage == 1 {
            self.clock.prefetch(db, key);
        }
    }

    /// Prefetch hint for the entry `member` of the collection at `key` (a table only): the
    /// stage as [`PBytesMap::prefetch`]'s. The key's table is remembered between calls (one
    /// key usually takes many such commands in a row); a stale memo only wastes a hint.
    pub fn prefetch_member(&self, db: usize, key: &[u8], member: &[u8], stage: u8) {
        let mut memo = self.member_memo.borrow_mut();
        if memo.0 != db || memo.1 != key {
            let table = (|| {
                let m = self.maps.get(db)?.as_ref()?;
                let e = m.entry(key).ok()??;
                let mut h = [0u8; 17];
                let n = e.value_len().min(17);
                m.read_value(&e, 0, &mut h[..n]).ok()?;
                let (hd, at) = Header::decode(&h[..n]).ok()?;
                if hd.enc != Enc::Table || n < at + 8 {
                    return None;
                }
                Some(u64::from_le_bytes(h[at..at + 8].try_into().ok()?))
            })();
            // The key's buffer is reused: a new key each time is the usual case.
            memo.0 = db;
            memo.1.clear();
            memo.1.extend_from_slice(key);
            memo.2 = table.unwrap_or(0);
        }
        if memo.2 != 0 {
            PBytesMap::prefetch_at(&self.pool, map_of(memo.2), member, stage);
        }
    }

    /// Signal that `key` changed (Redis's `signalModifiedKey`, `touchWatchedKey`): clients
    /// watching it fail their EXEC, clients tracking it get an invalidation, and the change
    /// counts for INFO's rdb_changes_since_last_save. Every write command calls it for the
    /// keys it wrote, after writing. A client that watched the key when it was already
    /// expired is not failed by its deletion (nothing it saw changed), as in Redis 7.
    #[inline]
    pub fn touch(&mut self, tx: &Tx, db: usize, key: &[u8]) {
        self.dirty += 1;
        self.touch_as(tx, db, key, false)
    }

    /// [`Self::touch`] without counting a change; `expired`: an expiry removed the key.
    #[inline]
    fn touch_as(&mut self, tx: &Tx, db: usize, key: &[u8], expired: bool) {
        if self.track {
            self.touched.push((key.to_vec(), expired));
        }
        if self.watches.keys.is_empty() {
            return;
        }
        self.touch_slow(tx, db, key)
    }

    #[cold]
    fn touch_slow(&mut self, tx: &Tx, db: usize, key: &[u8]) {
        let k = (db as u32, key.to_vec());
        if !self.watches.keys.contains_key(&k) {
            return;
        }
        let exists = self.peek(tx, db, key).ok().flatten().is_some();
        let w = &mut self.watches;
        let mut dirty = Vec::new();
        for (c, was_expired) in w.keys.get_mut(&k).into_iter().flatten() {
            if *was_expired && !exists {
                *was_expired = false; // deleted now: no longer "expired"
                continue;
            }
            dirty.push(*c);
        }
        for c in dirty {
            w.mark_dirty(c);
        }
    }

    /// FLUSHDB / SWAPDB of `db` (replaced by `other`'s keys for SWAPDB): Redis's
    /// `touchAllWatchedKeysInDb`, run before the change with the databases as they are.
    fn touch_all_in_db(
        &mut self,
        tx: &Tx,
        db: usize,
        other: Option<usize>,
        now_ms: i64,
    ) -> daisy::Result<()> {
        for key in self.watches.keys_of(db as u32) {
            let in_db = self.peek(tx, db, &key)?.is_some();
            let in_other = match other {
                Some(o) => self.peek(tx, o, &key)?,
                None => None,
            };
            if !in_db && in_other.is_none() {
                continue;
            }
            let other_expired = in_other.is_some_and(|v| v.expire_ms.is_some_and(|t| t < now_ms));
            let mut dirty = Vec::new();
            let k = (db as u32, key.clone());
            for (c, was_expired) in self.watches.keys.get_mut(&k).into_iter().flatten() {
                if *was_expired {
                    if in_other.is_none() {
                        *was_expired = false;
                        continue;
                    } else if other_expired {
                        continue;
                    }
                } else if !in_db && other_expired {
                    *was_expired = true;
                    continue;
                }
                dirty.push(*c);
            }
            for c in dirty {
                self.watches.mark_dirty(c);
            }
        }
        Ok(())
    }

    /// The key's value without looking at its expiry time.
    pub fn peek(&self, tx: &Tx, db: usize, key: &[u8]) -> daisy::Result<Option<Val>> {
        {
            let f = self.found.borrow();
            if f.serial == tx.serial() && f.db == db && f.key == key {
                return Ok(f.val);
            }
        }
        let Some(m) = &self.maps[db] else {
            return Ok(None);
        };
        match m.entry_tx(tx, key)? {
            None => Ok(None),
            Some(e) => {
                let v = decode_val(tx, e)?;
                let mut f = self.found.borrow_mut();
                f.serial = tx.serial();
                f.db = db;
                f.key.clear();
                f.key.extend_from_slice(key);
                f.val = Some(v);
                Ok(Some(v))
            }
        }
    }

    /// Drop the record [`Keyspace::peek`] kept (see [`Found`]): a map changes, or the
    /// transaction ends.
    #[inline(always)]
    fn forget_found(&self) {
        self.found.borrow_mut().serial = 0;
    }

    /// Whether `key` of `db` is the record [`Keyspace::peek`] kept (a hint only: the
    /// transaction is not checked).
    #[inline(always)]
    fn is_found(&self, db: usize, key: &[u8]) -> bool {
        let f = self.found.borrow();
        f.serial != 0 && f.db == db && f.key == key
    }

    /// The key's live value; a key whose time has passed is removed (lazy expiry, when the
    /// transaction has [`LAZY_EXPIRY_MIN_ROOM`] bytes of log left) and reads as absent.
    ///
    /// `read_only`: the caller only reads (MGET, EXISTS). Then the removal is a courtesy: when
    /// the transaction's redo record is nearly full (a huge MGET over many expired keys), the
    /// key only reads as absent and active expiry removes it later, instead of failing the
    /// read. A writer must not get that: it takes "absent" to mean "no record" and would
    /// overwrite the expired record without counting its expiry time down (or leak what it
    /// owns).
    pub fn lookup(
        &mut self,
        tx: &mut Tx,
        db: usize,
        key: &[u8],
        now_ms: i64,
        read_only: bool,
    ) -> daisy::Result<Option<Val>> {
        let Some(v) = self.peek(tx, db, key)? else {
            return Ok(None);
        };
        if v.expire_ms.is_some_and(|t| t < now_ms) {
            if self.expire_paused || (read_only && tx.log_room() < LAZY_EXPIRY_MIN_ROOM) {
                return Ok(None);
            }
            self.remove_expired(tx, db, key, &v)?;
            return Ok(None);
        }
        self.clock.access(db, key);
        Ok(Some(v))
    }

    fn remove_expired(&mut self, tx: &mut Tx, db: usize, key: &[u8], v: &Val) -> daisy::Result<()> {
        let owned = self.owned_table(tx, v)?;
        self.unlink(tx, db, key, v)?;
        self.free_owned(tx, owned)?;
        self.expired_keys += 1;
        if self.note_expired {
            self.events.push((KeyEvent::Expired, db, key.to_vec()));
        }
        // An expiry is no change a backup misses (Redis does not count it either).
        self.touch_as(tx, db, key, true);
        Ok(())
    }

    /// Append `len` payload bytes of `v` from `from` to `out`.
    pub fn read_into(
        &self,
        tx: &Tx,
        v: &Val,
        from: usize,
        len: usize,
        out: &mut Vec<u8>,
    ) -> daisy::Result<()> {
        let at = out.len();
        out.resize(at + len, 0);
        v.entry.read_tx(tx, v.off + from, &mut out[at..])
    }

    /// Overwrite payload bytes of `v` from `from` in place, through `tx` (the record keeps its
    /// length, header and encoding): for commands that change a few bytes of a large string.
    /// The caller touches the key (WATCH) as for any write.
    pub fn patch_payload(
        &mut self,
        tx: &mut Tx,
        v: &Val,
        from: usize,
        data: &[u8],
    ) -> daisy::Result<()> {
        if from.saturating_add(data.len()) > v.len {
            return Err(daisy::Error::Unsupported(format!(
                "patch of {} bytes at {from} past a {}-byte payload",
                data.len(),
                v.len
            )));
        }
        self.forget_found();
        v.entry.write_tx(tx, v.off + from, data)
    }

    /// The whole payload of `v`.
    pub fn payload(&self, tx: &Tx, v: &Val) -> daisy::Result<Vec<u8>> {
        let mut p = self.spare_payload.take();
        p.clear();
        p.resize(v.len, 0);
        v.entry.read_tx(tx, v.off, &mut p)?;
        Ok(p)
    }

    /// Give back a buffer from [`Keyspace::payload`] once done with it, for the next one
    /// (kept only while modest: a large payload's buffer is freed).
    pub fn recycle_payload(&self, buf: Vec<u8>) {
        if buf.capacity() <= 64 << 10 {
            self.spare_payload.set(buf);
        }
    }

    /// The map of `db`, created (in `tx`) when the database has none.
    fn map_mut(&mut self, tx: &mut Tx, db: usize) -> daisy::Result<&mut PBytesMap> {
        self.forget_found();
        if self.maps[db].is_none() {
            let id = PBytesMap::create_in(tx)?;
            tx.update(self.db_ptr(db), |e| e.map = id.offset())?;
            // Created in `tx`: if it fails, `resync` drops this handle.
            self.maps[db] = Some(PBytesMap::open(&self.pool, id)?);
        }
        Ok(self.maps[db].as_mut().expect("just created"))
    }

    /// Store the record `hdr` + the concatenation of `payload` under `key`, replacing `old`
    /// (the key's current record, live or expired, if any: its expiry counts down, and what it
    /// owns is freed unless `keep_owned`, for a rewrite whose new record names the same
    /// collection).
    #[allow(clippy::too_many_arguments)]
    pub fn put(
        &mut self,
        tx: &mut Tx,
        db: usize,
        key: &[u8],
        hdr: Header,
        payload: &[&[u8]],
        old: Option<&Val>,
        keep_owned: bool,
    ) -> daisy::Result<()> {
        let mut h = [0u8; 9];
        let hb = hdr.encode(&mut h);
        let mut parts: [&[u8]; 4] = [hb, &[], &[], &[]];
        let n = payload.len().min(3);
        parts[1..1 + n].copy_from_slice(&payload[..n]);
        let joined;
        let parts: &[&[u8]] = if payload.len() <= 3 {
            &parts[..1 + n]
        } else {
            joined = [&[hb][..], payload].concat();
            &joined
        };
        // What the old record owns is read before the new one is written: a record of the same
        // length is rewritten in place, and the old payload is then gone.
        let owned = match old {
            Some(o) if !keep_owned => self.owned_table(tx, o)?,
            _ => Vec::new(),
        };
        self.map_mut(tx, db)?.insert_parts_tx(tx, key, parts)?;
        self.clock.access(db, key);
        if self.note_new && old.is_none() {
            self.events.push((KeyEvent::New, db, key.to_vec()));
        }
        if !self.blocking.is_empty()
            && (matches!(hdr.ty, Type::List | Type::ZSet | Type::Stream)
                || old.is_some_and(|o| o.ty == Type::Stream))
        {
            self.signal_ready(db, key);
        }
        let old_exp = old.is_some_and(|o| o.expire_ms.is_some());
        self.adjust_expires(tx, db, hdr.expire_ms.is_some() as i64 - old_exp as i64)?;
        self.free_owned(tx, owned)
    }

    /// Change only the expiry time of `key`, whose record is `v` (the payload is copied; for
    /// a collection in a table it is the table's offset, so nothing large moves).
    pub fn set_expire(
        &mut self,
        tx: &mut Tx,
        db: usize,
        key: &[u8],
        v: &Val,
        expire_ms: Option<i64>,
    ) -> daisy::Result<()> {
        let p = self.payload(tx, v)?;
        let hdr = Header {
            expire_ms,
            ..v.header()
        };
        self.put(tx, db, key, hdr, &[&p], Some(v), true)
    }

    /// SET with its options, in one probe of the table: the old record is read, judged
    /// (expired, NX/XX, KEEPTTL, GET) and replaced where it lies. Any old type is replaced (a
    /// collection it owned is freed); with `get`, an old value that is not a string refuses
    /// the whole SET (`wrong_type`).
    pub fn set(
        &mut self,
        tx: &mut Tx,
        db: usize,
        key: &[u8],
        value: &[u8],
        now_ms: i64,
        o: &SetOpts,
    ) -> daisy::Result<SetOutcome> {
        let mut out = SetOutcome::default();
        let hdr_of = |exp| Header {
            ty: Type::String,
            enc: Enc::Auto,
            expire_ms: exp,
        };
        let op = self.upsert_record(tx, db, key, now_ms, |tx, live| {
            if o.get {
                match &live {
                    Some(v) if v.ty != Type::String => {
                        out.wrong_type = true;
                        return Ok(None);
                    }
                    Some(v) => {
                        let mut p = vec![0u8; v.len];
                        v.entry.read_tx(tx, v.off, &mut p)?;
                        out.old = Some(p);
                    }
                    None => {}
                }
            }
            if (o.nx && live.is_some()) || (o.xx && live.is_none()) {
                return Ok(None);
            }
            let exp = if o.keepttl {
                live.and_then(|v| v.expire_ms)
            } else {
                o.expire
            };
            Ok(Some((hdr_of(exp), Cow::Borrowed(value))))
        })?;
        out.written = op == Upsert::Put;
        if out.written {
            self.touch(tx, db, key);
        }
        Ok(out)
    }

    /// Read-modify-write of a string in one probe, keeping its expiry time (INCR and
    /// friends): `f` gets the live payload (None when absent or expired) and returns the new
    /// payload, or an error text to reply with (then nothing changes). A key of another type
    /// gives `Err(WRONGTYPE)` and changes nothing.
    pub fn rewrite_string(
        &mut self,
        tx: &mut Tx,
        db: usize,
        key: &[u8],
        now_ms: i64,
        f: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>, String>,
    ) -> daisy::Result<Result<Vec<u8>, String>> {
        let mut result = Err(String::new());
        let op = self.upsert_record(tx, db, key, now_ms, |tx, live| {
            if live.is_some_and(|v| v.ty != Type::String) {
                result = Err(crate::commands::E_WRONGTYPE.to_string());
                return Ok(None);
            }
            let old = match &live {
                Some(v) => {
                    let mut p = vec![0u8; v.len];
                    v.entry.read_tx(tx, v.off, &mut p)?;
                    Some(p)
                }
                None => None,
            };
            result = f(old.as_deref());
            match &result {
                Ok(n) => Ok(Some((
                    Header::new(Type::String, Enc::Auto)
                        .with_expire(live.and_then(|v| v.expire_ms)),
                    Cow::Owned(n.clone()),
                ))),
                Err(_) => Ok(None),
            }
        })?;
        if op == Upsert::Put {
            self.touch(tx, db, key);
        }
        Ok(result)
    }

    /// The one-probe write both SET and the read-modify-write commands use: `decide` gets the
    /// live record (an expired one reads as absent) and returns the new record's header and
    /// payload, or `None` to leave the key as it is (an expired entry met on the way is then
    /// removed: lazy expiry). The `expires` count follows in the same transaction, and a
    /// collection the replaced record owned is freed.
    fn upsert_record<'v>(
        &mut self,
        tx: &mut Tx,
        db: usize,
        key: &[u8],
        now_ms: i64,
        decide: impl FnOnce(&Tx, Option<Val>) -> daisy::Result<Option<(Header, Cow<'v, [u8]>)>>,
    ) -> daisy::Result<Upsert> {
        // The entry there (live or expired), the table it owns (read before the entry may be
        // rewritten in place), and the new record's expiry.
        let (mut old, mut owned, mut new_exp, mut expired) = (None, Vec::new(), false, false);
        let op = self.map_mut(tx, db)?.upsert_tx(tx, key, |tx, e, buf| {
            let live = match e {
                None => None,
                Some(e) => {
                    let v = decode_val(tx, e)?;
                    old = Some(v);
                    owned = owned_table_of(tx, &v)?;
                    expired = v.expire_ms.is_some_and(|t| t < now_ms);
                    (!expired).then_some(v)
                }
            };
            match decide(tx, live)? {
                None if expired => Ok(Upsert::Remove),
                None => Ok(Upsert::Keep),
                Some((hdr, payload)) => {
                    new_exp = hdr.expire_ms.is_some();
                    let mut h = [0u8; 9];
                    buf.extend_from_slice(hdr.encode(&mut h));
                    buf.extend_from_slice(&payload);
                    Ok(Upsert::Put)
                }
            }
        })?;
        let old_exp = old.is_some_and(|v| v.expire_ms.is_some());
        let delta = match op {
            Upsert::Put => new_exp as i64 - old_exp as i64,
            Upsert::Remove => -(old_exp as i64),
            Upsert::Keep => 0,
        };
        self.adjust_expires(tx, db, delta)?;
        if op != Upsert::Keep {
            self.free_owned(tx, owned)?;
            if old.is_some_and(|v| v.ty == Type::Stream) && !self.blocking.is_empty() {
                self.signal_ready(db, key);
            }
        }
        match op {
            Upsert::Put => self.clock.access(db, key),
            Upsert::Remove => self.clock.remove(db, key),
            Upsert::Keep => {}
        }
        if expired && self.note_expired {
            self.events.push((KeyEvent::Expired, db, key.to_vec()));
        }
        if self.note_new && op == Upsert::Put && (old.is_none() || expired) {
            self.events.push((KeyEvent::New, db, key.to_vec()));
        }
        if expired {
            self.expired_keys += 1;
            if op != Upsert::Put {
                self.touch_as(tx, db, key, true);
            }
        }
        Ok(op)
    }

    /// Remove `key`, whose record is `v`, and free what it owns (DEL).
    pub fn delete(&mut self, tx: &mut Tx, db: usize, key: &[u8], v: &Val) -> daisy::Result<()> {
        let owned = self.owned_table(tx, v)?;
        self.unlink(tx, db, key, v)?;
        self.free_owned(tx, owned)?;
        self.touch(tx, db, key);
        Ok(())
    }

    /// Remove `key`'s record `v` from `db` without freeing what it owns (the value moves:
    /// RENAME, MOVE). The caller touches the key.
    pub fn unlink(&mut self, tx: &mut Tx, db: usize, key: &[u8], v: &Val) -> daisy::Result<()> {
        self.forget_found();
        if let Some(m) = self.maps[db].as_mut() {
            m.remove_tx(tx, key)?;
        }
        self.clock.remove(db, key);
        // Clients blocked in XREADGROUP on a stream that goes are answered (Redis signals a
        // deleted stream's key as ready).
        if v.ty == Type::Stream && !self.blocking.is_empty() {
            self.signal_ready(db, key);
        }
        self.adjust_expires(tx, db, -(v.expire_ms.is_some() as i64))
    }

    /// The collection the record `v` owns, if any. Read it before the record is removed or
    /// rewritten (a same-length record is rewritten in place).
    fn owned_table(&self, tx: &Tx, v: &Val) -> daisy::Result<Vec<LazyItem>> {
        owned_table_of(tx, v)
    }

    /// Free the collections whose record is gone or replaced in this transaction: a small one
    /// at once, a large one queued for [`Keyspace::lazyfree_step`].
    fn free_owned(&mut self, tx: &mut Tx, owned: Vec<LazyItem>) -> daisy::Result<()> {
        for item in owned {
            // A view a command kept holds the collection's claim, and must not outlive it. A
            // stream owns maps below its meta (its groups' too): every kept view goes.
            if item.kind == LazyKind::Stream {
                self.views.clear();
            } else {
                self.views.evict(item.off);
            }
            match item.kind {
                LazyKind::Table => self.free_table(tx, map_of(item.off))?,
                LazyKind::Tree => self.free_tree(tx, PPtr::from_offset(item.off))?,
                LazyKind::Seq => {
                    // Its chunks (about 4 KiB of items each) are what freeing costs: a list of
                    // a few chunks goes at once, a longer one is queued.
                    if !daisy::PSeq::free_step(
                        &self.pool,
                        tx,
                        PPtr::from_offset(item.off),
                        LAZYFREE_THRESHOLD as u32,
                    )? {
                        lazy_push(tx, self.meta, item)?;
                    }
                }
                LazyKind::Stream => {
                    // A stream of a few nodes and no groups goes at once; a larger one (or
                    // one whose freeing outgrew this transaction's record) is queued.
                    let pool = self.pool.clone();
                    if !(crate::types::stream::is_small(tx, &pool, item.off, LAZYFREE_THRESHOLD)?
                        && crate::types::stream::free_step(
                            &pool,
                            tx,
                            item.off,
                            2 * LAZYFREE_THRESHOLD as u32,
                        )?)
                    {
                        lazy_push(tx, self.meta, item)?;
                    }
                }
                LazyKind::Database | LazyKind::StreamGroup => {
                    return Err(Error::Unsupported(format!(
                        "a value record cannot own a {:?}",
                        item.kind
                    )))
                }
            }
        }
        Ok(())
    }

    /// Free a consumer group its stream no longer names (XGROUP DESTROY): at once when small,
    /// else queued, in the caller's transaction.
    pub fn free_group(&mut self, tx: &mut Tx, at: u64) -> daisy::Result<()> {
        use crate::types::stream::group;
        // The group's maps may have kept views (`Group::release`): they go first.
        self.views.clear();
        let pool = self.pool.clone();
        let mut budget = 2 * LAZYFREE_THRESHOLD as i64;
        if group::is_small(&pool, tx, at, LAZYFREE_THRESHOLD)?
            && group::free_step(&pool, tx, at, &mut budget)?
        {
            return Ok(());
        }
        lazy_push(
            tx,
            self.meta,
            LazyItem {
                kind: LazyKind::StreamGroup,
                off: at,
            },
        )
    }

    /// Free a big sorted set's ordered index whose record is gone: a small one at once, a
    /// large one (or one whose freeing outgrew this transaction's record) queued.
    fn free_tree(&mut self, tx: &mut Tx, id: PPtr<PTreeMap>) -> daisy::Result<()> {
        let entries = PTreeMap::view(&self.pool, tx, id)?.len(tx)?;
        if entries <= LAZYFREE_THRESHOLD && PTreeMap::free_step(&self.pool, tx, id, u32::MAX)? {
            return Ok(());
        }
        lazy_push(
            tx,
            self.meta,
            LazyItem {
                kind: LazyKind::Tree,
                off: id.offset(),
            },
        )
    }

    fn free_table(&mut self, tx: &mut Tx, id: PPtr<PBytesMap>) -> daisy::Result<()> {
        // Objects to free: its entries and its segments (a table emptied by removals may hold
        // few entries in many segments).
        let objects = {
            let v = PBytesMap::view(&self.pool, tx, id)?;
            v.len(tx)? + v.capacity(tx)? / 1024
        };
        if objects <= LAZYFREE_THRESHOLD
            && PBytesMap::free_step(&self.pool, tx, id, u32::MAX, |_, _| Ok(()))?
        {
            return Ok(());
        }
        lazy_push(
            tx,
            self.meta,
            LazyItem {
                kind: LazyKind::Table,
                off: id.offset(),
            },
        )
    }

    /// One SCAN step over `db` as `tx` sees it (see [`PBytesMap::scan_tx`]).
    pub fn scan(
        &self,
        tx: &Tx,
        db: usize,
        cursor: u64,
        count: usize,
        out: &mut Vec<(Vec<u8>, EntryRef)>,
    ) -> daisy::Result<u64> {
        match &self.maps[db] {
            Some(m) => m.scan_tx(tx, cursor, count, out),
            None => Ok(0),
        }
    }

    /// Decode the record of a scanned entry.
    pub fn val_of(&self, tx: &Tx, e: EntryRef) -> daisy::Result<Val> {
        decode_val(tx, e)
    }

    /// A key of `db` chosen uniformly at random (expired ones included).
    pub fn random_key(
        &self,
        tx: &Tx,
        db: usize,
        rng: &mut dyn FnMut() -> u64,
    ) -> daisy::Result<Option<Vec<u8>>> {
        match &self.maps[db] {
            Some(m) => m.random_key_tx(tx, rng),
            None => Ok(None),
        }
    }

    /// Empty `db` (FLUSHDB): its map is queued for freeing and the database left without one
    /// (the next write creates a new map), so this allocates nothing when the queue has a
    /// free inline slot: a completely full pool can be flushed. Watched keys that existed are
    /// touched.
    pub fn flush_db(&mut self, tx: &mut Tx, db: usize, now_ms: i64) -> daisy::Result<()> {
        let e = self.db_entry(tx, db)?;
        if e.map == 0 {
            return Ok(());
        }
        // An empty table of one segment (as a new keyspace's database 0) is kept: freeing it
        // would reclaim nothing the next write does not allocate again. A table emptied by
        // removals still goes, with the segments it grew.
        if let Some(m) = &self.maps[db] {
            if m.len_tx(tx)? == 0 && m.capacity_tx(tx)? <= 1024 {
                return Ok(());
            }
        }
        self.touch_all_in_db(tx, db, None, now_ms)?;
        self.clock.clear(db);
        // Clients blocked in XREADGROUP on a stream of this database are answered (Redis's
        // scanDatabaseForDeletedStreams).
        let waiting: Vec<Vec<u8>> = self
            .blocking
            .iter()
            .filter(|(_, dbs)| dbs.contains(&db))
            .map(|(k, _)| k.clone())
            .collect();
        for k in waiting {
            if self.peek(tx, db, &k)?.is_some_and(|v| v.ty == Type::Stream) {
                self.signal_ready(db, &k);
            }
        }
        self.maps[db] = None; // release the claim: lazyfree takes the map
        self.forget_found();
        tx.write(self.db_ptr(db), &DbEntry::default())?;
        lazy_push(
            tx,
            self.meta,
            LazyItem {
                kind: LazyKind::Database,
                off: e.map,
            },
        )
    }

    /// Swap databases `a` and `b` (SWAPDB): two words each. Watched keys that exist in
    /// either are touched.
    pub fn swap_db(&mut self, tx: &mut Tx, a: usize, b: usize, now_ms: i64) -> daisy::Result<()> {
        if a == b {
            return Ok(());
        }
        self.touch_all_in_db(tx, a, Some(b), now_ms)?;
        self.touch_all_in_db(tx, b, Some(a), now_ms)?;
        let (ea, eb) = (self.db_entry(tx, a)?, self.db_entry(tx, b)?);
        tx.write(self.db_ptr(a), &eb)?;
        tx.write(self.db_ptr(b), &ea)?;
        self.maps.swap(a, b);
        self.forget_found();
        self.clock.swap(a, b);
        // Clients blocked on a key of either database may find it there now (Redis's
        // `scanDatabaseForReadyKeys`): serving checks what the key holds.
        let waiting: Vec<(usize, Vec<u8>)> = self
            .blocking
            .iter()
            .flat_map(|(k, dbs)| {
                dbs.iter()
                    .filter(|&&d| d == a || d == b)
                    .map(move |&d| (d, k.clone()))
            })
            .collect();
        for (d, k) in waiting {
            self.signal_ready(d, &k);
        }
        Ok(())
    }

    /// One step of active expiry on `db`: look at about `count` keys from `cursor`, remove
    /// those whose time passed. Returns (next cursor, keys looked at, keys removed).
    pub fn expire_step(
        &mut self,
        tx: &mut Tx,
        db: usize,
        cursor: u64,
        count: usize,
        now_ms: i64,
    ) -> daisy::Result<(u64, usize, usize)> {
        let mut found = Vec::new();
        let next = self.scan(tx, db, cursor, count, &mut found)?;
        let mut removed = 0;
        for (k, e) in &found {
            let v = decode_val(tx, *e)?;
            if v.expire_ms.is_some_and(|t| t < now_ms) {
                self.remove_expired(tx, db, k, &v)?;
                removed += 1;
            }
        }
        Ok((next, found.len(), removed))
    }

    /// Collections queued for freeing.
    pub fn lazy_pending(&self) -> u64 {
        self.pool.read(self.meta).lazy_count
    }

    /// Free queued collections for about `budget` objects, in one transaction of its own (the
    /// event loop calls it between rounds; opening resumes it). True when the queue is empty.
    pub fn lazyfree_step(&mut self, budget: u32) -> daisy::Result<bool> {
        // (Kept views end with their transaction; none may hold a claim on what is freed.)
        self.views.clear();
        let pool = self.pool.clone();
        let meta = self.meta;
        let mut freed = 0;
        let mut late = None;
        let done = pool.transaction(|tx| {
            let Some((at, item)) = lazy_front(tx, meta)? else {
                return Ok::<_, Error>(true);
            };
            let gone = match item.kind {
                LazyKind::Table => {
                    PBytesMap::free_step(&pool, tx, map_of(item.off), budget, |_, _| Ok(()))?
                }
                LazyKind::Seq => {
                    daisy::PSeq::free_step(&pool, tx, PPtr::from_offset(item.off), budget)?
                }
                LazyKind::Tree => {
                    PTreeMap::free_step(&pool, tx, PPtr::from_offset(item.off), budget)?
                }
                LazyKind::Stream => crate::types::stream::free_step(&pool, tx, item.off, budget)?,
                LazyKind::StreamGroup => {
                    let mut b = budget as i64;
                    crate::types::stream::group::free_step(&pool, tx, item.off, &mut b)?
                }
                LazyKind::Database => {
                    PBytesMap::free_step(&pool, tx, map_of(item.off), budget, |tx, e| {
                        // A record that owns collections: queue them (they may be huge).
                        let v = decode_val(tx, e)?;
                        for owned in owned_table_of(tx, &v)? {
                            lazy_push(tx, meta, owned)?;
                        }
                        Ok(())
                    })?
                }
            };
            if gone {
                if sim_fault(SimFault::LazyQueueLate) {
                    late = Some(at);
                } else {
                    lazy_remove(tx, meta, at)?;
                }
                freed = 1;
            }
            Ok(false)
        })?;
        if let Some(at) = late {
            pool.transaction(|tx| lazy_remove(tx, meta, at))?;
        }
        self.lazyfreed_objects += freed;
        Ok(done)
    }
}

impl Header {
    /// This header with expiry time `t`.
    pub fn with_expire(self, t: Option<i64>) -> Header {
        Header {
            expire_ms: t,
            ..self
        }
    }
}

/// The collections a record owns: encoding `Table` a byte-string map, `Seq` a sequence (the
/// payload is its header's offset), `SkipList` a big sorted set's map and ordered index (the
/// payload is their two offsets).
fn owned_table_of(tx: &Tx, v: &Val) -> daisy::Result<Vec<LazyItem>> {
    let kind = match v.enc {
        Enc::Table => LazyKind::Table,
        Enc::Seq => LazyKind::Seq,
        Enc::Stream => LazyKind::Stream,
        Enc::SkipList => {
            let mut p = [0u8; 16];
            v.entry.read_tx(tx, v.off, &mut p)?;
            let w = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().expect("8 bytes"));
            if w(0) == 0 || w(8) == 0 {
                return Err(Error::Unsupported(
                    "damaged sorted set record (run `daisy pool check`)".into(),
                ));
            }
            return Ok(vec![
                LazyItem {
                    kind: LazyKind::Table,
                    off: w(0),
                },
                LazyItem {
                    kind: LazyKind::Tree,
                    off: w(8),
                },
            ]);
        }
        _ => return Ok(Vec::new()),
    };
    let mut p = [0u8; 8];
    v.entry.read_tx(tx, v.off, &mut p)?;
    Ok(vec![LazyItem {
        kind,
        off: u64::from_le_bytes(p),
    }])
}

fn read_dbs(pool: &Pool, m: &KvMeta) -> daisy::Result<Vec<DbEntry>> {
    let mut dbs = vec![DbEntry::default(); m.ndb as usize];
    pool.try_read_bytes(m.dbs, bytemuck::cast_slice_mut(&mut dbs))?;
    Ok(dbs)
}

/// The power-failure simulator's injected faults (feature `sim` only; never otherwise).
#[cfg(feature = "sim")]
pub(crate) use daisy::sim::Fault as SimFault;

#[cfg(feature = "sim")]
pub(crate) fn sim_fault(f: SimFault) -> bool {
    daisy::sim::fault(f)
}

#[cfg(not(feature = "sim"))]
#[derive(Clone, Copy)]
pub(crate) enum SimFault {
    LazyQueueLate,
    StreamAppendOutsideTx,
}

#[cfg(not(feature = "sim"))]
#[inline(always)]
pub(crate) fn sim_fault(_: SimFault) -> bool {
    false
}

// ---- the lazyfree queue --------------------------------------------------------------------
//
// Slots: the inline ones in KvMeta, then overflow nodes (a list from `lazy_overflow`). A slot
// is a LazyItem word or 0. Push fills the first free inline slot, else a free slot of the
// first node, else a new node at the head; `lazy_count` follows. Every change is logged in
// the caller's transaction.

/// Where a queue slot lives.
#[derive(Clone, Copy, Debug)]
struct SlotAt(u64);

fn lazy_push(tx: &mut Tx, meta: PPtr<KvMeta>, item: LazyItem) -> daisy::Result<()> {
    let m = tx.read(meta)?;
    let base = meta.offset() + std::mem::offset_of!(KvMeta, lazy_slots) as u64;
    let at = if let Some(i) = m.lazy_slots.iter().position(|&w| w == 0) {
        Some(base + 8 * i as u64)
    } else if m.lazy_overflow != 0 {
        let n: LazyNode = tx.read(PPtr::from_offset(m.lazy_overflow))?;
        n.slots
            .iter()
            .position(|&w| w == 0)
            .map(|i| m.lazy_overflow + 8 + 8 * i as u64)
    } else {
        None
    };
    match at {
        Some(at) => tx.write_bytes(at, &item.word().to_le_bytes())?,
        None => {
            let mut node = LazyNode {
                next: m.lazy_overflow,
                slots: [0; LAZY_NODE_SLOTS],
            };
            node.slots[0] = item.word();
            let p = tx.alloc(&node)?;
            tx.update(meta, |mm| mm.lazy_overflow = p.offset())?;
        }
    }
    tx.update(meta, |mm| mm.lazy_count += 1)
}

/// The first queued item and its slot.
fn lazy_front(tx: &Tx, meta: PPtr<KvMeta>) -> daisy::Result<Option<(SlotAt, LazyItem)>> {
    let m = tx.read(meta)?;
    let base = meta.offset() + std::mem::offset_of!(KvMeta, lazy_slots) as u64;
    for (i, &w) in m.lazy_slots.iter().enumerate() {
        if w != 0 {
            let item = LazyItem::from_word(w).ok_or_else(|| bad_queue(w))?;
            return Ok(Some((SlotAt(base + 8 * i as u64), item)));
        }
    }
    let mut node = m.lazy_overflow;
    let mut hops = 0;
    while node != 0 {
        let n: LazyNode = tx.read(PPtr::from_offset(node))?;
        for (i, &w) in n.slots.iter().enumerate() {
            if w != 0 {
                let item = LazyItem::from_word(w).ok_or_else(|| bad_queue(w))?;
                return Ok(Some((SlotAt(node + 8 + 8 * i as u64), item)));
            }
        }
        node = n.next;
        hops += 1;
        if hops > 1 << 24 {
            return Err(bad_queue(node));
        }
    }
    Ok(None)
}

fn bad_queue(w: u64) -> Error {
    Error::Unsupported(format!(
        "damaged lazyfree queue (word {w:#x}; run `daisy pool check`)"
    ))
}

/// Empty the slot at `at`; an overflow node left empty at the head is freed.
fn lazy_remove(tx: &mut Tx, meta: PPtr<KvMeta>, at: SlotAt) -> daisy::Result<()> {
    tx.write_bytes(at.0, &0u64.to_le_bytes())?;
    tx.update(meta, |mm| mm.lazy_count = mm.lazy_count.saturating_sub(1))?;
    let m = tx.read(meta)?;
    if m.lazy_overflow != 0 {
        let n: LazyNode = tx.read(PPtr::from_offset(m.lazy_overflow))?;
        if n.slots.iter().all(|&w| w == 0) {
            tx.update(meta, |mm| mm.lazy_overflow = n.next)?;
            tx.free(PPtr::<u8>::from_offset(m.lazy_overflow))?;
        }
    }
    Ok(())
}

/// Every queued item, read-only (for checks).
fn lazy_items(pool: &Pool, m: &KvMeta) -> Result<(Vec<LazyItem>, Vec<u64>), String> {
    let mut items = Vec::new();
    let mut nodes = Vec::new();
    let mut take = |w: u64| -> Result<(), String> {
        if w != 0 {
            items.push(
                LazyItem::from_word(w)
                    .ok_or_else(|| format!("lazyfree queue word {w:#x} is not an item"))?,
            );
        }
        Ok(())
    };
    for &w in &m.lazy_slots {
        take(w)?;
    }
    let mut node = m.lazy_overflow;
    while node != 0 {
        if nodes.contains(&node) || nodes.len() > 1 << 20 {
            return Err("lazyfree queue: overflow list loops".into());
        }
        nodes.push(node);
        let n: LazyNode = pool
            .try_read(PPtr::from_offset(node))
            .map_err(|e| format!("lazyfree queue node {node:#x}: {e}"))?;
        for &w in &n.slots {
            take(w)?;
        }
        node = n.next;
    }
    Ok((items, nodes))
}

// ---- checks and the model dump -------------------------------------------------------------

/// For `daisy pool check` on a keyspace pool (open it read-only, e.g. with
/// `Pool::open_snapshot`): every object the keyspace owns (for the reachability check), and
/// the keyspace's own problems: a damaged root, malformed value records, values that break
/// their type's invariants, `expires` counts that do not match the records, a damaged
/// lazyfree queue.
pub fn check(pool: &Pool) -> Result<(Vec<u64>, Vec<String>), String> {
    let root = pool.root::<KvRoot>().map_err(|e| e.to_string())?;
    let r = pool.read(root);
    let mut problems = Vec::new();
    let mut reach = vec![root.offset()];
    if r.magic == 0 && r.meta == 0 && r.word2 == 0 {
        return Ok((reach, problems)); // never served: empty
    }
    if r.magic != KV_MAGIC || !(KV_VERSION_1..=KV_VERSION).contains(&r.version) {
        problems.push(format!(
            "keyspace root: magic {:#x} version {} (want {KV_MAGIC:#x} version {KV_VERSION})",
            r.magic, r.version
        ));
        return Ok((reach, problems));
    }
    let dbs = if r.version == KV_VERSION_1 {
        vec![DbEntry {
            map: r.meta,
            expires: r.word2,
        }]
    } else {
        let meta = PPtr::<KvMeta>::from_offset(r.meta);
        let m = pool.try_read(meta).map_err(|e| e.to_string())?;
        reach.push(r.meta);
        reach.push(m.dbs);
        let dbs = read_dbs(pool, &m).map_err(|e| e.to_string())?;
        if r.version < KV_VERSION_4 && m.reserved.iter().any(|&w| w != 0) {
            problems.push(format!("keyspace version {} has scripting maps", r.version));
        }
        for (slot, what) in [(SCRIPTS_SLOT, "script"), (FUNCTIONS_SLOT, "function")] {
            let off = m.reserved[slot];
            if off == 0 {
                continue;
            }
            match daisy::map_objects(pool, off) {
                Ok(o) => reach.extend(o),
                Err(e) => problems.push(format!("{what} map {off:#x}: {e}")),
            }
            match daisy::bytes_map_entries(pool, off) {
                Ok(entries) if slot == SCRIPTS_SLOT => {
                    for (k, body) in entries {
                        if k != crate::scripting::sha1_hex(&body).as_bytes() {
                            problems.push(format!(
                                "script {} is stored under another name than its SHA-1",
                                crate::commands::lossy(&k)
                            ));
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => problems.push(format!("{what} map {off:#x}: {e}")),
            }
        }
        match lazy_items(pool, &m) {
            Ok((items, nodes)) => {
                reach.extend(nodes);
                if items.len() as u64 != m.lazy_count {
                    problems.push(format!(
                        "lazyfree queue counts {} items, holds {}",
                        m.lazy_count,
                        items.len()
                    ));
                }
                for it in items {
                    match it.kind {
                        LazyKind::Table => match daisy::map_objects(pool, it.off) {
                            Ok(o) => reach.extend(o),
                            Err(e) => problems.push(format!("queued table {:#x}: {e}", it.off)),
                        },
                        LazyKind::Seq => match daisy::seq_objects(pool, it.off) {
                            Ok(o) => reach.extend(o),
                            Err(e) => problems.push(format!("queued sequence {:#x}: {e}", it.off)),
                        },
                        LazyKind::Tree => match daisy::tree_objects(pool, it.off) {
                            Ok(o) => reach.extend(o),
                            Err(e) => problems.push(format!("queued index {:#x}: {e}", it.off)),
                        },
                        LazyKind::Stream => match crate::types::stream::snapshot(pool, it.off) {
                            Ok(s) => reach.extend(s.objects),
                            Err(e) => problems.push(format!("queued stream {:#x}: {e}", it.off)),
                        },
                        LazyKind::StreamGroup => {
                            match crate::types::stream::group::snapshot(pool, Vec::new(), it.off) {
                                Ok(g) => reach.extend(g.objects),
                                Err(e) => problems.push(format!("queued group {:#x}: {e}", it.off)),
                            }
                        }
                        LazyKind::Database => {
                            // Its records and what they own.
                            match daisy::map_objects(pool, it.off) {
                                Ok(o) => reach.extend(o),
                                Err(e) => {
                                    problems.push(format!("queued database {:#x}: {e}", it.off))
                                }
                            }
                            match daisy::bytes_map_entries(pool, it.off) {
                                Ok(entries) => {
                                    for (k, rec) in entries {
                                        check_record(pool, &k, &rec, &mut reach, &mut problems);
                                    }
                                }
                                Err(e) => {
                                    problems.push(format!("queued database {:#x}: {e}", it.off))
                                }
                            }
                        }
                    }
                }
            }
            Err(e) => problems.push(e),
        }
        dbs
    };
    for (i, d) in dbs.iter().enumerate() {
        if d.map == 0 {
            if d.expires != 0 {
                problems.push(format!(
                    "db {i} has no keys but counts {} with expiry",
                    d.expires
                ));
            }
            continue;
        }
        reach.extend(daisy::map_objects(pool, d.map).map_err(|e| e.to_string())?);
        let map = PBytesMap::open(pool, map_of(d.map)).map_err(|e| e.to_string())?;
        let mut with_expiry = 0u64;
        for item in map.iter().map_err(|e| e.to_string())? {
            let (k, v) = match item {
                Ok(kv) => kv,
                Err(e) => {
                    problems.push(format!("db {i}: keyspace entry unreadable: {e}"));
                    continue;
                }
            };
            if let Some(h) = check_record(pool, &k, &v, &mut reach, &mut problems) {
                with_expiry += h.expire_ms.is_some() as u64;
                if h.ty == Type::Stream && r.version < KV_VERSION {
                    problems.push(format!(
                        "db {i}: a stream in a version {} keyspace",
                        r.version
                    ));
                }
            }
        }
        if with_expiry != d.expires {
            problems.push(format!(
                "db {i} counts {} keys with an expiry time, the records hold {with_expiry}",
                d.expires
            ));
        }
    }
    Ok((reach, problems))
}

/// Check one record (its header, and its value through its type); add what it owns to
/// `reach`. The header when it decodes.
fn check_record(
    pool: &Pool,
    key: &[u8],
    rec: &[u8],
    reach: &mut Vec<u64>,
    problems: &mut Vec<String>,
) -> Option<Header> {
    let name = String::from_utf8_lossy(&key[..key.len().min(64)]).into_owned();
    match Header::decode(rec) {
        Err(e) => {
            problems.push(format!("key {name:?}: {e}"));
            None
        }
        Ok((h, at)) => {
            let t = types::of(h.ty);
            match t.owned(pool, h.enc, &rec[at..]) {
                Ok(o) => reach.extend(o),
                Err(e) => problems.push(format!("key {name:?}: {e}")),
            }
            for p in t.check(pool, h.enc, &rec[at..]) {
                problems.push(format!("key {name:?}: {p}"));
            }
            Some(h)
        }
    }
}

/// A keyspace as [`dump`] returns it: (database, key) -> (value, has an expiry time).
pub type Dump = std::collections::BTreeMap<(u32, Vec<u8>), (types::Value, bool)>;

/// Every key of every database with its value and whether it has an expiry time, read-only
/// (for checkers that compare a recovered keyspace with a model). Empty for a pool never
/// served.
pub fn dump(pool: &Pool) -> Result<Dump, String> {
    let root = pool.root::<KvRoot>().map_err(|e| e.to_string())?;
    let r = pool.read(root);
    let mut out = Dump::new();
    if r.magic == 0 && r.meta == 0 && r.word2 == 0 {
        return Ok(out);
    }
    let dbs = if r.version == KV_VERSION_1 {
        vec![DbEntry {
            map: r.meta,
            expires: r.word2,
        }]
    } else {
        let m = pool
            .try_read(PPtr::<KvMeta>::from_offset(r.meta))
            .map_err(|e| e.to_string())?;
        read_dbs(pool, &m).map_err(|e| e.to_string())?
    };
    for (i, d) in dbs.iter().enumerate() {
        if d.map == 0 {
            continue;
        }
        let map = PBytesMap::open(pool, map_of(d.map)).map_err(|e| e.to_string())?;
        for item in map.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let name = String::from_utf8_lossy(&k).into_owned();
            let (h, at) = Header::decode(&v).map_err(|e| format!("key {name:?}: {e}"))?;
            let val = types::of(h.ty)
                .dump(pool, h.enc, &v[at..])
                .map_err(|e| format!("key {name:?}: {e}"))?;
            out.insert((i as u32, k), (val, h.expire_ms.is_some()));
        }
    }
    Ok(out)
}
