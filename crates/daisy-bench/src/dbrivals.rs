//! The embedded databases a programmer reaches for instead of Daisy when data must survive a
//! crash (issue 22): LMDB (through heed), redb and SQLite (through rusqlite), as rivals in
//! `daisy bench hashmap` and in `bench tx`'s update-1 case.
//!
//! Each is used the way its documentation recommends for durable writes, with no setting that
//! trades durability away:
//! * LMDB: an environment in one file (`NO_SUB_DIR`: `name.lmdb` and `name.lmdb-lock`) and its
//!   default sync: `mdb_txn_commit` writes the dirty pages and fdatasyncs them, then writes the
//!   meta page through a descriptor opened `O_DSYNC`, before it returns. Keys are big-endian, so the B-tree orders them as numbers.
//! * redb: `Database::create`, every write transaction at `Durability::Immediate` (its
//!   default, set explicitly): durable when `commit` returns.
//! * SQLite: WAL journal, `synchronous=FULL` (the WAL is fsynced at every commit; NORMAL would
//!   keep the last commits only until the next checkpoint), a `kv(k INTEGER PRIMARY KEY, v
//!   INTEGER NOT NULL)` table (the key is the rowid: no second index), statements prepared
//!   once per run.
//!
//! Two mechanisms each in the hash-map benchmark: `-op`, one write transaction per insert,
//! committed durably before the insert returns (SQLite: each statement in autocommit mode, its
//! own transaction); `-end`, the whole run as one write transaction committed once at the end
//! (its durability point; a crash before it keeps none of the run: all or nothing).

#![expect(
    unsafe_code,
    reason = "heed marks opening an LMDB environment unsafe: LMDB maps its file, so the caller \
              must not open it twice nor let anything else modify it"
)]

use crate::hashbench::{Bytes, Counting, Mechanism, Setup};
use crate::measure::RemoveOnDrop;
use anyhow::{anyhow, bail, Result};
use heed::byteorder::{BigEndian, NativeEndian};
use heed::types::{U32, U64};
use redb::ReadableTable;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The three databases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Db {
    Lmdb,
    Redb,
    Sqlite,
}

/// LMDB's key: a u32, big-endian (byte order = numeric order).
pub type LmdbKey = U32<BigEndian>;
/// The hash-map benchmark's LMDB table.
pub type LmdbTable = heed::Database<'static, LmdbKey, U32<NativeEndian>>;
/// `bench tx`'s LMDB table (8-byte values).
pub type LmdbTable64 = heed::Database<'static, LmdbKey, U64<NativeEndian>>;
/// The hash-map benchmark's redb table.
pub const REDB_TABLE: redb::TableDefinition<u32, u32> = redb::TableDefinition::new("kv");
/// `bench tx`'s redb table (8-byte values).
pub const REDB_TABLE64: redb::TableDefinition<u32, u64> = redb::TableDefinition::new("kv");

impl Db {
    pub const ALL: [Db; 3] = [Db::Lmdb, Db::Redb, Db::Sqlite];

    pub fn name(self) -> &'static str {
        match self {
            Db::Lmdb => "lmdb",
            Db::Redb => "redb",
            Db::Sqlite => "sqlite",
        }
    }

    /// The file extension of its main file.
    fn ext(self) -> &'static str {
        self.name()
    }

    /// Its files besides the main one, as suffixes of the main file's path.
    fn side_files(self) -> &'static [&'static str] {
        match self {
            Db::Lmdb => &["-lock"],
            Db::Redb => &[],
            Db::Sqlite => &["-wal", "-shm"],
        }
    }

    /// The crate's version (from Cargo.lock, see build.rs) and the C library's, where there is
    /// one: printed with the results and carried in their files.
    pub fn version(self) -> String {
        static VERSIONS: OnceLock<[String; 3]> = OnceLock::new();
        let v = VERSIONS.get_or_init(|| {
            [
                format!(
                    "heed {}, {} (mdb.master bundled by lmdb-master-sys {})",
                    env!("DAISY_BENCH_HEED_VERSION"),
                    heed::lmdb_version().string,
                    env!("DAISY_BENCH_LMDB_SYS_VERSION")
                ),
                format!("redb {} (pure Rust)", env!("DAISY_BENCH_REDB_VERSION")),
                format!(
                    "rusqlite {} (libsqlite3-sys {}), SQLite {} ({})",
                    env!("DAISY_BENCH_RUSQLITE_VERSION"),
                    env!("DAISY_BENCH_LIBSQLITE3_SYS_VERSION"),
                    rusqlite::version(),
                    debian_package("libsqlite3-0")
                        .map(|v| format!("Debian libsqlite3-0 {v}"))
                        .unwrap_or_else(|| "the system's libsqlite3".into())
                ),
            ]
        });
        v[self as usize].clone()
    }

    /// How a durable write is made (printed before the tables).
    pub fn settings(self) -> &'static str {
        match self {
            Db::Lmdb => {
                "LMDB, default sync (commit fdatasyncs the data pages, then writes the meta page \
                 through an O_DSYNC descriptor)"
            }
            Db::Redb => "redb, Durability::Immediate (durable when commit returns)",
            Db::Sqlite => "SQLite, journal_mode=WAL, synchronous=FULL (WAL fsynced per commit)",
        }
    }
}

