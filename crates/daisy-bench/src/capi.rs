//! Daisy's C API (libdaisy.so, crates/daisy-c), loaded at run time for `daisy bench tx --api
//! c`: the same transactions as the Rust path, through the C ABI of a separately built
//! library (dlopen: no inlining across the boundary, as a C program gets).
//!
//! All `unsafe` of this module is calls into that library; each states its contract.

#![expect(unsafe_code, reason = "libdaisy's C API is called through dlopen")]
use anyhow::{anyhow, Result};
use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};

type PoolCreateFn = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    u64,
    u64,
    *const c_void,
    *mut *mut c_void,
) -> c_int;
type PoolOpenFn = unsafe extern "C" fn(*const c_char, *const c_char, *mut *mut c_void) -> c_int;
type PoolCloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type RootFn = unsafe extern "C" fn(*const c_void, u64, *mut u64) -> c_int;
type TxBeginFn = unsafe extern "C" fn(*mut c_void, *mut *mut c_void) -> c_int;
type TxEndFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type TxAllocFn = unsafe extern "C" fn(*mut c_void, u64, *mut u64) -> c_int;
type TxFreeFn = unsafe extern "C" fn(*mut c_void, u64) -> c_int;
type TxWriteFn = unsafe extern "C" fn(*mut c_void, u64, *const c_void, usize) -> c_int;
type TxReadFn = unsafe extern "C" fn(*mut c_void, u64, *mut c_void, usize) -> c_int;
type ErrMsgFn = unsafe extern "C" fn() -> *const c_char;

/// The loaded libdaisy and the functions the benchmark calls.
pub struct DaisyC {
    _lib: Library,
    pool_create: PoolCreateFn,
    pool_open: PoolOpenFn,
    pool_close: PoolCloseFn,
    root: RootFn,
    tx_begin: TxBeginFn,
    tx_commit: TxEndFn,
    tx_abort: TxEndFn,
    tx_alloc: TxAllocFn,
    tx_free: TxFreeFn,
    tx_write: TxWriteFn,
    tx_read: TxReadFn,
    errmsg: ErrMsgFn,
    /// The file loaded.
    pub path: PathBuf,
}

impl DaisyC {
    /// Where libdaisy.so is looked for when no path is given: `$DAISY_LIB`, then beside the
    /// running executable (`cargo build --release -p daisy-c` puts it beside `daisy`).
    pub fn default_path() -> PathBuf {
        if let Some(p) = std::env::var_os("DAISY_LIB") {
            return PathBuf::from(p);
        }
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join("libdaisy.so")))
            .unwrap_or_else(|| PathBuf::from("libdaisy.so"))
    }

    /// Load libdaisy from `path`, or explain why not.
    pub fn load(path: &Path) -> Result<DaisyC> {
        // SAFETY: loading libdaisy runs no constructor beyond the Rust runtime's own.
        let lib = unsafe { Library::new(path) }.map_err(|e| {
            anyhow!(
                "{}: {e} (build it with `cargo build --release -p daisy-c`, or give --libdaisy)",
                path.display()
            )
        })?;
        macro_rules! sym {
            ($name:literal, $t:ty) => {{
                // SAFETY: the symbol has this C signature in include/daisy.h.
                let s: libloading::Symbol<$t> = unsafe { lib.get($name) }.map_err(|e| {
                    anyhow!("libdaisy lacks {}: {e}", String::from_utf8_lossy($name))
                })?;
                *s
            }};
        }
        Ok(DaisyC {
            pool_create: sym!(b"daisy_pool_create", PoolCreateFn),
            pool_open: sym!(b"daisy_pool_open", PoolOpenFn),
            pool_close: sym!(b"daisy_pool_close", PoolCloseFn),
            root: sym!(b"daisy_root", RootFn),
            tx_begin: sym!(b"daisy_tx_begin", TxBeginFn),
            tx_commit: sym!(b"daisy_tx_commit", TxEndFn),
            tx_abort: sym!(b"daisy_tx_abort", TxEndFn),
            tx_alloc: sym!(b"daisy_tx_alloc", TxAllocFn),
            tx_free: sym!(b"daisy_tx_free", TxFreeFn),
            tx_write: sym!(b"daisy_tx_write", TxWriteFn),
            tx_read: sym!(b"daisy_tx_read", TxReadFn),
            errmsg: sym!(b"daisy_errmsg", ErrMsgFn),
            path: path.to_path_buf(),
            _lib: lib,
        })
    }

    fn err(&self, rc: c_int) -> anyhow::Error {
        // SAFETY: daisy_errmsg returns a thread-local NUL-terminated string.
        let msg = unsafe { CStr::from_ptr((self.errmsg)()) }
            .to_string_lossy()
            .into_owned();
        anyhow!("libdaisy error {rc}: {msg}")
    }
}

/// A pool opened through the C API, with its root object.
pub struct CPool<'a> {
    lib: &'a DaisyC,
    pool: *mut c_void,
    /// The root object's offset.
    pub root: u64,
}

