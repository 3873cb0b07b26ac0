//! PMDK's libpmemobj, loaded at run time so `daisy` builds and runs without it.
//!
//! Debian's libpmemobj-dev installs `libpmemobj.so`; when it is missing the benchmarks say so
//! and skip the PMDK rows. The pool is forced to pmem mode on tmpfs (`PMEM_IS_PMEM_FORCE=1`),
//! as the origin document's emulation implies, and the unsafe-shutdown check that PMDK >= 2.1
//! requires on real hardware is turned off for pool creation (`sds.at_create=0`).
//!
//! All `unsafe` of the lab lives in this file; each call states its contract.

#![expect(
    unsafe_code,
    reason = "the rival, libpmemobj, is called through dlopen"
)]
use anyhow::{anyhow, Result};

use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

/// PMDK's persistent object id (16 bytes, returned by value in registers).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PMEMoid {
    pub pool_uuid_lo: u64,
    pub off: u64,
}

type CreateFn = unsafe extern "C" fn(*const c_char, *const c_char, usize, u32) -> *mut c_void;
type CloseFn = unsafe extern "C" fn(*mut c_void);
type RootFn = unsafe extern "C" fn(*mut c_void, usize) -> PMEMoid;
type DirectFn = unsafe extern "C" fn(PMEMoid) -> *mut c_void;
type TxBeginFn = unsafe extern "C" fn(*mut c_void, *mut c_void, ...) -> c_int;
type TxAddRangeFn = unsafe extern "C" fn(PMEMoid, u64, usize) -> c_int;
type TxVoidFn = unsafe extern "C" fn();
type TxEndFn = unsafe extern "C" fn() -> c_int;
type TxAllocFn = unsafe extern "C" fn(usize, u64) -> PMEMoid;
type TxFreeFn = unsafe extern "C" fn(PMEMoid) -> c_int;
type ErrMsgFn = unsafe extern "C" fn() -> *const c_char;
type VersionFn = unsafe extern "C" fn(c_int, c_int) -> *const c_char;

/// The loaded library and the functions the benchmarks call.
pub struct Pmdk {
    _lib: Library,
    create: CreateFn,
    close: CloseFn,
    root: RootFn,
    direct: DirectFn,
    tx_begin: TxBeginFn,
    tx_add_range: TxAddRangeFn,
    tx_commit: TxVoidFn,
    tx_abort: unsafe extern "C" fn(c_int),
    tx_end: TxEndFn,
    tx_alloc: TxAllocFn,
    tx_free: TxFreeFn,
    errormsg: ErrMsgFn,
    pub version: String,
}

impl Pmdk {
    /// Load libpmemobj, or explain why not.
    pub fn load() -> Result<Pmdk> {
        // Must be set before the library's constructor runs.
        std::env::set_var("PMEM_IS_PMEM_FORCE", "1");
        std::env::set_var("PMEMOBJ_CONF", "sds.at_create=0");
        let mut last = String::new();
        for name in ["libpmemobj.so.1", "libpmemobj.so"] {
            // SAFETY: loading libpmemobj runs its ELF constructors, which only initialise the
            // library's own state.
            match unsafe { Library::new(name) } {
                Ok(lib) => return Self::bind(lib),
                Err(e) => last = e.to_string(),
            }
        }
        Err(anyhow!(
            "PMDK's libpmemobj is not installed ({last}); install Debian's libpmemobj-dev to compare"
        ))
    }