/// The installed version of a Debian package, if dpkg knows it.
fn debian_package(name: &str) -> Option<String> {
    let out = std::process::Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", name])
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// Open (creating) the LMDB environment in file `path` (its lock file beside it) with room for
/// `map_bytes`; LMDB grows the file as pages are used, the map is only address space.
pub fn open_lmdb(path: &Path, map_bytes: usize) -> Result<heed::Env> {
    let page = daisy::internals::page_size();
    let mut o = heed::EnvOpenOptions::new();
    o.map_size(map_bytes.next_multiple_of(page)).max_dbs(1);
    // SAFETY: NO_SUB_DIR only names the files (path and path-lock) and leaves every sync in
    // place; the file is this benchmark's own, opened once in this process (the handle is
    // closed before anything opens it again) and written by nothing but LMDB.
    let env = unsafe { o.flags(heed::EnvFlags::NO_SUB_DIR).open(path) }
        .map_err(|e| anyhow!("LMDB {}: {e}", path.display()))?;
    Ok(env)
}

/// Create the environment's unnamed table (committed: the handle outlives the transaction).
pub fn lmdb_create_table<KC: 'static, DC: 'static>(
    env: &heed::Env,
) -> Result<heed::Database<'static, KC, DC>> {
    let w = env.write_txn()?;
    let t = env
        .create_databases_and_commit(w, |o, w| -> heed::Result<_> {
            Ok(heed::CommitOrAbort::<_, ()>::Commit(
                o.create_database(w, None)?,
            ))
        })?
        .unwrap_commit();
    Ok(t)
}

/// Open the environment's unnamed table.
pub fn lmdb_open_table<KC: 'static, DC: 'static>(
    env: &heed::Env,
) -> Result<heed::Database<'static, KC, DC>> {
    let r = env.read_txn()?;
    env.open_databases_and_commit(r, |o, r| -> heed::Result<_> {
        Ok(heed::CommitOrAbort::<_, ()>::Commit(
            o.open_database(r, None)?,
        ))
    })?
    .unwrap_commit()
    .ok_or_else(|| anyhow!("LMDB: the unnamed table is missing"))
}

/// Open (creating) an SQLite database in WAL mode with synchronous=FULL.
pub fn open_sqlite(path: &Path) -> Result<rusqlite::Connection> {
    let err = |e: rusqlite::Error| anyhow!("SQLite {}: {e}", path.display());
    let c = rusqlite::Connection::open(path).map_err(err)?;
    let mode: String = c
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        bail!("SQLite {}: journal_mode is {mode}, not wal", path.display());
    }
    c.execute_batch("PRAGMA synchronous=FULL").map_err(err)?;
    let sync: i64 = c
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .map_err(err)?;
    if sync != 2 {
        bail!(
            "SQLite {}: synchronous is {sync}, not FULL (2)",
            path.display()
        );
    }
    Ok(c)
}

/// Open (creating) a redb database.
pub fn open_redb(path: &Path) -> Result<redb::Database> {
    redb::Database::create(path).map_err(|e| anyhow!("redb {}: {e}", path.display()))
}

/// A durable redb write transaction.
pub fn redb_write(db: &redb::Database) -> Result<redb::WriteTransaction> {
    let mut w = db.begin_write()?;
    w.set_durability(redb::Durability::Immediate);
    Ok(w)
}

/// The hash-map benchmark's SQLite statements.
const SQL_PUT: &str = "INSERT OR REPLACE INTO kv(k, v) VALUES (?1, ?2)";
const SQL_GET: &str = "SELECT v FROM kv WHERE k = ?1";
const SQL_DEL: &str = "DELETE FROM kv WHERE k = ?1";

