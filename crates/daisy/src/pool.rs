//! Pools: create, open (with validation and recovery), grow, close, info and check.
//!
//! Opening never writes before the whole file has been validated: a file that is not a pool, a
//! truncated or corrupt pool, a pool of another layout or version, or a locked pool is refused
//! with an error naming the file, and the file is left exactly as it was.

use crate::alloc::{Geometry, HarvestedSet, Heap, LaneAlloc};
use crate::buffers::TxBuffers;
use crate::check::CheckReport;
use crate::error::{Error, Result};
use crate::lanes::{Lane, LaneState, Lanes, Padded};
use crate::layout::*;
use crate::log::*;
use crate::map::{self, Mapping};
use crate::media::Media;
use crate::persist::{FlushInstr, Mode, Persister};
use crate::ptr::PPtr;
use crate::recovery::{self, RecoveryReport};
use crate::shared::{ObjectInfo, PoolInner};
use crate::tx::Tx;
use bytemuck::{Pod, Zeroable};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Directory that emulates NVM, as in the origin documents.
pub const DEFAULT_DIR: &str = "/dev/shm";
/// Initial size of a pool unless its options say: 1 GiB.
pub const DEFAULT_SIZE: u64 = 1 << 30;
/// Size a pool may grow to unless its options say: 64 GiB (or its initial size, if larger).
pub const DEFAULT_MAX_SIZE: u64 = 64 << 30;

/// Which persistence mode to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ModeChoice {
    /// pmem on tmpfs and DAX (MAP_SYNC) files, msync elsewhere; `DAISY_MODE` overrides.
    #[default]
    Auto,
    /// Force cache-line flushes (the caller asserts the file is persistent memory).
    Pmem,
    /// Force msync.
    Msync,
}

impl ModeChoice {
    /// The choice named `s`: "auto", "pmem" or "msync".
    pub fn parse(s: &str) -> Option<ModeChoice> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(ModeChoice::Auto),
            "pmem" => Some(ModeChoice::Pmem),
            "msync" => Some(ModeChoice::Msync),
            _ => None,
        }
    }
}

/// Options for [`Pool::create`] and [`Pool::open`].
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// The layout name: a program's name for what its pools hold, checked at open (at most 63
    /// bytes).
    pub layout: String,
    /// Initial size of the file in bytes.
    pub size: u64,
    /// The pool grows on demand up to this size. Defaults to max(size, 64 GiB).
    pub max_size: Option<u64>,
    /// How stores are made persistent.
    pub mode: ModeChoice,
    /// Log lanes: how many threads can commit at once without waiting (1 to 4096; default 32).
    pub lanes: u32,
    /// Bytes of a log slot: the most redo record one transaction may write (256 B to 64 MiB,
    /// a multiple of 64; default 16 KiB).
    pub log_slot_size: u32,
    /// Log slots per lane (`None`: [`default_slots_per_lane`] picks).
    pub log_slots_per_lane: Option<u32>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            layout: String::new(),
            size: DEFAULT_SIZE,
            max_size: None,
            mode: ModeChoice::Auto,
            lanes: DEFAULT_LANES,
            log_slot_size: DEFAULT_SLOT_SIZE,
            log_slots_per_lane: None,
        }
    }
}

impl PoolOptions {
    /// Options for a pool of layout `layout`, the rest default.
    pub fn new(layout: &str) -> Self {
        PoolOptions {
            layout: layout.to_string(),
            ..Default::default()
        }
    }
    /// Initial size of the file in bytes.
    pub fn size(mut self, size: u64) -> Self {
        self.size = size;
        self
    }
    /// The most the pool may grow to, in bytes.
    pub fn max_size(mut self, max: u64) -> Self {
        self.max_size = Some(max);
        self
    }
    /// How stores are made persistent (default: automatic).
    pub fn mode(mut self, mode: ModeChoice) -> Self {
        self.mode = mode;
        self
    }
    /// Log lanes (threads that commit at once without waiting).
    pub fn lanes(mut self, lanes: u32) -> Self {
        self.lanes = lanes;
        self
    }
    /// Bytes of a log slot (the most redo record one transaction may write).
    pub fn log_slot_size(mut self, bytes: u32) -> Self {
        self.log_slot_size = bytes;
        self
    }
    /// Log slots per lane, between [`MIN_SLOTS_PER_LANE`] and [`MAX_SLOTS_PER_LANE`]. A lane
    /// writes back the lines its transactions applied `slots - 2` commits later, so a line
    /// written again meanwhile is written back once for all those writes; the price is
    /// `lanes x slots x slot size` bytes of log. Default: see [`default_slots_per_lane`].
    pub fn log_slots_per_lane(mut self, slots: u32) -> Self {
        self.log_slots_per_lane = Some(slots);
        self
    }
}

/// A handle to an open pool. Cheap to clone; all clones share one mapping. The pool is closed
/// (made durable and unlocked) when the last handle is dropped or [`Pool::close`] is called.
#[derive(Clone)]
pub struct Pool {
    pub(crate) inner: Arc<PoolInner>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("path", &self.inner.path)
            .field("layout", &self.inner.hdr.layout_name())
            .field("mode", &self.inner.persist.mode())
            .finish()
    }
}

