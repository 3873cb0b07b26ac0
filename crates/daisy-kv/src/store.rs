//! The keyspace: one [`PBytesMap`] in a pool, reached from the pool's root.
//!
//! Format (docs/FORMAT.md, "KV server"): the root object is a [`KvRoot`]; the map's values
//! are *value records*: one flags byte (bit 0: an expiry time follows; bits 1-7: the value
//! type, 0 = string, the only one so far), then, when bit 0 is set, the absolute expiry time
//! in Unix milliseconds (i64 LE), then the payload.
//!
//! Crash reasoning: every change of a key (its record, and the root's count of keys with an
//! expiry time) is made inside the caller's transaction, so a crash leaves each command
//! whole or absent. FLUSHALL swaps in an empty table and resets the count in one transaction
//! (`clear_with`), then frees the old table in bounded transactions that opening finishes.

use bytemuck::{Pod, Zeroable};
use daisy::{EntryRef, Error, PBytesMap, PPtr, Pool, Tx, Upsert};
use std::borrow::Cow;

/// Redo-log bytes a transaction must have left for a read to remove an expired key it meets
/// (a removal logs a few words; the margin leaves room for the command's own writes).
pub const LAZY_EXPIRY_MIN_ROOM: usize = 16 * 1024;

/// Pool layout name of a KV server's pool.
pub const LAYOUT: &str = "daisy.kv";
pub const KV_MAGIC: u64 = u64::from_le_bytes(*b"DAISYKV\0");
pub const KV_VERSION: u32 = 1;

const F_EXPIRE: u8 = 1;

/// The pool's root object.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct KvRoot {
    pub magic: u64,
    pub version: u32,
    pub _pad: u32,
    /// Offset of the keyspace map's header.
    pub map: u64,
    /// Keys whose record carries an expiry time (INFO keyspace's `expires`).
    pub expires: u64,
}

/// A key's value as found: where it is, its expiry time, and its payload's extent.
#[derive(Clone, Copy, Debug)]
pub struct Val {
    pub entry: EntryRef,
    pub expire_ms: Option<i64>,
    /// Payload start inside the record.
    pub off: usize,
    pub len: usize,
}

/// The whole payload of `v`, as `tx` sees it.
fn read_payload(tx: &Tx, v: &Val) -> daisy::Result<Vec<u8>> {
    let mut p = vec![0u8; v.len];
    v.entry.read_tx(tx, v.off, &mut p)?;
    Ok(p)
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
    /// The old live value, when asked for with `get`.
    pub old: Option<Vec<u8>>,
}

fn header_bytes(expire_ms: Option<i64>, h: &mut [u8; 9]) -> &[u8] {
    match expire_ms {
        Some(t) => {
            h[0] = F_EXPIRE;
            h[1..].copy_from_slice(&t.to_le_bytes());
            &h[..]
        }
        None => {
            h[0] = 0;
            &h[..1]
        }
    }
}

/// Open or create the keyspace of `pool`.
pub struct Store {
    map: PBytesMap,
    root: PPtr<KvRoot>,
    /// Keys removed because their time passed (INFO stats).
    pub expired_keys: u64,
}

fn decode_header(tx: &Tx, e: EntryRef) -> daisy::Result<Val> {
    let mut h = [0u8; 9];
    let n = e.value_len().min(9);
    e.read_tx(tx, 0, &mut h[..n])?;
    let bad = || Error::Unsupported("damaged value record (run `daisy pool check`)".into());
    if n == 0 || h[0] & !F_EXPIRE != 0 {
        return Err(bad());
    }
    if h[0] & F_EXPIRE != 0 {
        if n < 9 {
            return Err(bad());
        }
        let t = i64::from_le_bytes(h[1..9].try_into().unwrap());
        Ok(Val {
            entry: e,
            expire_ms: Some(t),
            off: 9,
            len: e.value_len() - 9,
        })
    } else {
        Ok(Val {
            entry: e,
            expire_ms: None,
            off: 1,
            len: e.value_len() - 1,
        })
    }
}