/// The writes of one transaction (or, for SQLite in autocommit mode, of one statement each).
trait Txn {
    fn put(&mut self, k: u32, v: u32) -> Result<()>;
    fn get(&mut self, k: u32) -> Result<Option<u32>>;
    fn del(&mut self, k: u32) -> Result<bool>;
}

struct LmdbTxn<'e> {
    txn: heed::RwTxn<'e>,
    table: LmdbTable,
}

impl Txn for LmdbTxn<'_> {
    fn put(&mut self, k: u32, v: u32) -> Result<()> {
        Ok(self.table.put(&mut self.txn, &k, &v)?)
    }
    fn get(&mut self, k: u32) -> Result<Option<u32>> {
        Ok(self.table.get(&self.txn, &k)?)
    }
    fn del(&mut self, k: u32) -> Result<bool> {
        Ok(self.table.delete(&mut self.txn, &k)?)
    }
}

struct RedbTxn<'t> {
    table: redb::Table<'t, u32, u32>,
}

impl Txn for RedbTxn<'_> {
    fn put(&mut self, k: u32, v: u32) -> Result<()> {
        self.table.insert(k, v)?;
        Ok(())
    }
    fn get(&mut self, k: u32) -> Result<Option<u32>> {
        Ok(self.table.get(k)?.map(|g| g.value()))
    }
    fn del(&mut self, k: u32) -> Result<bool> {
        Ok(self.table.remove(k)?.is_some())
    }
}

/// Prepared statements; inside `BEGIN`..`COMMIT` or each its own transaction (autocommit).
struct SqliteStmts<'c> {
    put: rusqlite::Statement<'c>,
    get: rusqlite::Statement<'c>,
    del: rusqlite::Statement<'c>,
}

impl<'c> SqliteStmts<'c> {
    fn new(c: &'c rusqlite::Connection) -> Result<Self> {
        Ok(SqliteStmts {
            put: c.prepare(SQL_PUT)?,
            get: c.prepare(SQL_GET)?,
            del: c.prepare(SQL_DEL)?,
        })
    }
}

impl Txn for SqliteStmts<'_> {
    fn put(&mut self, k: u32, v: u32) -> Result<()> {
        self.put.execute((k, v))?;
        Ok(())
    }
    fn get(&mut self, k: u32) -> Result<Option<u32>> {
        let mut rows = self.get.query([k])?;
        Ok(match rows.next()? {
            Some(r) => Some(r.get(0)?),
            None => None,
        })
    }
    fn del(&mut self, k: u32) -> Result<bool> {
        Ok(self.del.execute([k])? == 1)
    }
}

enum Handle {
    Lmdb { env: heed::Env, table: LmdbTable },
    Redb(redb::Database),
    Sqlite(rusqlite::Connection),
}

/// The benchmark's `u32 -> u32` map in one of the databases.
pub(crate) struct DbTable {
    // Field order matters: the database is closed before its files are removed.
    handle: Handle,
    db: Db,
    per_op: bool,
    /// The main file (the tests reopen it).
    #[cfg_attr(not(test), expect(dead_code, reason = "read by the tests"))]
    path: PathBuf,
    files: Vec<RemoveOnDrop>,
}

impl DbTable {
    /// A fresh, empty table for `setup.n` entries in `setup.dir`.
    pub(crate) fn create(db: Db, per_op: bool, setup: &Setup<'_>) -> Result<DbTable> {
        let path = setup.path(db.ext());
        let files: Vec<RemoveOnDrop> = std::iter::once(path.clone())
            .chain(db.side_files().iter().map(|s| side(&path, s)))
            .map(|p| {
                let _ = std::fs::remove_file(&p);
                RemoveOnDrop(p)
            })
            .collect();
        let handle = match db {
            Db::Lmdb => {
                // Room for the B-tree with its copy-on-write pages and free list many times
                // over (the map is address space; the file grows with the pages used).
                let env = open_lmdb(&path, (64 << 20) + setup.n * 256)?;
                let table = lmdb_create_table(&env)?;
                Handle::Lmdb { env, table }
            }
            Db::Redb => {
                let d = open_redb(&path)?;
                let w = redb_write(&d)?;
                w.open_table(REDB_TABLE)?;
                w.commit()?;
                Handle::Redb(d)
            }
            Db::Sqlite => {
                let c = open_sqlite(&path)?;
                c.execute_batch("CREATE TABLE kv(k INTEGER PRIMARY KEY, v INTEGER NOT NULL)")?;
                Handle::Sqlite(c)
            }
        };
        Ok(DbTable {
            handle,
            db,
            per_op,
            path,
            files,
        })
    }