    fn bind(lib: Library) -> Result<Pmdk> {
        macro_rules! sym {
            ($name:literal, $t:ty) => {{
                // SAFETY: the symbol has this C signature in libpmemobj 1.x and 2.x
                // (libpmemobj/base.h, pool_base.h, tx_base.h).
                let s: libloading::Symbol<$t> = unsafe { lib.get($name) }.map_err(|e| {
                    anyhow!("libpmemobj lacks {}: {e}", String::from_utf8_lossy($name))
                })?;
                *s
            }};
        }
        let version_fn = sym!(b"pmemobj_check_version", VersionFn);
        let p = Pmdk {
            create: sym!(b"pmemobj_create", CreateFn),
            close: sym!(b"pmemobj_close", CloseFn),
            root: sym!(b"pmemobj_root", RootFn),
            direct: sym!(b"pmemobj_direct", DirectFn),
            tx_begin: sym!(b"pmemobj_tx_begin", TxBeginFn),
            tx_add_range: sym!(b"pmemobj_tx_add_range", TxAddRangeFn),
            tx_commit: sym!(b"pmemobj_tx_commit", TxVoidFn),
            tx_abort: sym!(b"pmemobj_tx_abort", unsafe extern "C" fn(c_int)),
            tx_end: sym!(b"pmemobj_tx_end", TxEndFn),
            tx_alloc: sym!(b"pmemobj_tx_alloc", TxAllocFn),
            tx_free: sym!(b"pmemobj_tx_free", TxFreeFn),
            errormsg: sym!(b"pmemobj_errormsg", ErrMsgFn),
            version: String::new(),
            _lib: lib,
        };
        // The API major version differs between PMDK releases (1.x ships API 2): ask which
        // one this library accepts. check_version(major, minor) returns NULL when compatible.
        let api = (1..=3).find(|&major| {
            // SAFETY: check_version returns NULL or a pointer to a static message.
            unsafe { version_fn(major, 0) }.is_null()
        });
        let package = std::process::Command::new("dpkg-query")
            .args(["-W", "-f=${Version}", "libpmemobj1"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|v| !v.is_empty());
        let version = format!(
            "libpmemobj API {}{}",
            api.map(|a| a.to_string()).unwrap_or_else(|| "?".into()),
            package
                .map(|v| format!(" (Debian package {v})"))
                .unwrap_or_default()
        );
        Ok(Pmdk { version, ..p })
    }

    fn err(&self) -> anyhow::Error {
        // SAFETY: errormsg returns a thread-local NUL-terminated string.
        let msg = unsafe { CStr::from_ptr((self.errormsg)()) }
            .to_string_lossy()
            .into_owned();
        anyhow!(msg)
    }
}

/// An open PMDK pool with a root object of `root_size` bytes.
pub struct PmdkPool<'a> {
    pub lib: &'a Pmdk,
    pop: *mut c_void,
    pub root: PMEMoid,
    root_size: usize,
}

impl<'a> PmdkPool<'a> {
    pub fn create(lib: &'a Pmdk, path: &Path, size: usize, root_size: usize) -> Result<Self> {
        let _ = std::fs::remove_file(path);
        let cpath = CString::new(path.as_os_str().as_encoded_bytes())?;
        let layout = CString::new("daisy-bench").unwrap();
        // SAFETY: valid C strings; PMDK creates the file.
        let pop = unsafe { (lib.create)(cpath.as_ptr(), layout.as_ptr(), size, 0o600) };
        if pop.is_null() {
            return Err(anyhow!("pmemobj_create {}: {}", path.display(), lib.err()));
        }
        // SAFETY: pop is an open pool.
        let root = unsafe { (lib.root)(pop, root_size) };
        if root.off == 0 {
            // SAFETY: pop is open and closed once.
            unsafe { (lib.close)(pop) };
            return Err(anyhow!("pmemobj_root: {}", lib.err()));
        }
        Ok(PmdkPool {
            lib,
            pop,
            root,
            root_size,
        })
    }

    /// Size of the root object asked for at creation.
    pub fn root_size(&self) -> usize {
        self.root_size
    }

    /// Read the u64 at `off` of the root object, in or out of a transaction (a plain load: the
    /// benchmark is single-threaded, and PMDK's transactions write in place).
    /// Panics when `[off, off+8)` is outside the root object.
    pub fn read_root_u64(&self, off: u64) -> u64 {
        assert!(
            (off as usize)
                .checked_add(8)
                .is_some_and(|end| end <= self.root_size),
            "read outside the PMDK root object: {off}+8 > {}",
            self.root_size
        );
        let p = self.direct(self.root);
        // SAFETY: [off, off+8) lies inside the root object (checked above), which stays mapped
        // while the pool is open (as long as `self`).
        unsafe { std::ptr::read_unaligned(p.add(off as usize) as *const u64) }
    }