impl Store {
    /// Reach (or, in a new pool, create) the keyspace. Refuses a pool whose root is some
    /// other program's.
    pub fn open(pool: &Pool) -> Result<Store, String> {
        let what = |e: Error| format!("{}: {e}", pool.path().display());
        let root = pool.root::<KvRoot>().map_err(|e| {
            format!(
                "{}: not a daisy serve pool ({e}); use another --pool",
                pool.path().display()
            )
        })?;
        let r = pool.read(root);
        if r.magic == 0 && r.map == 0 {
            pool.transaction(|tx| {
                let map = PBytesMap::create_in(tx)?;
                tx.write(
                    root,
                    &KvRoot {
                        magic: KV_MAGIC,
                        version: KV_VERSION,
                        _pad: 0,
                        map: map.offset(),
                        expires: 0,
                    },
                )
            })
            .map_err(what)?;
        } else if r.magic != KV_MAGIC {
            return Err(format!(
                "{}: the pool's root is not a daisy serve keyspace",
                pool.path().display()
            ));
        } else if r.version != KV_VERSION {
            return Err(format!(
                "{}: keyspace format version {} (this build reads {KV_VERSION})",
                pool.path().display(),
                r.version
            ));
        }
        let r = pool.read(root);
        let map = PBytesMap::open(pool, PPtr::from_offset(r.map)).map_err(what)?;
        Ok(Store {
            map,
            root,
            expired_keys: 0,
        })
    }

    /// Number of keys (expired ones not yet removed included, as Redis counts them).
    pub fn len(&self) -> daisy::Result<u64> {
        self.map.len()
    }

    /// Number of keys as `tx` sees them (inside a group, earlier commands' keys count).
    pub fn len_tx(&self, tx: &Tx) -> daisy::Result<u64> {
        self.map.len_tx(tx)
    }

    pub fn is_empty(&self) -> daisy::Result<bool> {
        Ok(self.len()? == 0)
    }

    pub fn map_offset(&self) -> u64 {
        self.map.id().offset()
    }

    /// Prefetch hint for a key a later command of the round will touch (see
    /// [`PBytesMap::prefetch`]).
    pub fn prefetch(&self, key: &[u8], stage: u8) {
        self.map.prefetch(key, stage)
    }

    /// Keys with an expiry time, as `tx` sees them.
    pub fn expires(&self, tx: &Tx) -> daisy::Result<u64> {
        Ok(tx.read(self.root)?.expires)
    }

    fn adjust_expires(&self, tx: &mut Tx, delta: i64) -> daisy::Result<()> {
        if delta != 0 {
            tx.update(self.root, |r| {
                r.expires = r.expires.wrapping_add(delta as u64)
            })?;
        }
        Ok(())
    }

    /// The key's value without looking at its expiry time.
    pub fn peek(&self, tx: &Tx, key: &[u8]) -> daisy::Result<Option<Val>> {
        match self.map.entry_tx(tx, key)? {
            None => Ok(None),
            Some(e) => decode_header(tx, e).map(Some),
        }
    }

    /// The key's live value; a key whose time has passed is removed (lazy expiry, when the
    /// transaction has [`LAZY_EXPIRY_MIN_ROOM`] bytes of log left) and
    /// reads as absent.
    ///
    /// `read_only`: the caller only reads (MGET, EXISTS). Then the removal is a courtesy: when
    /// the transaction's redo record is nearly full (a huge MGET over many expired keys), the
    /// key only reads as absent and active expiry removes it later, instead of failing the
    /// read. A writer must not get that: it takes "absent" to mean "no record" and would
    /// overwrite the expired record without counting its expiry time down.
    pub fn lookup(
        &mut self,
        tx: &mut Tx,
        key: &[u8],
        now_ms: i64,
        read_only: bool,
    ) -> daisy::Result<Option<Val>> {
        let Some(v) = self.peek(tx, key)? else {
            return Ok(None);
        };
        if v.expire_ms.is_some_and(|t| t < now_ms) {
            if read_only && tx.log_room() < LAZY_EXPIRY_MIN_ROOM {
                return Ok(None);
            }
            self.map.remove_tx(tx, key)?;
            self.adjust_expires(tx, -1)?;
            self.expired_keys += 1;
            return Ok(None);
        }
        Ok(Some(v))
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
        self.map
            .read_value_tx(tx, &v.entry, v.off + from, &mut out[at..])
    }