    /// Run `f` in one write transaction and commit it durably.
    fn with_txn<R>(&mut self, f: impl FnOnce(&mut dyn Txn) -> Result<R>) -> Result<R> {
        match &mut self.handle {
            Handle::Lmdb { env, table } => {
                let mut t = LmdbTxn {
                    txn: env.write_txn()?,
                    table: *table,
                };
                let r = f(&mut t)?;
                t.txn.commit()?;
                Ok(r)
            }
            Handle::Redb(d) => {
                let w = redb_write(d)?;
                let r = {
                    let mut t = RedbTxn {
                        table: w.open_table(REDB_TABLE)?,
                    };
                    f(&mut t)?
                };
                w.commit()?;
                Ok(r)
            }
            Handle::Sqlite(c) => {
                let tx = c.transaction()?;
                let r = {
                    let mut t = SqliteStmts::new(&tx)?;
                    f(&mut t)?
                };
                tx.commit()?;
                Ok(r)
            }
        }
    }

    /// Close the database, keeping its files (removed when the result is dropped).
    #[cfg(test)]
    pub(crate) fn close(self) -> Result<(PathBuf, Vec<RemoveOnDrop>)> {
        let DbTable {
            handle,
            path,
            files,
            ..
        } = self;
        match handle {
            Handle::Lmdb { env, .. } => env.prepare_for_closing().wait(),
            Handle::Redb(d) => drop(d),
            Handle::Sqlite(c) => c.close().map_err(|(_, e)| e)?,
        }
        Ok((path, files))
    }
}

/// `path` with `suffix` appended to its file name.
fn side(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Every (key, value) of the hash-map table in the database file at `path`, sorted by key,
/// read through a fresh handle (the tests reopen the files this way).
#[cfg(test)]
pub(crate) fn read_back(db: Db, path: &Path) -> Result<Vec<(u32, u32)>> {
    match db {
        Db::Lmdb => {
            let env = open_lmdb(path, 64 << 20)?;
            let v = {
                let table: LmdbTable = lmdb_open_table(&env)?;
                let r = env.read_txn()?;
                let v = table.iter(&r)?.collect::<heed::Result<Vec<_>>>()?;
                v
            };
            env.prepare_for_closing().wait();
            Ok(v)
        }
        Db::Redb => {
            let d = open_redb(path)?;
            redb_contents(&d)
        }
        Db::Sqlite => sqlite_contents(&open_sqlite(path)?),
    }
}

fn redb_contents(d: &redb::Database) -> Result<Vec<(u32, u32)>> {
    let r = d.begin_read()?;
    let t = r.open_table(REDB_TABLE)?;
    let mut v = vec![];
    for e in t.iter()? {
        let (k, val) = e?;
        v.push((k.value(), val.value()));
    }
    Ok(v)
}

fn sqlite_contents(c: &rusqlite::Connection) -> Result<Vec<(u32, u32)>> {
    let mut s = c.prepare("SELECT k, v FROM kv ORDER BY k")?;
    let v = s
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<Vec<(u32, u32)>>>()?;
    Ok(v)
}

/// The mechanism's view of a transaction (or of the statements) open for a run.
struct InScope<'a> {
    name: &'static str,
    txn: &'a mut dyn Txn,
}

impl Mechanism for InScope<'_> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn describe(&self) -> String {
        String::new()
    }
    fn insert(&mut self, key: u32, value: u32) -> Result<()> {
        self.txn.put(key, value)
    }
    fn get(&mut self, key: u32) -> Result<Option<u32>> {
        self.txn.get(key)
    }
    fn remove(&mut self, key: u32) -> Result<bool> {
        self.txn.del(key)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
    fn bytes_used(&self) -> Option<Bytes> {
        None
    }
    fn contents(&self) -> Result<Vec<(u32, u32)>> {
        Err(anyhow!("{}: contents are read outside a run", self.name))
    }
    fn counting(&self) -> Counting {
        Counting::Unknown
    }
}