/// An open transaction of the C API.
pub struct CTx<'a> {
    lib: &'a DaisyC,
    tx: *mut c_void,
}

impl<'a> CPool<'a> {
    /// Create `path` (layout `layout`, default options) with a root object of `root_size`
    /// bytes.
    pub fn create(
        lib: &'a DaisyC,
        path: &Path,
        layout: &str,
        size: u64,
        max: u64,
        root_size: u64,
    ) -> Result<Self> {
        let p = CString::new(path.to_string_lossy().as_bytes())?;
        let layout = CString::new(layout)?;
        let mut pool = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings, NULL options (defaults), a valid out-pointer.
        let rc = unsafe {
            (lib.pool_create)(
                p.as_ptr(),
                layout.as_ptr(),
                size,
                max,
                std::ptr::null(),
                &mut pool,
            )
        };
        if rc != 0 {
            return Err(lib.err(rc));
        }
        Self::with_root(lib, pool, root_size)
    }

    /// Open the pool file `path` of layout `layout` (made by [`CPool::create`] or through the
    /// Rust API) with its root object of `root_size` bytes.
    pub fn open(lib: &'a DaisyC, path: &Path, layout: &str, root_size: u64) -> Result<Self> {
        let p = CString::new(path.to_string_lossy().as_bytes())?;
        let layout = CString::new(layout)?;
        let mut pool = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings, a valid out-pointer.
        let rc = unsafe { (lib.pool_open)(p.as_ptr(), layout.as_ptr(), &mut pool) };
        if rc != 0 {
            return Err(lib.err(rc));
        }
        Self::with_root(lib, pool, root_size)
    }

    /// The handle of a pool just created or opened, with its root object (the pool is closed
    /// again when the root cannot be had).
    fn with_root(lib: &'a DaisyC, pool: *mut c_void, root_size: u64) -> Result<Self> {
        let mut root = 0;
        // SAFETY: a live pool handle and a valid out-pointer.
        let rc = unsafe { (lib.root)(pool, root_size, &mut root) };
        let me = CPool { lib, pool, root };
        if rc != 0 {
            return Err(lib.err(rc));
        }
        Ok(me)
    }

    /// Run `f` in one transaction: commit when it returns Ok, abort otherwise.
    #[inline(always)]
    pub fn tx(&self, f: impl FnOnce(&CTx<'a>) -> Result<()>) -> Result<()> {
        let mut tx = std::ptr::null_mut();
        // SAFETY: a live pool handle and a valid out-pointer.
        let rc = unsafe { (self.lib.tx_begin)(self.pool, &mut tx) };
        if rc != 0 {
            return Err(self.lib.err(rc));
        }
        let t = CTx { lib: self.lib, tx };
        match f(&t) {
            Ok(()) => {
                // SAFETY: a live transaction of this thread, not used again.
                let rc = unsafe { (self.lib.tx_commit)(tx) };
                if rc != 0 {
                    return Err(self.lib.err(rc));
                }
                Ok(())
            }
            Err(e) => {
                // SAFETY: a live transaction of this thread, not used again.
                unsafe { (self.lib.tx_abort)(tx) };
                Err(e)
            }
        }
    }
}

impl Drop for CPool<'_> {
    fn drop(&mut self) {
        // SAFETY: a live pool handle with no transaction open, not used again.
        unsafe { (self.lib.pool_close)(self.pool) };
    }
}

impl CTx<'_> {
    #[inline(always)]
    fn ok(&self, rc: c_int) -> Result<()> {
        if rc == 0 {
            Ok(())
        } else {
            Err(self.lib.err(rc))
        }
    }
    /// daisy_tx_write.
    #[inline(always)]
    pub fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        // SAFETY: a live transaction of this thread; `data` is readable.
        self.ok(unsafe {
            (self.lib.tx_write)(self.tx, off, data.as_ptr() as *const c_void, data.len())
        })
    }
    /// daisy_tx_read of a u64.
    #[inline(always)]
    pub fn read_u64(&self, off: u64) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: a live transaction of this thread; `v` is 8 writable bytes.
        self.ok(unsafe { (self.lib.tx_read)(self.tx, off, &mut v as *mut u64 as *mut c_void, 8) })?;
        Ok(v)
    }
    /// daisy_tx_alloc.
    #[inline(always)]
    pub fn alloc(&self, size: u64) -> Result<u64> {
        let mut off = 0;
        // SAFETY: a live transaction of this thread; a valid out-pointer.
        self.ok(unsafe { (self.lib.tx_alloc)(self.tx, size, &mut off) })?;
        Ok(off)
    }
    /// daisy_tx_free.
    #[inline(always)]
    pub fn free(&self, off: u64) -> Result<()> {
        // SAFETY: a live transaction of this thread.
        self.ok(unsafe { (self.lib.tx_free)(self.tx, off) })
    }
}