    pub fn payload(&self, tx: &Tx, v: &Val) -> daisy::Result<Vec<u8>> {
        read_payload(tx, v)
    }

    /// Store `payload` under `key` with expiry `expire_ms`; `old_had_expiry` says whether
    /// the record it replaces had one (for the expires count).
    pub fn put(
        &mut self,
        tx: &mut Tx,
        key: &[u8],
        payload: &[u8],
        expire_ms: Option<i64>,
        old_had_expiry: bool,
    ) -> daisy::Result<()> {
        let mut h = [0u8; 9];
        let hdr = header_bytes(expire_ms, &mut h);
        self.map.insert_parts_tx(tx, key, &[hdr, payload])?;
        self.adjust_expires(tx, expire_ms.is_some() as i64 - old_had_expiry as i64)
    }

    /// SET with its options, in one probe of the table: the old record is read, judged
    /// (expired, NX/XX, KEEPTTL, GET) and replaced where it lies.
    pub fn set(
        &mut self,
        tx: &mut Tx,
        key: &[u8],
        value: &[u8],
        now_ms: i64,
        o: &SetOpts,
    ) -> daisy::Result<SetOutcome> {
        let mut out = SetOutcome::default();
        let op = self.upsert_record(tx, key, now_ms, |tx, live| {
            if o.get {
                if let Some(v) = &live {
                    out.old = Some(read_payload(tx, v)?);
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
            Ok(Some((exp, Cow::Borrowed(value))))
        })?;
        out.written = op == Upsert::Put;
        Ok(out)
    }

    /// Read-modify-write of a string in one probe, keeping its expiry time (INCR and
    /// friends): `f` gets the live payload (None when absent or expired) and returns the new
    /// payload, or an error text to reply with (then nothing changes). Returns `f`'s result.
    pub fn rewrite(
        &mut self,
        tx: &mut Tx,
        key: &[u8],
        now_ms: i64,
        f: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>, String>,
    ) -> daisy::Result<Result<Vec<u8>, String>> {
        let mut result = Err(String::new());
        self.upsert_record(tx, key, now_ms, |tx, live| {
            let old = live.as_ref().map(|v| read_payload(tx, v)).transpose()?;
            result = f(old.as_deref());
            Ok(match &result {
                Ok(new) => Some((live.and_then(|v| v.expire_ms), Cow::Owned(new.clone()))),
                Err(_) => None,
            })
        })?;
        Ok(result)
    }

    /// The one-probe write both SET and the read-modify-write commands use: `decide` gets the
    /// live record (an expired one reads as absent) and returns the new record's expiry time
    /// and payload, or `None` to leave the key as it is (an expired entry met on the way is
    /// then removed: lazy expiry). The `expires` count follows in the same transaction.
    fn upsert_record<'v>(
        &mut self,
        tx: &mut Tx,
        key: &[u8],
        now_ms: i64,
        decide: impl FnOnce(&Tx, Option<Val>) -> daisy::Result<Option<(Option<i64>, Cow<'v, [u8]>)>>,
    ) -> daisy::Result<Upsert> {
        // Whether the entry there (live or expired) had an expiry time, and the new one's.
        let (mut old_exp, mut new_exp, mut expired) = (false, false, false);
        let op = self.map.upsert_tx(tx, key, |tx, old, buf| {
            let live = match old {
                None => None,
                Some(e) => {
                    let v = decode_header(tx, e)?;
                    old_exp = v.expire_ms.is_some();
                    expired = v.expire_ms.is_some_and(|t| t < now_ms);
                    (!expired).then_some(v)
                }
            };
            match decide(tx, live)? {
                None if expired => Ok(Upsert::Remove),
                None => Ok(Upsert::Keep),
                Some((exp, payload)) => {
                    new_exp = exp.is_some();
                    let mut h = [0u8; 9];
                    buf.extend_from_slice(header_bytes(exp, &mut h));
                    buf.extend_from_slice(&payload);
                    Ok(Upsert::Put)
                }
            }
        })?;
        let delta = match op {
            Upsert::Put => new_exp as i64 - old_exp as i64,
            Upsert::Remove => -(old_exp as i64),
            Upsert::Keep => 0,
        };
        self.adjust_expires(tx, delta)?;
        if expired {
            self.expired_keys += 1;
        }
        Ok(op)
    }

    /// Remove `key` whose record is `v`.
    pub fn delete(&mut self, tx: &mut Tx, key: &[u8], v: &Val) -> daisy::Result<()> {
        self.map.remove_tx(tx, key)?;
        self.adjust_expires(tx, -(v.expire_ms.is_some() as i64))
    }

    /// One SCAN step over the map as `tx` sees it (see [`PBytesMap::scan_tx`]).
    pub fn scan(
        &self,
        tx: &Tx,
        cursor: u64,
        count: usize,
        out: &mut Vec<(Vec<u8>, EntryRef)>,
    ) -> daisy::Result<u64> {
        self.map.scan_tx(tx, cursor, count, out)
    }

    /// Decode the record of a scanned entry.
    pub fn val_of(&self, tx: &Tx, e: EntryRef) -> daisy::Result<Val> {
        decode_header(tx, e)
    }

    pub fn random_key(&self, tx: &Tx, r: u64) -> daisy::Result<Option<Vec<u8>>> {
        let mut x = r | 1;
        self.map.random_key_tx(tx, &mut || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
    }

    /// Remove every key (FLUSHALL): runs its own transactions, so no other may be open.
    pub fn flush_all(&mut self) -> daisy::Result<()> {
        let root = self.root;
        self.map.clear_with(|tx| tx.update(root, |r| r.expires = 0))
    }

    /// One step of active expiry: look at about `count` keys from `cursor`, remove those
    /// whose time passed. Returns (next cursor, keys looked at, keys removed).
    pub fn expire_step(
        &mut self,
        tx: &mut Tx,
        cursor: u64,
        count: usize,
        now_ms: i64,
    ) -> daisy::Result<(u64, usize, usize)> {
        let mut found = Vec::new();
        let next = self.map.scan_tx(tx, cursor, count, &mut found)?;
        let mut removed = 0;
        for (k, e) in &found {
            let v = decode_header(tx, *e)?;
            if v.expire_ms.is_some_and(|t| t < now_ms) {
                self.delete(tx, k, &v)?;
                removed += 1;
            }
        }
        self.expired_keys += removed as u64;
        Ok((next, found.len(), removed))
    }

    /// Verify the map's invariants (for `daisy pool check` style tests).
    pub fn check(&self) -> daisy::MapCheck {
        self.map.check()
    }
}

/// For `daisy pool check` on a keyspace pool (open it read-only, e.g. with
/// `Pool::open_snapshot`): every object the keyspace owns (for the reachability check), and
/// the keyspace's own problems: a damaged root, malformed value records, an `expires` count
/// that does not match the records.
pub fn check(pool: &Pool) -> Result<(Vec<u64>, Vec<String>), String> {
    let root = pool.root::<KvRoot>().map_err(|e| e.to_string())?;
    let r = pool.read(root);
    let mut problems = Vec::new();
    if r.magic == 0 && r.map == 0 {
        return Ok((vec![root.offset()], problems)); // never served: empty
    }
    if r.magic != KV_MAGIC || r.version != KV_VERSION {
        problems.push(format!(
            "keyspace root: magic {:#x} version {} (want {KV_MAGIC:#x} version {KV_VERSION})",
            r.magic, r.version
        ));
        return Ok((vec![root.offset()], problems));
    }
    let mut reach = daisy::map_objects(pool, r.map).map_err(|e| e.to_string())?;
    reach.push(root.offset());
    let map = PBytesMap::open(pool, PPtr::from_offset(r.map)).map_err(|e| e.to_string())?;
    let mut with_expiry = 0u64;
    for item in map.iter().map_err(|e| e.to_string())? {
        let (k, v) = match item {
            Ok(kv) => kv,
            Err(e) => {
                problems.push(format!("keyspace entry unreadable: {e}"));
                continue;
            }
        };
        let key = String::from_utf8_lossy(&k);
        match v.first() {
            None => problems.push(format!("key {key:?}: empty value record")),
            Some(&f) if f & !F_EXPIRE != 0 => {
                problems.push(format!("key {key:?}: unknown record flags {f:#x}"))
            }
            Some(&f) if f & F_EXPIRE != 0 && v.len() < 9 => {
                problems.push(format!("key {key:?}: record too short for its expiry time"))
            }
            Some(&f) => with_expiry += (f & F_EXPIRE != 0) as u64,
        }
    }
    if with_expiry != r.expires {
        problems.push(format!(
            "keyspace root counts {} keys with an expiry time, the records hold {with_expiry}",
            r.expires
        ));
    }
    Ok((reach, problems))
}

/// A keyspace as [`dump`] returns it: key -> (payload, has an expiry time).
pub type Dump = std::collections::BTreeMap<Vec<u8>, (Vec<u8>, bool)>;

/// Every key with its payload and whether it has an expiry time, read-only (for checkers
/// that compare a recovered keyspace with a model). An empty map for a pool never served.
pub fn dump(pool: &Pool) -> Result<Dump, String> {
    let root = pool.root::<KvRoot>().map_err(|e| e.to_string())?;
    let r = pool.read(root);
    let mut out = std::collections::BTreeMap::new();
    if r.magic == 0 && r.map == 0 {
        return Ok(out);
    }
    let map = PBytesMap::open(pool, PPtr::from_offset(r.map)).map_err(|e| e.to_string())?;
    for item in map.iter().map_err(|e| e.to_string())? {
        let (k, v) = item.map_err(|e| e.to_string())?;
        let (payload, ttl) = match v.first() {
            Some(&f) if f & F_EXPIRE != 0 && v.len() >= 9 => (v[9..].to_vec(), true),
            Some(&0) => (v[1..].to_vec(), false),
            _ => {
                return Err(format!(
                    "key {:?}: malformed record",
                    String::from_utf8_lossy(&k)
                ))
            }
        };
        out.insert(k, (payload, ttl));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a pool with the default 16 KiB log slots, a transaction never has
    /// `LAZY_EXPIRY_MIN_ROOM` left. A writer's lookup must still remove an expired record
    /// (it then overwrites the key believing there is none); only a read-only lookup may
    /// leave it. Either way the expires count matches the records.
    #[test]
    fn lazy_expiry_with_small_log_slots_keeps_counts() {
        let dir = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let path = dir.path().join("kv.pool");
        let pool = Pool::create(
            &path,
            &daisy::PoolOptions::new(LAYOUT).size(8 << 20).lanes(2),
        )
        .unwrap();
        let mut st = Store::open(&pool).unwrap();
        let past = 1_000;
        let now = 2_000;
        pool.transaction(|tx| {
            st.put(tx, b"a", b"1", Some(past), false)?;
            st.put(tx, b"b", b"2", Some(past), false)
        })
        .unwrap();
        pool.transaction(|tx| {
            assert!(tx.log_room() < LAZY_EXPIRY_MIN_ROOM);
            // A writer (APPEND-like): the expired record goes, then the key is written anew.
            assert!(st.lookup(tx, b"a", now, false)?.is_none());
            st.put(tx, b"a", b"x", None, false)?;
            // A reader: absent, the record stays for active expiry.
            assert!(st.lookup(tx, b"b", now, true)?.is_none());
            Ok::<_, daisy::Error>(())
        })
        .unwrap();
        pool.transaction(|tx| {
            assert_eq!(
                st.expires(tx)?,
                1,
                "only b's record still has an expiry time"
            );
            assert_eq!(st.len_tx(tx)?, 2);
            Ok::<_, daisy::Error>(())
        })
        .unwrap();
        drop(st);
        let (_, problems) = check(&pool).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    }
}