    /// Address of an object.
    pub fn direct(&self, oid: PMEMoid) -> *mut u8 {
        // SAFETY: oid belongs to this open pool.
        unsafe { (self.lib.direct)(oid) as *mut u8 }
    }

    /// Run `f` inside a PMDK transaction (TX_BEGIN ... TX_END without setjmp: errors are
    /// returned by the calls, which is how the benchmark uses them).
    pub fn tx(&self, f: impl FnOnce(&PmdkTx<'_>) -> Result<()>) -> Result<()> {
        // SAFETY: pop is open; a NULL jmp_buf selects error-return mode; TX_PARAM_NONE ends the
        // variadic parameter list.
        let r = unsafe { (self.lib.tx_begin)(self.pop, std::ptr::null_mut(), 0 as c_int) };
        if r != 0 {
            return Err(anyhow!("pmemobj_tx_begin: {}", self.lib.err()));
        }
        let t = PmdkTx { pool: self };
        let res = f(&t);
        // SAFETY: a transaction is open on this thread.
        unsafe {
            match &res {
                Ok(()) => (self.lib.tx_commit)(),
                Err(_) => (self.lib.tx_abort)(libc::ECANCELED),
            }
            (self.lib.tx_end)();
        }
        res
    }
}

impl Drop for PmdkPool<'_> {
    fn drop(&mut self) {
        // SAFETY: pop is open and closed exactly once.
        unsafe { (self.lib.close)(self.pop) }
    }
}

/// Calls valid inside [`PmdkPool::tx`].
pub struct PmdkTx<'a> {
    pool: &'a PmdkPool<'a>,
}

impl PmdkTx<'_> {
    /// Snapshot `[off, off+len)` of `oid` into the undo log before modifying it.
    pub fn add_range(&self, oid: PMEMoid, off: u64, len: usize) -> Result<()> {
        // SAFETY: called inside an open transaction on an object of this pool.
        let r = unsafe { (self.pool.lib.tx_add_range)(oid, off, len) };
        if r != 0 {
            return Err(anyhow!("pmemobj_tx_add_range: {}", self.pool.lib.err()));
        }
        Ok(())
    }

    /// Store a u64 at `ptr` (after `add_range` covered it).
    pub fn store_u64(&self, oid: PMEMoid, off: u64, v: u64) {
        let p = self.pool.direct(oid);
        // SAFETY: the caller added [off, off+8) of oid, which lies inside the object.
        unsafe { std::ptr::write_unaligned(p.add(off as usize) as *mut u64, v) }
    }

    pub fn load_u64(&self, oid: PMEMoid, off: u64) -> u64 {
        let p = self.pool.direct(oid);
        // SAFETY: inside the object.
        unsafe { std::ptr::read_unaligned(p.add(off as usize) as *const u64) }
    }

    pub fn alloc(&self, size: usize) -> Result<PMEMoid> {
        // SAFETY: inside an open transaction.
        let oid = unsafe { (self.pool.lib.tx_alloc)(size, 1) };
        if oid.off == 0 {
            return Err(anyhow!("pmemobj_tx_alloc: {}", self.pool.lib.err()));
        }
        Ok(oid)
    }

    pub fn free(&self, oid: PMEMoid) -> Result<()> {
        // SAFETY: inside an open transaction; oid was allocated in this pool.
        let r = unsafe { (self.pool.lib.tx_free)(oid) };
        if r != 0 {
            return Err(anyhow!("pmemobj_tx_free: {}", self.pool.lib.err()));
        }
        Ok(())
    }
}

/// PMDK's own B-tree, the `btree_map` example Debian's libpmemobj-dev ships (source under
/// [`BTREE_EXAMPLES`]): compiled at run time with the system C compiler into a small shared
/// library with the shim below, then loaded. Keys are u64 (an 8-byte score), every insert and
/// removal its own PMDK transaction (the example's own TX_BEGIN/TX_END), order 8 nodes.
pub struct PmdkBtree {
    _lib: Library,
    h: *mut c_void,
    insert: unsafe extern "C" fn(*mut c_void, u64) -> c_int,
    lookup: unsafe extern "C" fn(*mut c_void, u64) -> c_int,
    remove: unsafe extern "C" fn(*mut c_void, u64) -> c_int,
    close: unsafe extern "C" fn(*mut c_void),
}