/// Figures printed by `daisy pool info`.
#[derive(Clone, Debug)]
pub struct PoolInfo {
    /// The pool file.
    pub path: PathBuf,
    /// Its layout name.
    pub layout: String,
    /// The on-media format version.
    pub format_version: u32,
    /// The pool's identity, set at creation.
    pub uuid: String,
    /// The persistence mode in use (and flush instruction).
    pub mode: Mode,
    /// Whether the file is mapped with `MAP_SYNC` (a DAX file system).
    pub map_sync: bool,
    /// The file system holding the file ("tmpfs", "ext4", ...).
    pub fs_type: &'static str,
    /// Length of the file.
    pub file_size: u64,
    /// Current pool size: the end of the heap.
    pub size: u64,
    /// The size it may grow to.
    pub max_size: u64,
    /// Bytes of heap (the size less the header, state, logs and chunk table).
    pub heap_size: u64,
    /// Bytes of heap in allocated objects.
    pub used: u64,
    /// Bytes of heap not allocated.
    pub free: u64,
    /// Allocated objects.
    pub objects: u64,
    /// Log lanes.
    pub lanes: u32,
    /// Bytes per log slot.
    pub log_slot_size: u32,
    /// Log slots per lane.
    pub log_slots_per_lane: u32,
    /// The root object: (offset, size), when there is one.
    pub root: Option<(u64, u64)>,
}

fn new_uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    if let Ok(mut f) = File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut u);
    }
    if u == [0u8; 16] {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        u = (t ^ std::process::id() as u128).to_le_bytes();
    }
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}