/// Operations a per-operation database rival is timed on at most per run: every one is a
/// durable commit (an fsync or two), so a run of N = 1,000,000 would take minutes on a disk;
/// the rest of the run is projected (the row is marked extrapolated). A prefix inserts into a
/// smaller B-tree than the whole run would, so the projection flatters the rival.
pub const PER_OP_MAX_OPS: usize = 20_000;

impl Mechanism for DbTable {
    fn name(&self) -> &'static str {
        match (self.db, self.per_op) {
            (Db::Lmdb, true) => "lmdb-op",
            (Db::Lmdb, false) => "lmdb-end",
            (Db::Redb, true) => "redb-op",
            (Db::Redb, false) => "redb-end",
            (Db::Sqlite, true) => "sqlite-op",
            (Db::Sqlite, false) => "sqlite-end",
        }
    }

    fn describe(&self) -> String {
        format!(
            "{}; {}; {}",
            self.db.settings(),
            if self.per_op {
                "one write transaction per insert, durable when it returns"
            } else {
                "one write transaction for the whole run, committed at the end"
            },
            self.db.version()
        )
    }

    /// Outside a run: its own durable transaction.
    fn insert(&mut self, key: u32, value: u32) -> Result<()> {
        self.with_txn(|t| t.put(key, value))
    }

    fn get(&mut self, key: u32) -> Result<Option<u32>> {
        match &self.handle {
            Handle::Lmdb { env, table } => {
                let r = env.read_txn()?;
                Ok(table.get(&r, &key)?)
            }
            Handle::Redb(d) => {
                let r = d.begin_read()?;
                let t = r.open_table(REDB_TABLE)?;
                let v = t.get(key)?.map(|g| g.value());
                Ok(v)
            }
            Handle::Sqlite(c) => {
                let mut s = c.prepare(SQL_GET)?;
                let mut rows = s.query([key])?;
                Ok(match rows.next()? {
                    Some(r) => Some(r.get(0)?),
                    None => None,
                })
            }
        }
    }

    fn remove(&mut self, key: u32) -> Result<bool> {
        self.with_txn(|t| t.del(key))
    }

    fn finish(&mut self) -> Result<()> {
        // `-op`: every write was durable when it returned; `-end`: the run's transaction was
        // committed at the end of its scope.
        Ok(())
    }

    fn scoped(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Mechanism) -> Result<()>,
    ) -> Option<Result<()>> {
        let name = self.name();
        if !self.per_op {
            return Some(self.with_txn(|txn| f(&mut InScope { name, txn })));
        }
        match &self.handle {
            // SQLite in autocommit mode: each statement is its own durable transaction; the
            // scope only keeps the statements prepared.
            Handle::Sqlite(c) => Some((|| {
                let mut s = SqliteStmts::new(c)?;
                f(&mut InScope { name, txn: &mut s })
            })()),
            Handle::Lmdb { .. } | Handle::Redb(_) => None,
        }
    }

    /// One transaction for all pairs, whatever the mechanism (it only builds the table).
    fn build(&mut self, pairs: &[(u32, u32)]) -> Result<()> {
        self.with_txn(|t| pairs.iter().try_for_each(|&(k, v)| t.put(k, v)))
    }

    /// Every file of the database: the data file and the lock file, WAL and shared memory.
    fn bytes_used(&self) -> Option<Bytes> {
        let total = self
            .files
            .iter()
            .filter_map(|f| std::fs::metadata(&f.0).ok())
            .map(|m| m.len())
            .sum();
        Some(Bytes::Measured(total))
    }

    fn contents(&self) -> Result<Vec<(u32, u32)>> {
        match &self.handle {
            Handle::Lmdb { env, table } => {
                let r = env.read_txn()?;
                let v = table.iter(&r)?.collect::<heed::Result<Vec<_>>>()?;
                Ok(v)
            }
            Handle::Redb(d) => redb_contents(d),
            Handle::Sqlite(c) => sqlite_contents(c),
        }
    }

    fn counting(&self) -> Counting {
        Counting::Unknown
    }

    fn version(&self) -> Option<String> {
        Some(self.db.version())
    }

    fn max_ops(&self) -> Option<usize> {
        self.per_op.then_some(PER_OP_MAX_OPS)
    }
}

/// `bench tx`'s update-1 case in a database: one record (key 0, an 8-byte value) updated by
/// one durable write transaction per operation (SQLite: `UPDATE` in autocommit mode).
pub struct UpdateOne {
    // Field order matters: the database is closed before its files are removed.
    handle: Handle64,
    pub db: Db,
    _files: Vec<RemoveOnDrop>,
}