/// Where Debian's libpmemobj-dev puts the tree-map examples.
pub const BTREE_EXAMPLES: &str = "/usr/share/doc/libpmemobj-dev/examples/tree_map";

const BTREE_SHIM: &str = r#"
#include <stdlib.h>
#include <libpmemobj.h>
#include "btree_map.h"
struct root { TOID(struct btree_map) map; };
struct h { PMEMobjpool *pop; TOID(struct btree_map) map; };
void *dbt_open(const char *path, size_t size) {
	PMEMobjpool *pop = pmemobj_create(path, "daisy.bench.btree", size, 0600);
	if (!pop) return NULL;
	PMEMoid r = pmemobj_root(pop, sizeof(struct root));
	struct root *rp = pmemobj_direct(r);
	if (btree_map_create(pop, &rp->map, NULL)) { pmemobj_close(pop); return NULL; }
	struct h *h = malloc(sizeof(*h));
	h->pop = pop; h->map = rp->map;
	return h;
}
int dbt_insert(void *p, unsigned long long k) {
	struct h *h = p;
	PMEMoid v = { 1, k };
	return btree_map_insert(h->pop, h->map, k, v);
}
int dbt_lookup(void *p, unsigned long long k) {
	struct h *h = p;
	return btree_map_lookup(h->pop, h->map, k);
}
int dbt_remove(void *p, unsigned long long k) {
	struct h *h = p;
	return OID_IS_NULL(btree_map_remove(h->pop, h->map, k)) ? -1 : 0;
}
void dbt_close(void *p) { struct h *h = p; pmemobj_close(h->pop); free(h); }
"#;