fn fmt_uuid(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The region sizes a header implies; used by create and validated by open.
fn geometry_for(lanes: u32, slots: u32, slot_size: u32, max_size: u64) -> (u64, u64, u64) {
    let lanes_off = STATE_OFF + STATE_SIZE;
    let lane_bytes = lanes as u64 * slots as u64 * slot_size as u64;
    let chunk_table_off = (lanes_off + lane_bytes).next_multiple_of(4096);
    // The table covers the maximum heap; the heap start depends on the table size, so size the
    // table for the whole max_size (a slight over-estimate).
    let table_bytes = (max_size / CHUNK_SIZE + 1) * 8;
    let heap_off = (chunk_table_off + table_bytes).next_multiple_of(4096);
    (lanes_off, chunk_table_off, heap_off)
}

fn choose_mode(path: &Path, file: &File, choice: ModeChoice, map_sync: bool) -> Result<Mode> {
    let mut choice = choice;
    if choice == ModeChoice::Auto {
        if let Ok(v) = std::env::var("DAISY_MODE") {
            choice = ModeChoice::parse(&v).ok_or_else(|| {
                Error::InvalidOption(format!("DAISY_MODE={v:?}: expected auto, pmem or msync"))
            })?;
        }
    }
    let pmem = match choice {
        ModeChoice::Pmem => true,
        ModeChoice::Msync => false,
        ModeChoice::Auto => map_sync || map::is_tmpfs(file),
    };
    if pmem {
        let f = FlushInstr::detect()
            .map_err(|e| Error::InvalidOption(format!("{}: {e}", path.display())))?;
        Ok(Mode::Pmem(f))
    } else {
        Ok(Mode::Msync)
    }
}

impl Pool {
    /// Create a new pool file. Refuses to overwrite an existing file.
    ///
    /// The file is built under a temporary name and linked into place only when complete, so a
    /// crash during create never leaves a half-initialised pool at `path`.
    pub fn create(path: impl AsRef<Path>, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        if opts.layout.len() >= LAYOUT_MAX {
            return Err(Error::InvalidOption(format!(
                "layout name is {} bytes, at most {} allowed",
                opts.layout.len(),
                LAYOUT_MAX - 1
            )));
        }
        if opts.layout.as_bytes().contains(&0) {
            return Err(Error::InvalidOption(
                "layout name contains a NUL byte".into(),
            ));
        }
        if opts.lanes == 0 || opts.lanes > 4096 {
            return Err(Error::InvalidOption(format!(
                "lanes = {}: must be between 1 and 4096",
                opts.lanes
            )));
        }
        if opts.log_slot_size < MIN_SLOT_SIZE
            || opts.log_slot_size > MAX_SLOT_SIZE
            || !opts.log_slot_size.is_multiple_of(64)
        {
            return Err(Error::InvalidOption(format!(
                "log slot size {} must be a multiple of 64 between {MIN_SLOT_SIZE} and {MAX_SLOT_SIZE}",
                opts.log_slot_size
            )));
        }
        let slots = match opts.log_slots_per_lane {
            Some(k) if !(MIN_SLOTS_PER_LANE..=MAX_SLOTS_PER_LANE).contains(&k) => {
                return Err(Error::InvalidOption(format!(
                    "log slots per lane = {k}: must be between {MIN_SLOTS_PER_LANE} and \
                     {MAX_SLOTS_PER_LANE}"
                )));
            }
            Some(k) => k,
            None => default_slots_per_lane(opts.lanes, opts.log_slot_size, opts.size),
        };
        let opts = &PoolOptions {
            log_slots_per_lane: Some(slots),
            ..opts.clone()
        };
        let max_size = opts.max_size.unwrap_or(opts.size.max(DEFAULT_MAX_SIZE));
        if max_size < opts.size {
            return Err(Error::InvalidOption(format!(
                "max size {max_size} is smaller than size {}",
                opts.size
            )));
        }
        if max_size > (1u64 << 46) {
            return Err(Error::InvalidOption(format!(
                "max size {max_size} bytes is not representable (limit 64 TiB)"
            )));
        }
        let (lanes_off, chunk_table_off, heap_off) =
            geometry_for(opts.lanes, slots, opts.log_slot_size, max_size);
        let min_size = heap_off + CHUNK_SIZE;
        if opts.size < min_size {
            return Err(Error::InvalidOption(format!(
                "size {} bytes is too small: this geometry needs at least {min_size} bytes ({} KiB)",
                opts.size,
                min_size.div_ceil(1024)
            )));
        }
        let heap_end = heap_off + (opts.size - heap_off) / CHUNK_SIZE * CHUNK_SIZE;
        let max_size = heap_off + (max_size - heap_off) / CHUNK_SIZE * CHUNK_SIZE;

        if path.is_dir() {
            return Err(Error::IsADirectory {
                path: path.to_path_buf(),
            });
        }
        if path.exists() {
            return Err(Error::AlreadyExists {
                path: path.to_path_buf(),
            });
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = dir.join(format!(
            ".{}.creating-{}",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "pool".into()),
            std::process::id()
        ));
        let result = Self::create_at(
            path,
            &tmp,
            opts,
            max_size,
            heap_end,
            lanes_off,
            chunk_table_off,
            heap_off,
        );
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn create_at(
        path: &Path,
        tmp: &Path,
        opts: &PoolOptions,
        max_size: u64,
        heap_end: u64,
        lanes_off: u64,
        chunk_table_off: u64,
        heap_off: u64,
    ) -> Result<Pool> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(tmp)
            .map_err(|e| Error::io(path, "create", e))?;
        if !map::try_lock_exclusive(&file).map_err(|e| Error::io(path, "lock", e))? {
            return Err(Error::AlreadyOpen {
                path: path.to_path_buf(),
            });
        }
        map::fallocate(&file, 0, heap_end)
            .map_err(|e| Error::io(path, "allocate file space", e))?;
        let mapping = Mapping::new(&file, heap_end as usize, max_size as usize)
            .map_err(|e| Error::io(path, "mmap", e))?;
        let mode = choose_mode(path, &file, opts.mode, mapping.map_sync())?;
        let persist = Persister::new(mode);

        let mut hdr = Header::zeroed();
        hdr.magic = MAGIC;
        hdr.format_version = FORMAT_VERSION;
        hdr.uuid = new_uuid();
        hdr.layout[..opts.layout.len()].copy_from_slice(opts.layout.as_bytes());
        hdr.created_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        hdr.max_size = max_size;
        hdr.lanes_off = lanes_off;
        hdr.chunk_table_off = chunk_table_off;
        hdr.heap_off = heap_off;
        hdr.lane_count = opts.lanes;
        let slots = opts
            .log_slots_per_lane
            .expect("create resolves the slot count");
        hdr.slots_per_lane = slots;
        hdr.slot_size = opts.log_slot_size;
        hdr.chunk_size = CHUNK_SIZE as u32;
        hdr.checksum = hdr.compute_checksum();

        // fallocate'd space reads as zeros: lanes are empty, the chunk table is all FREE.
        let state = PoolState {
            watermark: 0,
            heap_end,
            root_off: 0,
            root_size: 0,
            undo_table: 0,
        };
        mapping.write(STATE_OFF, &state);
        persist.flush(mapping.at(STATE_OFF, 64), 64);
        mapping.write(0, &hdr);
        persist.flush(mapping.at(0, HEADER_SIZE as usize), HEADER_SIZE as usize);
        persist.fence().map_err(|e| Error::io(path, "persist", e))?;
        file.sync_all().map_err(|e| Error::io(path, "fsync", e))?;

        std::fs::hard_link(tmp, path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Error::AlreadyExists {
                    path: path.to_path_buf(),
                }
            } else {
                Error::io(path, "link into place", e)
            }
        })?;
        let _ = std::fs::remove_file(tmp);
        if let Some(dir) = path.parent() {
            if let Ok(d) = File::open(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            }) {
                let _ = d.sync_all();
            }
        }
        // Map in every log slot's first page, as opening a pool does (recovery reads each
        // slot's header): otherwise a new pool's first commits each take a page fault (a few
        // microseconds on a virtual machine) writing their record.
        for lane in 0..opts.lanes as usize {
            for slot in 0..slots as usize {
                std::hint::black_box(
                    mapping.read::<u64>(crate::log::slot_offset(&hdr, lane, slot)),
                );
            }
        }
        let fs_type = map::fs_type_name(&file);
        Ok(Pool::assemble(
            path,
            file,
            mapping,
            hdr,
            persist,
            fs_type,
            1,
            0,
            vec![(0, vec![0; slots as usize]); opts.lanes as usize],
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        path: &Path,
        file: File,
        map: Mapping,
        hdr: Header,
        persist: Persister,
        fs_type: &'static str,
        next_seq: u64,
        watermark: u64,
        lane_slots: Vec<(u32, Vec<u64>)>,
    ) -> Pool {
        let geo = Geometry {
            heap_off: hdr.heap_off,
            chunk_table_off: hdr.chunk_table_off,
            max_chunks: hdr.max_chunks(),
        };
        let lanes: Box<[Lane]> = lane_slots
            .into_iter()
            .enumerate()
            .map(|(i, (next_slot, slot_seq))| {
                Lane::new(LaneState {
                    index: i,
                    next_slot,
                    slot_seq,
                    alloc: LaneAlloc::new(),
                    buf: TxBuffers::default(),
                    durable_claim: watermark,
                    commit_no: 0,
                    logged_single_words: 0,
                    dirty: Default::default(),
                })
            })
            .collect();
        let heap_end0 = map.read::<PoolState>(STATE_OFF).heap_end;
        Pool {
            inner: Arc::new(PoolInner {
                harvested: HarvestedSet::new(geo.max_chunks),
                media: Media {
                    path: path.to_path_buf(),
                    file,
                    geo,
                    map,
                    hdr,
                    persist,
                    heap_end_cache: AtomicU64::new(heap_end0),
                    size_limit: AtomicU64::new(hdr.max_size),
                    poisoned: AtomicBool::new(false),
                    fail_apply: AtomicBool::new(false),
                },
                lanes: Lanes {
                    list: lanes,
                    next_seq: Padded(AtomicU64::new(next_seq)),
                    persisted_claim: AtomicU64::new(watermark),
                    in_use: AtomicUsize::new(0),
                },
                heap: Mutex::new(Heap::default()),
                root_lock: Mutex::new(()),
                fs_type,
                recovered: std::sync::OnceLock::new(),
                open_objects: Mutex::new(Default::default()),
                undo_table: Mutex::new(0),
                alloc_net: std::sync::atomic::AtomicI64::new(0),
                alloc_base: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Open the pool at `path`, or create it with `opts` when there is no file there. Only a
    /// missing file leads to creating: every other problem (a file that is not a pool, a pool
    /// of another layout or version, a damaged or truncated pool, one another process holds
    /// open) is returned as the error it is, and the file is left alone. The layout name and
    /// the persistence mode come from `opts`.
    pub fn open_or_create(path: impl AsRef<Path>, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        if !path.exists() {
            match Self::create(path, opts) {
                // Another process created it meanwhile: open that one.
                Err(Error::AlreadyExists { .. }) => {}
                r => return r,
            }
        }
        Self::open_with(path, Some(&opts.layout), opts.mode)
    }

    /// Open an existing pool whose layout name must be `layout`.
    pub fn open(path: impl AsRef<Path>, layout: &str) -> Result<Pool> {
        Self::open_with(path, Some(layout), ModeChoice::Auto)
    }

    /// Open an existing pool; `layout: None` accepts any layout (tools such as `pool info`).
    pub fn open_with(
        path: impl AsRef<Path>,
        layout: Option<&str>,
        mode: ModeChoice,
    ) -> Result<Pool> {
        Self::open_inner(path.as_ref(), layout, mode, false)
    }

    /// Open a pool as it would be after recovery, without writing the file: the file is opened
    /// read-only (so a read-only file will do) and mapped copy-on-write, so recovery and
    /// anything done with the handle stay in this process. A pool that another process has
    /// open is opened too, without its lock: [`RecoveryReport::opened_in_use`] says so, and
    /// what the handle shows may then include transactions in flight (for an exact picture of
    /// a pool in use, back it up and inspect the copy). (`daisy pool info` and `pool check` use
    /// this; so does the power-failure simulator for crash images.)
    pub fn open_snapshot(path: impl AsRef<Path>, layout: Option<&str>) -> Result<Pool> {
        Self::open_inner(path.as_ref(), layout, ModeChoice::Auto, true)
    }

    fn open_inner(
        path: &Path,
        layout: Option<&str>,
        mode: ModeChoice,
        snapshot: bool,
    ) -> Result<Pool> {
        let t0 = std::time::Instant::now();
        if path.is_dir() {
            return Err(Error::IsADirectory {
                path: path.to_path_buf(),
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(!snapshot)
            .open(path)
            .map_err(|e| Error::io(path, "open", e))?;
        let file_len = file
            .metadata()
            .map_err(|e| Error::io(path, "stat", e))?
            .len();
        let mut hdr = read_header(path, &file, file_len)?;
        if let Some(expected) = layout {
            let found = hdr.layout_name();
            if found != expected {
                return Err(Error::WrongLayout {
                    path: path.to_path_buf(),
                    found,
                    expected: expected.to_string(),
                });
            }
        }
        validate_geometry(path, &hdr, file_len)?;
        // A snapshot only reads the file: a shared lock where it can have one (so nobody opens
        // the pool for writing meanwhile), none when a writer holds the pool.
        let mut opened_in_use = false;
        if snapshot {
            opened_in_use = !map::try_lock_shared(&file).map_err(|e| Error::io(path, "lock", e))?;
        } else if !map::try_lock_exclusive(&file).map_err(|e| Error::io(path, "lock", e))? {
            return Err(Error::AlreadyOpen {
                path: path.to_path_buf(),
            });
        }
        let map_len = file_len.min(hdr.max_size);
        let mapping =
            Mapping::with_options(&file, map_len as usize, hdr.max_size as usize, snapshot)
                .map_err(|e| Error::io(path, "mmap", e))?;
        let state: PoolState = mapping.read(STATE_OFF);
        validate_state(path, &hdr, &state, file_len, "pool state")?;
        let mode = choose_mode(path, &file, mode, mapping.map_sync())?;
        let persist = Persister::new(mode);

        // Read the logs and refuse damage, still without writing (recovery.rs, step 1).
        let scan = recovery::scan(path, &mapping, &hdr, &state)?;
        // Records may write the state page, which was validated before them: validate what
        // replay would install too, while refusing still leaves the file untouched.
        let mut after = recovery::state_after_replay(state, &scan.replay);
        after.watermark = if scan.needs_writes(&state) {
            scan.max_seq
        } else {
            state.watermark
        };
        validate_state(path, &hdr, &after, file_len, "pool state after log replay")?;
        // Every check that can refuse the pool has passed: the first writes may follow.
        let upgrade = (hdr.format_version < FORMAT_VERSION).then(|| upgraded_header(&mut hdr));
        let fs_type = map::fs_type_name(&file);
        let pool = Pool::assemble(
            path,
            file,
            mapping,
            hdr,
            persist,
            fs_type,
            scan.max_seq + 1,
            scan.max_seq,
            scan.lane_slots.clone(),
        );
        #[cfg(feature = "sim")]
        if !snapshot {
            crate::sim::on_open(&pool);
        }
        match recovery::recover(&pool.inner.media, &scan, &state, upgrade) {
            Ok(mut report) => {
                report.open_micros = t0.elapsed().as_micros() as u64;
                report.opened_in_use = opened_in_use;
                let _ = pool.inner.recovered.set(report);
                Ok(pool)
            }
            Err(e) => {
                // Half recovered: the handle must not make anything durable on its way out.
                pool.inner.poisoned.store(true, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Make everything durable and release the pool. Dropping the last handle does the same
    /// but cannot report an error.
    pub fn close(self) -> Result<()> {
        self.inner.drain_all()
    }

    /// The pool file's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The persistence mode in use.
    pub fn mode(&self) -> Mode {
        self.inner.persist.mode()
    }

    /// The layout name.
    pub fn layout(&self) -> String {
        self.inner.hdr.layout_name()
    }

    /// The pool's identity (a version-4 UUID, set at creation).
    pub fn uuid(&self) -> String {
        fmt_uuid(&self.inner.hdr.uuid)
    }

    /// What recovery found and did when this pool was opened (all zero for a new pool).
    pub fn recovery_report(&self) -> &RecoveryReport {
        self.inner.recovered.get_or_init(RecoveryReport::default)
    }

    /// Current pool size (end of the heap) in bytes.
    pub fn size(&self) -> u64 {
        self.inner.state().heap_end
    }

    /// Whether the file is mapped with `MAP_SYNC` (a DAX file system on persistent memory).
    pub fn map_sync(&self) -> bool {
        self.inner.map.map_sync()
    }

    /// The file system holding the pool file ("tmpfs", "ext4", ...).
    pub fn fs_type(&self) -> &'static str {
        self.inner.fs_type
    }

    /// What survives what, given the medium and the mode: one line for people (a server
    /// prints it at start and in INFO) and whether data survives a power failure.
    pub fn durability(&self) -> (String, bool) {
        let fs = self.fs_type();
        match self.mode() {
            Mode::Pmem(_) if self.map_sync() => (
                format!("persistent memory ({fs}, DAX with MAP_SYNC): committed data survives a crash of the process and a power failure"),
                true,
            ),
            Mode::Pmem(_) if fs == "tmpfs" => (
                "tmpfs (DRAM, emulating NVM): committed data survives a crash of the process, NOT a reboot or a power failure (keep backups elsewhere, or put the pool on persistent memory or a disk file)".to_string(),
                false,
            ),
            Mode::Pmem(_) => (
                format!("a {fs} file in pmem mode without DAX (page cache, cache-line flushes): committed data survives a crash of the process, NOT a power failure"),
                false,
            ),
            Mode::Msync => (
                format!("a {fs} file in msync mode: committed data is written to the file with msync before the commit returns, and survives a crash of the process and a power failure (if the device honours its flushes)"),
                true,
            ),
        }
    }

    /// The size the pool may grow to now, in bytes: its capacity unless
    /// [`set_max_size`](Self::set_max_size) lowered it.
    pub fn max_size(&self) -> u64 {
        self.inner.max_size()
    }

    /// The largest size the pool can ever have, fixed when it was created
    /// ([`PoolOptions::max_size`]): its chunk table and address reservation are sized for it.
    pub fn capacity(&self) -> u64 {
        self.inner.hdr.max_size
    }

    /// Grow the pool now to at least `bytes` (rounded up to whole 256 KiB chunks; nothing
    /// happens when it is that large already): the file is extended and allocated, as growth
    /// on demand would do later. Fails with [`Error::PoolFull`] beyond
    /// [`max_size`](Self::max_size) or when the file system is full.
    pub fn grow_to(&self, bytes: u64) -> Result<()> {
        let inner = &self.inner;
        let mut h = inner.heap.lock().unwrap_or_else(|e| e.into_inner());
        if !h.scanned {
            inner.build_heap_index(&mut h)?;
        }
        let end = inner.heap_end();
        if bytes <= end {
            return Ok(());
        }
        let chunks = (bytes - end).div_ceil(CHUNK_SIZE);
        inner.grow(&mut h, chunks, bytes - end)
    }

    /// Set the size the pool may grow to, in this process (not stored in the pool: the next
    /// open starts at the capacity again). A limit below the current size stops growth; the
    /// pool never shrinks. `0` means the capacity. Fails when `bytes` exceeds the capacity.
    pub fn set_max_size(&self, bytes: u64) -> Result<()> {
        let cap = self.capacity();
        if bytes > cap {
            return Err(Error::InvalidOption(format!(
                "{}: max size {bytes} exceeds the pool's capacity of {cap} bytes, fixed when it was created (a larger pool needs a new pool created with a larger max size, and the data copied)",
                self.path().display()
            )));
        }
        let limit = if bytes == 0 { cap } else { bytes };
        self.inner.size_limit.store(limit, Ordering::Relaxed);
        Ok(())
    }

    /// Run `f` as one crash-consistent transaction. When this returns `Ok`, every change is
    /// durable. When `f` returns `Err` or panics, nothing it did is visible, in DRAM or on media.
    pub fn transaction<R, E, F>(&self, f: F) -> std::result::Result<R, E>
    where
        F: FnOnce(&mut Tx<'_>) -> std::result::Result<R, E>,
        E: From<Error>,
    {
        let mut tx = Tx::begin(&self.inner)?;
        let r = f(&mut tx)?;
        tx.commit()?;
        Ok(r)
    }

    /// Begin a transaction that is not tied to a closure, for bindings (the C API) that
    /// cannot pass one: end it with [`Tx::commit`] or [`Tx::abort`] (dropping it aborts).
    /// The guarantees are [`Pool::transaction`]'s: when `commit` returns `Ok` every change is
    /// durable; an abort, a drop or a crash before the commit point leaves nothing. The
    /// transaction belongs to the calling thread (`Tx` is not `Send`). Prefer
    /// [`Pool::transaction`] in Rust.
    #[inline(always)]
    pub fn begin(&self) -> Result<Tx<'_>> {
        Tx::begin(&self.inner)
    }

    /// The pool's log lanes: how many transactions can be open at once without waiting
    /// (see [`Tx::lane_index`]).
    pub fn lane_count(&self) -> usize {
        self.inner.lanes.len()
    }

    /// Mark the pool unusable in this process, as a failed persist does: every later
    /// transaction fails with [`Error::Poisoned`], and closing it makes nothing durable that
    /// was not already (the next open recovers as after a crash). For bindings that catch a
    /// panic in the middle of an operation and cannot tell what it left half done.
    pub fn poison(&self) {
        self.inner.poisoned.store(true, Ordering::Release);
    }

    /// Whether the pool is poisoned (see [`Pool::poison`]).
    pub fn is_poisoned(&self) -> bool {
        self.inner.poisoned.load(Ordering::Acquire)
    }

    /// The address of `[off, off + len)` in this process's mapping of the pool, checked to lie
    /// inside the heap. The mapping never moves while the pool is open (growth extends it in
    /// place), so the address stays valid until the last handle is dropped. Reading through
    /// it sees committed data (not an open transaction's logged writes); storing through it
    /// bypasses the transactions' crash consistency unless the caller arranges it (the C
    /// API's `daisy_tx_add_range`).
    pub fn direct(&self, off: u64, len: u64) -> Result<*mut u8> {
        self.inner.heap_range(off, len)?;
        Ok(self.inner.map.at(off, len as usize))
    }

    /// The root object, created zeroed on first use. Its size must match `T`.
    pub fn root<T: Pod>(&self) -> Result<PPtr<T>> {
        Ok(self.root_sized(std::mem::size_of::<T>() as u64)?.cast())
    }

    /// [`Pool::root`] for a root of `size` bytes given at run time (bindings): the root
    /// object, created zeroed on first use; [`Error::RootTypeMismatch`] when it exists with
    /// another size.
    pub fn root_sized(&self, size: u64) -> Result<PPtr<u8>> {
        let st = self.inner.state();
        if st.root_off != 0 {
            if st.root_size != size {
                return Err(Error::RootTypeMismatch {
                    found: st.root_size,
                    expected: size,
                });
            }
            return Ok(PPtr::from_offset(st.root_off));
        }
        let _g = self
            .inner
            .root_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let st = self.inner.state();
        if st.root_off != 0 {
            return self.root_sized(size);
        }
        self.transaction(|tx| {
            let p = tx.alloc_zeroed_bytes(size.max(1))?;
            tx.write(PPtr::<u64>::from_offset(STATE_ROOT_OFF), &p.offset())?;
            tx.write(PPtr::<u64>::from_offset(STATE_ROOT_SIZE), &size)?;
            Ok::<_, Error>(PPtr::from_offset(p.offset()))
        })
    }

    /// Copy a `T` out of the pool (outside a transaction; sees committed data).
    ///
    /// # Panics
    /// When `p` is null or `[p, p + size_of::<T>())` is not inside the heap: a pointer that
    /// does not come from this pool is a bug in the caller. [`Pool::try_read`] returns an
    /// error instead (for pointers read from data that may be damaged).
    pub fn read<T: Pod>(&self, p: PPtr<T>) -> T {
        self.inner
            .check_ptr(p.offset(), std::mem::size_of::<T>() as u64);
        self.inner.map.read(p.offset())
    }

    /// [`Pool::read`], with [`Error::InvalidPointer`] for a pointer outside the heap.
    pub fn try_read<T: Pod>(&self, p: PPtr<T>) -> Result<T> {
        self.inner
            .heap_range(p.offset(), std::mem::size_of::<T>() as u64)?;
        Ok(self.inner.map.read(p.offset()))
    }

    /// Copy `out.len()` bytes at `off` out of the pool.
    ///
    /// # Panics
    /// As [`Pool::read`]; [`Pool::try_read_bytes`] returns an error instead.
    pub fn read_bytes(&self, off: u64, out: &mut [u8]) {
        self.inner.check_ptr(off, out.len() as u64);
        self.inner.map.read_bytes(off, out)
    }

    /// [`Pool::read_bytes`], with [`Error::InvalidPointer`] for a range outside the heap.
    pub fn try_read_bytes(&self, off: u64, out: &mut [u8]) -> Result<()> {
        self.inner.heap_range(off, out.len() as u64)?;
        self.inner.map.read_bytes(off, out);
        Ok(())
    }

    /// Size and usage figures (scans the allocator metadata; not for hot paths).
    pub fn info(&self) -> PoolInfo {
        let i = &self.inner;
        let st = i.state();
        let objs = i.allocated_objects().unwrap_or_default();
        let used: u64 = objs.iter().map(|o| o.size).sum();
        let heap_size = st.heap_end - i.hdr.heap_off;
        PoolInfo {
            path: i.path.clone(),
            layout: i.hdr.layout_name(),
            format_version: i.hdr.format_version,
            uuid: fmt_uuid(&i.hdr.uuid),
            mode: i.persist.mode(),
            map_sync: i.map.map_sync(),
            fs_type: i.fs_type,
            file_size: i.file.metadata().map(|m| m.len()).unwrap_or(0),
            size: st.heap_end,
            max_size: i.hdr.max_size,
            heap_size,
            used,
            free: heap_size.saturating_sub(used),
            objects: objs.len() as u64,
            lanes: i.hdr.lane_count,
            log_slot_size: i.hdr.slot_size,
            log_slots_per_lane: i.hdr.slots_per_lane,
            root: (st.root_off != 0).then_some((st.root_off, st.root_size)),
        }
    }

    /// (bytes, objects) allocated in the heap, without listing them: a scan of the chunk
    /// table and the run bitmaps (no object is read), for statistics such as a server's
    /// memory figure.
    pub fn usage(&self) -> Result<(u64, u64)> {
        self.inner.usage()
    }

    /// Bytes allocated in the heap, as [`usage`](Self::usage) counts them, without a scan:
    /// the first call scans once, then every commit adds what it allocated and subtracts what
    /// it freed (a few additions per commit that allocates or frees, nothing otherwise). A
    /// server checks it before every command (Redis's `used_memory` against `maxmemory`).
    /// Exact when no other thread commits during the first call; a commit racing that scan
    /// may be counted twice or not at all (the figure is a statistic, not a fact of the
    /// format: nothing on media depends on it).
    pub fn allocated_bytes(&self) -> Result<u64> {
        let i = &self.inner;
        let base = match i.alloc_base.get() {
            Some(&b) => b,
            None => {
                let net = i.alloc_net.load(Ordering::Acquire);
                let (bytes, _) = i.usage()?;
                *i.alloc_base.get_or_init(|| bytes as i64 - net)
            }
        };
        Ok((base + i.alloc_net.load(Ordering::Acquire)).max(0) as u64)
    }

    /// Every allocated object, in offset order (a scan of the allocator metadata).
    pub fn objects(&self) -> Result<Vec<ObjectInfo>> {
        self.inner.allocated_objects()
    }

    /// Verify allocator metadata. `reachable`, when given, lists every object the layout's
    /// walker reached from the root; the check then also reports leaks and dangling pointers.
    pub fn check(&self, reachable: Option<&[u64]>) -> CheckReport {
        self.inner.check(reachable)
    }

    /// Test hook: drop this handle the way a crash would, without making applied data
    /// durable or retiring logs. The next open runs recovery over whatever is in the file.
    #[doc(hidden)]
    pub fn crash_for_test(self) {
        self.inner.poisoned.store(true, Ordering::Release);
    }

    /// Test hook: the next commit stops right after its commit fence, before applying anything
    /// in place, and poisons the pool (as if the process died there).
    #[doc(hidden)]
    pub fn fail_next_apply_for_test(&self) {
        self.inner.fail_apply.store(true, Ordering::Release);
    }

    /// Make all committed transactions' data durable and retire their logs (one fence).
    pub fn drain(&self) -> Result<()> {
        self.inner.drain_all()
    }
}

/// Mark a version-2 pool as version 3 (docs/FORMAT.md, the versions list at the top). Version 3
/// only added size classes, so the pool is already a valid version-3 pool; the mark makes
/// version-2 builds refuse it from now on, instead of taking chunks of the new classes for
/// damage. It happens at open once every check that can refuse the pool has passed (a refused
/// open writes nothing), and before anything can allocate. `format_version` and `checksum`
/// share the aligned word at offset 8, so one atomic store changes both: a crash leaves the old
/// header or the new one, each with its own valid checksum. Updates `hdr` and returns that
/// word, which recovery stores first.
fn upgraded_header(hdr: &mut Header) -> u64 {
    const _: () = assert!(std::mem::offset_of!(Header, format_version) == 8);
    const _: () = assert!(std::mem::offset_of!(Header, checksum) == 12);
    hdr.format_version = FORMAT_VERSION;
    hdr.checksum = hdr.compute_checksum();
    u64::from(hdr.format_version) | (u64::from(hdr.checksum) << 32)
}

fn read_header(path: &Path, file: &File, file_len: u64) -> Result<Header> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; std::mem::size_of::<Header>()];
    let n = file
        .read_at(&mut buf, 0)
        .map_err(|e| Error::io(path, "read header", e))?;
    if n < MAGIC.len() || buf[..MAGIC.len()] != MAGIC {
        return Err(Error::NotAPool {
            path: path.to_path_buf(),
        });
    }
    let version = u32::from_le_bytes(buf[8..12].try_into().unwrap());
    if !(OLDEST_READ_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            oldest: OLDEST_READ_VERSION,
            supported: FORMAT_VERSION,
        });
    }
    if file_len < HEADER_SIZE || n < buf.len() {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            file_len,
            needed: HEADER_SIZE,
        });
    }
    let hdr: Header = bytemuck::pod_read_unaligned(&buf);
    if hdr.compute_checksum() != hdr.checksum {
        return Err(Error::corrupt(path, "header checksum mismatch"));
    }
    Ok(hdr)
}

fn validate_geometry(path: &Path, h: &Header, file_len: u64) -> Result<()> {
    let bad = |what: &str| Err(Error::corrupt(path, format!("header: {what}")));
    if h.chunk_size as u64 != CHUNK_SIZE {
        return bad("unsupported chunk size");
    }
    if h.lane_count == 0 || h.lane_count > 4096 {
        return bad("lane count out of range");
    }
    if !(MIN_SLOTS_PER_LANE..=MAX_SLOTS_PER_LANE).contains(&h.slots_per_lane)
        || h.slot_size < MIN_SLOT_SIZE
        || h.slot_size > MAX_SLOT_SIZE
        || !h.slot_size.is_multiple_of(64)
    {
        return bad("log geometry out of range");
    }
    if h.max_size > (1 << 46) {
        return bad("max size out of range");
    }
    // Lanes always start right after the state page.
    let lanes_off = STATE_OFF + STATE_SIZE;
    // Order first: with max_size bounded above, the sums below then cannot overflow.
    if h.chunk_table_off > h.heap_off
        || h.heap_off > h.max_size
        || h.lanes_off != lanes_off
        || h.chunk_table_off < h.lanes_off + h.lane_count as u64 * h.lane_bytes()
        || h.heap_off < h.chunk_table_off + (h.max_size.saturating_sub(h.heap_off) / CHUNK_SIZE) * 8
        || !h.heap_off.is_multiple_of(4096)
        || !h.chunk_table_off.is_multiple_of(4096)
        || h.max_size < h.heap_off + CHUNK_SIZE
        || !(h.max_size - h.heap_off).is_multiple_of(CHUNK_SIZE)
    {
        return bad("region offsets are inconsistent");
    }
    if file_len < h.heap_off + CHUNK_SIZE {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            file_len,
            needed: h.heap_off + CHUNK_SIZE,
        });
    }
    Ok(())
}

/// `what` names the state in messages: the one on media, or the one log replay would install.
fn validate_state(path: &Path, h: &Header, s: &PoolState, file_len: u64, what: &str) -> Result<()> {
    if s.watermark > MAX_SEQ {
        return Err(Error::corrupt(
            path,
            format!("{what}: watermark {:#x} is out of range", s.watermark),
        ));
    }
    if s.heap_end < h.heap_off + CHUNK_SIZE
        || s.heap_end > h.max_size
        || !(s.heap_end - h.heap_off).is_multiple_of(CHUNK_SIZE)
    {
        return Err(Error::corrupt(
            path,
            format!("{what}: heap end {:#x} is out of range", s.heap_end),
        ));
    }
    if file_len < s.heap_end {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            file_len,
            needed: s.heap_end,
        });
    }
    if s.undo_table != 0 && (s.undo_table < h.heap_off || s.undo_table >= s.heap_end) {
        return Err(Error::corrupt(
            path,
            format!("{what}: undo table {:#x} is outside the heap", s.undo_table),
        ));
    }
    if s.root_off != 0
        && (s.root_off < h.heap_off || s.root_off.saturating_add(s.root_size) > s.heap_end)
    {
        return Err(Error::corrupt(
            path,
            format!(
                "{what}: root object {:#x}+{} is outside the heap",
                s.root_off, s.root_size
            ),
        ));
    }
    Ok(())
}