enum Handle64 {
    Lmdb { env: heed::Env, table: LmdbTable64 },
    Redb(redb::Database),
    Sqlite(rusqlite::Connection),
}

impl UpdateOne {
    /// A fresh database at `dir/{stem}.{db}` holding the one record.
    pub fn create(db: Db, dir: &Path, stem: &str) -> Result<UpdateOne> {
        let path = dir.join(format!("{stem}.{}", db.ext()));
        let files: Vec<RemoveOnDrop> = std::iter::once(path.clone())
            .chain(db.side_files().iter().map(|s| side(&path, s)))
            .map(|p| {
                let _ = std::fs::remove_file(&p);
                RemoveOnDrop(p)
            })
            .collect();
        let handle = match db {
            Db::Lmdb => {
                let env = open_lmdb(&path, 64 << 20)?;
                let table: LmdbTable64 = lmdb_create_table(&env)?;
                let mut w = env.write_txn()?;
                table.put(&mut w, &0, &0)?;
                w.commit()?;
                Handle64::Lmdb { env, table }
            }
            Db::Redb => {
                let d = open_redb(&path)?;
                let w = redb_write(&d)?;
                w.open_table(REDB_TABLE64)?.insert(0, 0)?;
                w.commit()?;
                Handle64::Redb(d)
            }
            Db::Sqlite => {
                let c = open_sqlite(&path)?;
                c.execute_batch(
                    "CREATE TABLE kv(k INTEGER PRIMARY KEY, v INTEGER NOT NULL);
                     INSERT INTO kv VALUES (0, 0);",
                )?;
                Handle64::Sqlite(c)
            }
        };
        Ok(UpdateOne {
            handle,
            db,
            _files: files,
        })
    }

    /// The timed operation: set the record's value to `i`, durably.
    pub fn op(&self) -> Result<Box<dyn FnMut(u64) -> Result<()> + '_>> {
        Ok(match &self.handle {
            Handle64::Lmdb { env, table } => Box::new(move |i| {
                let mut w = env.write_txn()?;
                table.put(&mut w, &0, &i)?;
                w.commit()?;
                Ok(())
            }),
            Handle64::Redb(d) => Box::new(move |i| {
                let w = redb_write(d)?;
                w.open_table(REDB_TABLE64)?.insert(0, i)?;
                w.commit()?;
                Ok(())
            }),
            Handle64::Sqlite(c) => {
                let mut s = c.prepare("UPDATE kv SET v = ?1 WHERE k = 0")?;
                Box::new(move |i| {
                    // SQLite's integers are i64: the bits of i, as any u64 stored there.
                    let changed = s.execute([i as i64])?;
                    if changed != 1 {
                        bail!("SQLite: the update changed {changed} rows");
                    }
                    Ok(())
                })
            }
        })
    }

    /// The record's value, read back.
    pub fn value(&self) -> Result<u64> {
        match &self.handle {
            Handle64::Lmdb { env, table } => {
                let r = env.read_txn()?;
                let v = table.get(&r, &0)?;
                v.ok_or_else(|| anyhow!("LMDB: the record is gone"))
            }
            Handle64::Redb(d) => {
                let r = d.begin_read()?;
                let v = r.open_table(REDB_TABLE64)?.get(0)?.map(|g| g.value());
                v.ok_or_else(|| anyhow!("redb: the record is gone"))
            }
            Handle64::Sqlite(c) => {
                let v: i64 = c.query_row("SELECT v FROM kv WHERE k = 0", [], |r| r.get(0))?;
                Ok(v as u64)
            }
        }
    }
}

fn open<'a>(db: Db, per_op: bool, s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    Ok(Box::new(DbTable::create(db, per_op, s)?))
}