impl PmdkBtree {
    /// Compile the example and the shim in `build_dir` (needs `cc` and the examples), load
    /// it, and create a pool of `size` bytes at `path`; or explain why not.
    pub fn create(build_dir: &Path, path: &Path, size: usize) -> Result<PmdkBtree> {
        Pmdk::load()?; // sets PMDK's environment (pmem mode on tmpfs) before the library loads
        let src = Path::new(BTREE_EXAMPLES);
        if !src.join("btree_map.c").exists() {
            return Err(anyhow!(
                "PMDK's btree_map example is not at {BTREE_EXAMPLES} (Debian's libpmemobj-dev ships it)"
            ));
        }
        std::fs::create_dir_all(build_dir)?;
        let shim = build_dir.join("dbt_shim.c");
        std::fs::write(&shim, BTREE_SHIM)?;
        let so = build_dir.join(format!("libdaisy_btree_{}.so", std::process::id()));
        let out = std::process::Command::new("cc")
            .args(["-O2", "-shared", "-fPIC", "-o"])
            .arg(&so)
            .arg(&shim)
            .arg(src.join("btree_map.c"))
            .arg("-I")
            .arg(src)
            .arg("-lpmemobj")
            .output()
            .map_err(|e| anyhow!("cc (to build PMDK's btree_map example): {e}"))?;
        if !out.status.success() {
            return Err(anyhow!(
                "building PMDK's btree_map example failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        // SAFETY: the library just built from the shim above and PMDK's example; its
        // constructors are libpmemobj's (already loaded) and the C runtime's.
        let lib = unsafe { Library::new(&so) }.map_err(|e| anyhow!("{}: {e}", so.display()))?;
        let _ = std::fs::remove_file(&so);
        let _ = std::fs::remove_file(&shim);
        macro_rules! sym {
            ($name:literal, $t:ty) => {{
                // SAFETY: the shim defines the symbol with this C signature.
                let s: libloading::Symbol<$t> = unsafe { lib.get($name) }?;
                *s
            }};
        }
        let open = sym!(
            b"dbt_open",
            unsafe extern "C" fn(*const c_char, usize) -> *mut c_void
        );
        let insert = sym!(
            b"dbt_insert",
            unsafe extern "C" fn(*mut c_void, u64) -> c_int
        );
        let lookup = sym!(
            b"dbt_lookup",
            unsafe extern "C" fn(*mut c_void, u64) -> c_int
        );
        let remove = sym!(
            b"dbt_remove",
            unsafe extern "C" fn(*mut c_void, u64) -> c_int
        );
        let close = sym!(b"dbt_close", unsafe extern "C" fn(*mut c_void));
        let _ = std::fs::remove_file(path);
        let cpath = CString::new(path.as_os_str().as_encoded_bytes())?;
        // SAFETY: a valid C string; PMDK creates the file.
        let h = unsafe { open(cpath.as_ptr(), size) };
        if h.is_null() {
            return Err(anyhow!(
                "creating a PMDK pool for btree_map at {}",
                path.display()
            ));
        }
        Ok(PmdkBtree {
            _lib: lib,
            h,
            insert,
            lookup,
            remove,
            close,
        })
    }

    /// Insert `key` (nonzero: the example reserves 0), one PMDK transaction.
    pub fn insert(&mut self, key: u64) -> Result<()> {
        // SAFETY: h is the open handle dbt_open returned.
        match unsafe { (self.insert)(self.h, key) } {
            0 => Ok(()),
            e => Err(anyhow!("btree_map_insert: {e}")),
        }
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: u64) -> bool {
        // SAFETY: h is open.
        unsafe { (self.lookup)(self.h, key) != 0 }
    }

    /// Remove `key`, one PMDK transaction; false when it was absent.
    pub fn remove(&mut self, key: u64) -> bool {
        // SAFETY: h is open.
        unsafe { (self.remove)(self.h, key) == 0 }
    }
}

impl Drop for PmdkBtree {
    fn drop(&mut self) {
        // SAFETY: h is open and closed exactly once.
        unsafe { (self.close)(self.h) }
    }
}

// ---- libpmemblk: PMDK's block store (seed 002's rival of Daisy's `PBlockStore`) ----

type BlkCreateFn = unsafe extern "C" fn(*const c_char, usize, usize, u32) -> *mut c_void;
type BlkCloseFn = unsafe extern "C" fn(*mut c_void);
type BlkNblockFn = unsafe extern "C" fn(*mut c_void) -> usize;
type BlkReadFn = unsafe extern "C" fn(*mut c_void, *mut c_void, i64) -> c_int;
type BlkWriteFn = unsafe extern "C" fn(*mut c_void, *const c_void, i64) -> c_int;

/// PMDK's libpmemblk, loaded at run time (Debian's libpmemblk-dev; PMDK 1.x only: PMDK 2
/// dropped it).
pub struct Pmemblk {
    _lib: Library,
    create: BlkCreateFn,
    close: BlkCloseFn,
    nblock: BlkNblockFn,
    read: BlkReadFn,
    write: BlkWriteFn,
    errormsg: ErrMsgFn,
    pub version: String,
}

impl Pmemblk {
    /// Load libpmemblk, or explain why not. Forces pmem mode on tmpfs, as [`Pmdk::load`].
    pub fn load() -> Result<Pmemblk> {
        // Must be set before the library's constructor runs.
        std::env::set_var("PMEM_IS_PMEM_FORCE", "1");
        let mut last = String::new();
        for name in ["libpmemblk.so.1", "libpmemblk.so"] {
            // SAFETY: loading libpmemblk runs its ELF constructors, which only initialise the
            // library's own state.
            match unsafe { Library::new(name) } {
                Ok(lib) => return Self::bind(lib),
                Err(e) => last = e.to_string(),
            }
        }
        Err(anyhow!(
            "PMDK's libpmemblk is not installed ({last}); install Debian's libpmemblk-dev to compare"
        ))
    }

    fn bind(lib: Library) -> Result<Pmemblk> {
        macro_rules! sym {
            ($name:literal, $t:ty) => {{
                // SAFETY: the symbol has this C signature in libpmemblk 1.x (libpmemblk.h).
                let s: libloading::Symbol<$t> = unsafe { lib.get($name) }.map_err(|e| {
                    anyhow!("libpmemblk lacks {}: {e}", String::from_utf8_lossy($name))
                })?;
                *s
            }};
        }
        let package = std::process::Command::new("dpkg-query")
            .args(["-W", "-f=${Version}", "libpmemblk1"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|v| !v.is_empty());
        Ok(Pmemblk {
            create: sym!(b"pmemblk_create", BlkCreateFn),
            close: sym!(b"pmemblk_close", BlkCloseFn),
            nblock: sym!(b"pmemblk_nblock", BlkNblockFn),
            read: sym!(b"pmemblk_read", BlkReadFn),
            write: sym!(b"pmemblk_write", BlkWriteFn),
            errormsg: sym!(b"pmemblk_errormsg", ErrMsgFn),
            version: format!(
                "libpmemblk{}",
                package
                    .map(|v| format!(" (Debian package {v})"))
                    .unwrap_or_default()
            ),
            _lib: lib,
        })
    }

    fn err(&self) -> anyhow::Error {
        // SAFETY: errormsg returns a thread-local NUL-terminated string.
        let msg = unsafe { CStr::from_ptr((self.errormsg)()) }
            .to_string_lossy()
            .into_owned();
        anyhow!(msg)
    }
}

/// An open libpmemblk pool. libpmemblk's calls are thread-safe (its lanes): share it.
pub struct PmemblkPool<'a> {
    lib: &'a Pmemblk,
    pbp: *mut c_void,
    bsize: usize,
    nblock: u64,
}

// SAFETY: libpmemblk documents pmemblk_read/pmemblk_write as safe to call from many threads on
// one pool (it serialises per block and per lane internally); the handle is only closed in
// Drop, which needs exclusive access.
unsafe impl Send for PmemblkPool<'_> {}
// SAFETY: as above.
unsafe impl Sync for PmemblkPool<'_> {}

impl<'a> PmemblkPool<'a> {
    /// Create a pool file of `size` bytes with blocks of `bsize` bytes (the file is replaced).
    pub fn create(lib: &'a Pmemblk, path: &Path, bsize: usize, size: usize) -> Result<Self> {
        let _ = std::fs::remove_file(path);
        let cpath = CString::new(path.as_os_str().as_encoded_bytes())?;
        // SAFETY: a valid C string; libpmemblk creates the file.
        let pbp = unsafe { (lib.create)(cpath.as_ptr(), bsize, size, 0o600) };
        if pbp.is_null() {
            return Err(anyhow!("pmemblk_create {}: {}", path.display(), lib.err()));
        }
        // SAFETY: pbp is an open pool.
        let nblock = unsafe { (lib.nblock)(pbp) } as u64;
        Ok(PmemblkPool {
            lib,
            pbp,
            bsize,
            nblock,
        })
    }

    /// Blocks the pool holds (less than the file's size over the block size: its BTT).
    /// Bytes per block.
    pub fn block_size(&self) -> usize {
        self.bsize
    }

    pub fn nblock(&self) -> u64 {
        self.nblock
    }

    /// Read block `n` into `buf` (`bsize` bytes).
    pub fn read(&self, n: u64, buf: &mut [u8]) -> Result<()> {
        assert!(
            buf.len() == self.bsize && n < self.nblock,
            "pmemblk read out of range"
        );
        // SAFETY: the pool is open; buf holds bsize bytes; n is below nblock.
        if unsafe { (self.lib.read)(self.pbp, buf.as_mut_ptr().cast(), n as i64) } != 0 {
            return Err(anyhow!("pmemblk_read {n}: {}", self.lib.err()));
        }
        Ok(())
    }

    /// Write `buf` (`bsize` bytes) as block `n`: atomic, durable when it returns.
    pub fn write(&self, n: u64, buf: &[u8]) -> Result<()> {
        assert!(
            buf.len() == self.bsize && n < self.nblock,
            "pmemblk write out of range"
        );
        // SAFETY: the pool is open; buf holds bsize bytes; n is below nblock.
        if unsafe { (self.lib.write)(self.pbp, buf.as_ptr().cast(), n as i64) } != 0 {
            return Err(anyhow!("pmemblk_write {n}: {}", self.lib.err()));
        }
        Ok(())
    }
}

impl Drop for PmemblkPool<'_> {
    fn drop(&mut self) {
        // SAFETY: pbp is open and closed once.
        unsafe { (self.lib.close)(self.pbp) };
    }
}