pub(crate) fn open_lmdb_op<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open(Db::Lmdb, true, s)
}
pub(crate) fn open_lmdb_end<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open(Db::Lmdb, false, s)
}
pub(crate) fn open_redb_op<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open(Db::Redb, true, s)
}
pub(crate) fn open_redb_end<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open(Db::Redb, false, s)
}
pub(crate) fn open_sqlite_op<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open(Db::Sqlite, true, s)
}
pub(crate) fn open_sqlite_end<'a>(s: &Setup<'a>) -> Result<Box<dyn Mechanism + 'a>> {
    open(Db::Sqlite, false, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashbench::{in_scope, keys, value_of};

    /// On tmpfs where there is one: the tests check contents, not speed.
    fn tmpdir() -> tempfile::TempDir {
        match std::path::Path::new("/dev/shm").is_dir() {
            true => tempfile::tempdir_in("/dev/shm").unwrap(),
            false => tempfile::tempdir().unwrap(),
        }
    }

    fn setup<'a>(dir: &'a Path, n: usize, stem: &str) -> Setup<'a> {
        Setup {
            dir,
            n,
            stem: stem.into(),
            mode: daisy::Mode::Msync,
            pmdk: None,
        }
    }

    /// Each database, both ways: a run of inserts (some overwriting, some removed again)
    /// inside the mechanism's scope, as the benchmark times it; then the handle is closed and
    /// the files are opened afresh: every pair is there with its last value, nothing else.
    /// Finally the files are removed with the table.
    #[test]
    fn each_database_keeps_a_run_after_reopening() {
        let d = tmpdir();
        let n = 300;
        let ks = keys(11, n);
        for db in Db::ALL {
            for per_op in [true, false] {
                let stem = format!("t-{}-{per_op}", db.name());
                let mut t = DbTable::create(db, per_op, &setup(d.path(), n, &stem)).unwrap();
                let name = t.name();
                in_scope(&mut t, &mut |m| {
                    for &k in &ks {
                        m.insert(k, 1)?;
                    }
                    // Overwrite every key with its real value, then remove every fifth.
                    for &k in &ks {
                        m.insert(k, value_of(k))?;
                    }
                    for &k in ks.iter().step_by(5) {
                        assert!(m.remove(k)?, "{name}: remove {k}");
                    }
                    assert!(!m.remove(ks[0])?, "{name}: removed twice");
                    assert_eq!(m.get(ks[1])?, Some(value_of(ks[1])), "{name}");
                    Ok(())
                })
                .unwrap();
                t.finish().unwrap();
                let mut want: Vec<(u32, u32)> = ks
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % 5 != 0)
                    .map(|(_, &k)| (k, value_of(k)))
                    .collect();
                want.sort_unstable();
                assert_eq!(t.contents().unwrap(), want, "{name}: live handle");
                let Some(Bytes::Measured(b)) = t.bytes_used() else {
                    panic!("{name}: no size")
                };
                assert!(b >= 8 * want.len() as u64, "{name}: {b} bytes");
                assert_eq!(t.version(), Some(db.version()));
                let (path, files) = t.close().unwrap();
                assert_eq!(read_back(db, &path).unwrap(), want, "{name}: reopened");
                drop(files);
                assert!(!path.exists(), "{name}: file left behind");
            }
        }
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    /// A `-end` run that fails part-way commits nothing: the transaction is all or nothing.
    #[test]
    fn a_failed_end_run_leaves_the_table_as_it_was() {
        let d = tmpdir();
        for db in Db::ALL {
            let mut t = DbTable::create(db, false, &setup(d.path(), 10, db.name())).unwrap();
            t.insert(7, 70).unwrap();
            let r = in_scope(&mut t, &mut |m| {
                m.insert(8, 80)?;
                Err(anyhow!("stop"))
            });
            assert!(r.is_err());
            assert_eq!(t.contents().unwrap(), vec![(7, 70)], "{}", db.name());
        }
    }

    /// `bench tx`'s update-1 in each database: after the updates the record holds the last
    /// value, and the files go with the handle.
    #[test]
    fn update_one_keeps_the_last_value() {
        let d = tmpdir();
        for db in Db::ALL {
            let u = UpdateOne::create(db, d.path(), "u").unwrap();
            {
                let mut op = u.op().unwrap();
                for i in [5, 9, u64::MAX - 3] {
                    op(i).unwrap();
                }
            }
            assert_eq!(u.value().unwrap(), u64::MAX - 3, "{}", db.name());
            drop(u);
        }
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn versions_name_the_crates_and_libraries() {
        let l = Db::Lmdb.version();
        assert!(l.starts_with("heed 0.") && l.contains("LMDB 0.9"), "{l}");
        assert!(Db::Redb.version().starts_with("redb 2."));
        let s = Db::Sqlite.version();
        assert!(
            s.starts_with("rusqlite 0.") && s.contains("SQLite 3."),
            "{s}"
        );
    }
}
