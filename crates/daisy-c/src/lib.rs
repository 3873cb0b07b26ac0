//! The C API of Daisy: `libdaisy.so`, `libdaisy.a` and `include/daisy.h` (generated from this
//! file by cbindgen in build.rs; the doc comments below are the header's reference comments).
//!
//! Rules at the boundary: opaque handles; every function that can fail returns an `int`, 0 or
//! a non-negative result on success and a negative `DAISY_E*` code on failure, with a message
//! for the calling thread in `daisy_errmsg()`; no Rust type crosses it; a panic is caught in
//! every entry point, becomes `DAISY_EPANIC`, aborts the transaction it happened in and
//! poisons the pool, and never unwinds into C.
#![expect(
    unsafe_code,
    reason = "the C ABI: raw pointers from C, and a transaction that outlives its borrow"
)]
#![allow(non_camel_case_types)]

use daisy::{Error, ModeChoice, PBytesMap, PPtr, PSeq, PTreeMap, Pool, PoolOptions, Tx};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

// ---------------------------------------------------------------------------------------------
// Error codes.

/// Success.
pub const DAISY_OK: c_int = 0;
/// An argument is invalid: a NULL pointer where one is required, a bad option, a layout name
/// too long, a length that does not fit.
pub const DAISY_EINVAL: c_int = -1;
/// An I/O error from the operating system (the message names the file and the call).
pub const DAISY_EIO: c_int = -2;
/// The file is not a Daisy pool, or of a format version this library does not read.
pub const DAISY_ENOTPOOL: c_int = -3;
/// The pool's layout name is not the one asked for.
pub const DAISY_ELAYOUT: c_int = -4;
/// The pool is corrupt or truncated, or `daisy_pool_check` found a problem.
pub const DAISY_ECORRUPT: c_int = -5;
/// The resource is in use: the pool is open elsewhere (another process or handle), a
/// collection is open through another handle, or a pool is closed with transactions or
/// collection handles still open.
pub const DAISY_EBUSY: c_int = -6;
/// `daisy_pool_create`: the file exists.
pub const DAISY_EEXIST: c_int = -7;
/// The pool is full (its maximum size reached, or the file system full).
pub const DAISY_ENOSPC: c_int = -8;
/// The transaction's redo log outgrew its log slot and the pool has no room for the overflow
/// extent it then needs (or outgrew the 4 GiB one record may hold). Nothing was committed.
pub const DAISY_ETXTOOLARGE: c_int = -9;
/// A persistent pointer (offset) is outside the pool's heap, or not an allocated object.
pub const DAISY_EPTR: c_int = -10;
/// `daisy_root`: the root object exists with another size.
pub const DAISY_EROOTSIZE: c_int = -11;
/// The pool is poisoned (a failed persist, or a panic inside the library): nothing more can
/// be committed; close it and open it again (recovery runs as after a crash).
pub const DAISY_EPOISONED: c_int = -12;
/// A transaction could not begin: every lane of the pool is held by this thread's own open
/// transactions.
pub const DAISY_ENESTED: c_int = -13;
/// The offset does not hold a collection of the kind asked for.
pub const DAISY_ENOTCOLL: c_int = -14;
/// An index is out of range (sequences).
pub const DAISY_ERANGE: c_int = -15;
/// The key (or item) is not there.
pub const DAISY_ENOTFOUND: c_int = -16;
/// The value does not fit in the caller's buffer: `*len` says how long it is and the first
/// `cap` bytes were copied.
pub const DAISY_ENOBUFS: c_int = -17;
/// A transaction handle was used from a thread other than the one that began it.
pub const DAISY_ETHREAD: c_int = -18;
/// The transaction was aborted by an earlier error in it (or by its callback); only
/// `daisy_tx_commit` (which then returns this code) or `daisy_tx_abort` may follow.
pub const DAISY_EABORTED: c_int = -19;
/// An internal error (a panic inside the library, caught): the operation's transaction was
/// aborted and the pool poisoned.
pub const DAISY_EPANIC: c_int = -20;
/// The operation is not supported here.
pub const DAISY_EUNSUPPORTED: c_int = -21;
/// The most negative error code: every error code lies in `[DAISY_ERR_LAST, -1]`.
pub const DAISY_ERR_LAST: c_int = -21;

/// `daisy_options.mode`: pmem on tmpfs and DAX files, msync elsewhere; the environment
/// variable `DAISY_MODE` (auto, pmem, msync) overrides.
pub const DAISY_MODE_AUTO: c_int = 0;
/// `daisy_options.mode`: cache-line flushes and fences (the caller asserts the file is
/// persistent memory, or DRAM-backed for crash-of-process durability only).
pub const DAISY_MODE_PMEM: c_int = 1;
/// `daisy_options.mode`: `msync(MS_SYNC)` of the touched pages at each commit.
pub const DAISY_MODE_MSYNC: c_int = 2;

/// The library's version, as `major * 10000 + minor * 100 + patch`.
pub const DAISY_VERSION: c_int = 100;

fn code_of(e: &Error) -> c_int {
    match e {
        Error::Io { .. } | Error::IsADirectory { .. } => DAISY_EIO,
        Error::NotAPool { .. } | Error::UnsupportedVersion { .. } => DAISY_ENOTPOOL,
        Error::WrongLayout { .. } => DAISY_ELAYOUT,
        Error::Corrupt { .. } | Error::Truncated { .. } => DAISY_ECORRUPT,
        Error::AlreadyOpen { .. } | Error::CollectionInUse { .. } => DAISY_EBUSY,
        Error::AlreadyExists { .. } => DAISY_EEXIST,
        Error::InvalidOption(_) => DAISY_EINVAL,
        Error::PoolFull { .. } => DAISY_ENOSPC,
        Error::TxTooLarge { .. } | Error::TxTooLargeForPool { .. } => DAISY_ETXTOOLARGE,
        Error::InvalidPointer { .. } => DAISY_EPTR,
        Error::RootTypeMismatch { .. } => DAISY_EROOTSIZE,
        Error::Poisoned { .. } => DAISY_EPOISONED,
        Error::NestedTransaction { .. } => DAISY_ENESTED,
        Error::Aborted(_) => DAISY_EABORTED,
        Error::NotACollection { .. } => DAISY_ENOTCOLL,
        Error::Unsupported(_) => DAISY_EUNSUPPORTED,
        Error::IndexOutOfRange { .. } => DAISY_ERANGE,
        #[allow(unreachable_patterns)]
        _ => DAISY_EIO,
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

#[cfg(not(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
)))]
thread_local! {
    static THREAD_TOKEN: u8 = const { 0 };
}

/// A number unique to the calling thread while it lives: its thread pointer (one instruction
/// on x86_64 and aarch64 Linux; a thread-local's address elsewhere, which in a shared library
/// costs a `__tls_get_addr` call).
#[inline(always)]
fn thread_token() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let t: usize;
        // SAFETY: reads the thread control block's self-pointer at %fs:0 (the x86_64 Linux
        // TLS ABI): no memory is written, and the value identifies the running thread.
        unsafe {
            std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) t, options(nostack, readonly, preserves_flags))
        };
        t
    }
    #[cfg(all(target_arch = "aarch64", target_os = "linux"))]
    {
        let t: usize;
        // SAFETY: reads the thread pointer register (no memory access at all).
        unsafe {
            std::arch::asm!("mrs {}, tpidr_el0", out(reg) t, options(nomem, nostack, preserves_flags))
        };
        t
    }
    #[cfg(not(all(
        any(target_arch = "x86_64", target_arch = "aarch64"),
        target_os = "linux"
    )))]
    {
        THREAD_TOKEN.with(|t| t as *const u8 as usize)
    }
}

#[cold]
#[inline(never)]
fn set_error(code: c_int, msg: impl Into<String>) -> c_int {
    set_error_string(code, msg.into())
}

/// The message of `set_error`, out of line: only failing calls reach it, and keeping it (and
/// the thread-local it writes) out of the functions' hot paths keeps their frames small.
#[cold]
#[inline(never)]
fn set_error_string(code: c_int, msg: String) -> c_int {
    let mut m: Vec<u8> = msg.into_bytes();
    m.retain(|&b| b != 0);
    let c = CString::new(m).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
    code
}

#[cold]
#[inline(never)]
fn fail(e: &Error) -> c_int {
    set_error(code_of(e), e.to_string())
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".into()
    }
}

/// Run `f`, turning a panic into `DAISY_EPANIC` (poisoning `pool` when given) and an error into
/// its code. `f` returns the non-negative result.
#[inline(always)]
fn guard(pool: Option<&Pool>, f: impl FnOnce() -> Result<c_int, c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(code)) => code,
        Err(p) => {
            if let Some(pool) = pool {
                pool.poison();
            }
            set_error(
                DAISY_EPANIC,
                format!(
                    "internal error (the pool is poisoned): {}",
                    panic_message(&*p)
                ),
            )
        }
    }
}

#[cold]
#[inline(never)]
fn err(e: Error) -> c_int {
    fail(&e)
}

#[cold]
#[inline(never)]
fn invalid(what: &str) -> c_int {
    set_error(DAISY_EINVAL, format!("invalid argument: {what}"))
}

/// `ptr[..len]` as a slice; NULL is allowed when `len` is 0.
///
/// # Safety
/// `ptr` must point at `len` readable bytes (when `len > 0`).
unsafe fn bytes<'a>(ptr: *const c_void, len: usize, what: &str) -> Result<&'a [u8], c_int> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(invalid(what));
    }
    // SAFETY: the caller guarantees `len` readable bytes at `ptr`, non-null checked above.
    Ok(unsafe { std::slice::from_raw_parts(ptr as *const u8, len) })
}

/// `ptr[..len]` as a mutable slice; NULL is allowed when `len` is 0.
///
/// # Safety
/// `ptr` must point at `len` writable bytes (when `len > 0`).
unsafe fn bytes_mut<'a>(ptr: *mut c_void, len: usize, what: &str) -> Result<&'a mut [u8], c_int> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(invalid(what));
    }
    // SAFETY: the caller guarantees `len` writable bytes at `ptr`, non-null checked above.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) })
}

/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn string<'a>(s: *const c_char, what: &str) -> Result<&'a str, c_int> {
    if s.is_null() {
        return Err(invalid(what));
    }
    // SAFETY: non-null, and the caller guarantees a NUL-terminated string.
    let c = unsafe { CStr::from_ptr(s) };
    c.to_str()
        .map_err(|_| invalid(&format!("{what} is not UTF-8")))
}

/// Store `v` through an out-pointer.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, v: T) -> Result<(), c_int> {
    if out.is_null() {
        return Err(invalid("NULL output pointer"));
    }
    // SAFETY: non-null, and the caller guarantees it is writable.
    unsafe { out.write(v) };
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Errors and version.

/// A static description of an error code (never NULL; "unknown error code" for a value that
/// is not one). Thread-safe.
#[no_mangle]
pub extern "C" fn daisy_strerror(code: c_int) -> *const c_char {
    let s: &'static CStr = match code {
        DAISY_OK => c"success",
        DAISY_EINVAL => c"invalid argument",
        DAISY_EIO => c"I/O error",
        DAISY_ENOTPOOL => c"not a Daisy pool (or an unsupported format version)",
        DAISY_ELAYOUT => c"wrong layout name",
        DAISY_ECORRUPT => c"pool is corrupt",
        DAISY_EBUSY => c"resource busy",
        DAISY_EEXIST => c"file exists",
        DAISY_ENOSPC => c"pool is full",
        DAISY_ETXTOOLARGE => c"transaction too large",
        DAISY_EPTR => c"invalid persistent pointer",
        DAISY_EROOTSIZE => c"root object has another size",
        DAISY_EPOISONED => c"pool is poisoned; reopen it",
        DAISY_ENESTED => c"no lane free for a nested transaction",
        DAISY_ENOTCOLL => c"not a collection of that kind",
        DAISY_ERANGE => c"index out of range",
        DAISY_ENOTFOUND => c"not found",
        DAISY_ENOBUFS => c"buffer too small",
        DAISY_ETHREAD => c"transaction used from another thread",
        DAISY_EABORTED => c"transaction aborted",
        DAISY_EPANIC => c"internal error (pool poisoned)",
        DAISY_EUNSUPPORTED => c"operation not supported",
        _ => c"unknown error code",
    };
    s.as_ptr()
}

/// The message of the last error in the calling thread: what failed and why, with the file
/// and figures (empty when no call has failed in this thread). The string belongs to the
/// library and stays valid until the next failing call in the same thread. Successful calls
/// leave it as it was. Thread-safe (one message per thread).
#[no_mangle]
pub extern "C" fn daisy_errmsg() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// For tests of programs and bindings: panic inside the library, as a bug would, to exercise
/// the panic guard. Only when the environment variable `DAISY_TEST_HOOKS` is `1`: then the
/// panic is caught, `pool` is poisoned and the call returns `DAISY_EPANIC`; otherwise it does
/// nothing and returns `DAISY_EUNSUPPORTED`. Thread-safe.
///
/// # Safety
/// `pool` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn daisy_test_panic(pool: *const daisy_pool) -> c_int {
    if pool.is_null() {
        return invalid("NULL pool");
    }
    if std::env::var("DAISY_TEST_HOOKS").as_deref() != Ok("1") {
        return set_error(
            DAISY_EUNSUPPORTED,
            "daisy_test_panic: DAISY_TEST_HOOKS is not 1",
        );
    }
    // SAFETY: a live handle by contract.
    let p = unsafe { &(*pool).pool };
    guard(Some(p), || panic!("daisy_test_panic"))
}

/// The library's version (`DAISY_VERSION` of the library actually linked). Thread-safe.
#[no_mangle]
pub extern "C" fn daisy_version() -> c_int {
    DAISY_VERSION
}

// ---------------------------------------------------------------------------------------------
// Pools.

/// Options for `daisy_pool_create`. Initialise with `daisy_options_init`, then change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct daisy_options {
    /// `DAISY_MODE_AUTO` (default), `DAISY_MODE_PMEM` or `DAISY_MODE_MSYNC`. The flush
    /// instruction in pmem mode is the best the CPU has (clwb, clflushopt, clflush); the
    /// environment variable `DAISY_FLUSH` picks one (valgrind needs `DAISY_FLUSH=clflush`).
    pub mode: c_int,
    /// Log lanes: threads that can commit at once without waiting (0: the default, 32).
    pub lanes: u32,
    /// Bytes of one log slot, the redo log one transaction writes without an overflow
    /// extent (0: the default, 16 KiB; else 256 B to 64 MiB, a multiple of 64).
    pub log_slot_size: u32,
}

/// Fill `opts` with the defaults. Thread-safe.
///
/// # Safety
/// `opts` is NULL (nothing happens) or points at a `daisy_options`.
#[no_mangle]
pub unsafe extern "C" fn daisy_options_init(opts: *mut daisy_options) {
    if !opts.is_null() {
        // SAFETY: non-null, and the caller guarantees it points at a daisy_options.
        unsafe {
            opts.write(daisy_options {
                mode: DAISY_MODE_AUTO,
                lanes: 0,
                log_slot_size: 0,
            })
        };
    }
}

/// An open pool (opaque). Thread-safe: any thread may use it, at the same time.
pub struct daisy_pool {
    /// The transaction handles, one per log lane (before `pool`: they borrow it).
    slots: Box<[TxSlot]>,
    pool: Pool,
    /// Open collection handles on this pool: `daisy_pool_close` refuses while any is open.
    children: AtomicUsize,
}

impl daisy_pool {
    fn new(pool: Pool) -> Box<daisy_pool> {
        let slots = (0..pool.lane_count())
            .map(|_| {
                TxSlot(std::cell::UnsafeCell::new(daisy_tx {
                    tx: MaybeUninit::uninit(),
                    open: false,
                    failed: false,
                    pool: std::ptr::null(),
                    thread: 0,
                }))
            })
            .collect();
        let b = Box::new(daisy_pool {
            slots,
            pool,
            children: AtomicUsize::new(0),
        });
        let me: *const daisy_pool = &*b;
        for s in b.slots.iter() {
            // SAFETY: the handle is not shared yet: nothing else touches its slots.
            unsafe { (*s.0.get()).pool = me };
        }
        b
    }

    /// Transactions open on this pool (close refuses while there is one). Not to be called
    /// while transactions begin or end (close's contract).
    fn open_transactions(&self) -> usize {
        self.slots
            .iter()
            // SAFETY: read only, under close's contract that no call on the pool runs.
            .filter(|s| unsafe { (*s.0.get()).open })
            .count()
    }
}

/// Create the pool file `path` of layout `layout` (at most 63 bytes), `size` bytes at first
/// (0: the default, 1 GiB), growing on demand up to `max_size` (0: max(size, 64 GiB)).
/// `opts` may be NULL (defaults). On success stores the handle in `*out` and returns 0.
///
/// Errors: `DAISY_EINVAL` (NULL path, layout or out; bad options), `DAISY_EEXIST` (the file
/// exists: never overwritten), `DAISY_EIO`, `DAISY_ENOSPC`.
///
/// Ownership: the handle is the caller's until `daisy_pool_close`. Thread-safe. Crash
/// semantics: a crash during create leaves either no pool or an unopenable partial file
/// (`DAISY_ENOTPOOL`/`DAISY_ECORRUPT` at open): delete it and create again.
///
/// # Safety
/// `path` and `layout` are NUL-terminated strings; `opts` is NULL or valid; `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn daisy_pool_create(
    path: *const c_char,
    layout: *const c_char,
    size: u64,
    max_size: u64,
    opts: *const daisy_options,
    out: *mut *mut daisy_pool,
) -> c_int {
    guard(None, || {
        // SAFETY: the caller's contract (NUL-terminated strings).
        let (path, layout) = unsafe { (string(path, "path")?, string(layout, "layout")?) };
        if out.is_null() {
            return Err(invalid("NULL output pointer"));
        }
        let o = if opts.is_null() {
            let mut o = std::mem::MaybeUninit::<daisy_options>::uninit();
            // SAFETY: `o` is writable; init fills it.
            unsafe { daisy_options_init(o.as_mut_ptr()) };
            // SAFETY: initialised just above.
            unsafe { o.assume_init() }
        } else {
            // SAFETY: non-null, and the caller guarantees it points at a daisy_options.
            unsafe { *opts }
        };
        let mut po = PoolOptions::new(layout);
        if size != 0 {
            po = po.size(size);
        }
        if max_size != 0 {
            po = po.max_size(max_size);
        }
        po = po.mode(match o.mode {
            DAISY_MODE_AUTO => ModeChoice::Auto,
            DAISY_MODE_PMEM => ModeChoice::Pmem,
            DAISY_MODE_MSYNC => ModeChoice::Msync,
            m => return Err(invalid(&format!("mode {m}"))),
        });
        if o.lanes != 0 {
            po = po.lanes(o.lanes);
        }
        if o.log_slot_size != 0 {
            po = po.log_slot_size(o.log_slot_size);
        }
        let pool = Pool::create(path, &po).map_err(err)?;
        let h = daisy_pool::new(pool);
        // SAFETY: `out` is non-null (checked) and writable by contract.
        unsafe { put(out, Box::into_raw(h))? };
        Ok(0)
    })
}

/// Open the pool file `path`, checking its layout name is `layout`. Runs recovery first: a
/// transaction that was committing when a process died is wholly present or wholly absent.
///
/// Errors: `DAISY_EINVAL`, `DAISY_EIO` (no such file...), `DAISY_ENOTPOOL`, `DAISY_ELAYOUT`,
/// `DAISY_ECORRUPT`, `DAISY_EBUSY` (open in another process, or through another handle).
///
/// Ownership and thread safety as `daisy_pool_create`.
///
/// # Safety
/// `path` and `layout` are NUL-terminated strings; `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn daisy_pool_open(
    path: *const c_char,
    layout: *const c_char,
    out: *mut *mut daisy_pool,
) -> c_int {
    guard(None, || {
        // SAFETY: the caller's contract (NUL-terminated strings).
        let (path, layout) = unsafe { (string(path, "path")?, string(layout, "layout")?) };
        if out.is_null() {
            return Err(invalid("NULL output pointer"));
        }
        let pool = Pool::open(path, layout).map_err(err)?;
        let h = daisy_pool::new(pool);
        // SAFETY: `out` is non-null (checked) and writable by contract.
        unsafe { put(out, Box::into_raw(h))? };
        Ok(0)
    })
}

/// Make everything committed durable, release the pool and free the handle. Addresses from
/// `daisy_direct` become invalid.
///
/// Errors: `DAISY_EINVAL` (NULL), `DAISY_EBUSY` (a transaction or collection handle on this
/// pool is still open: nothing is closed), `DAISY_EIO` (the final flush failed: the handle is
/// freed anyway; committed transactions are still recovered at the next open).
///
/// Thread safety: no other call on this pool may run at the same time or after.
///
/// # Safety
/// `pool` is NULL or a handle from `daisy_pool_create`/`daisy_pool_open` not yet closed.
#[no_mangle]
pub unsafe extern "C" fn daisy_pool_close(pool: *mut daisy_pool) -> c_int {
    if pool.is_null() {
        return invalid("NULL pool");
    }
    // SAFETY: a live handle by contract.
    let p = unsafe { &*pool };
    let (txs, children) = (p.open_transactions(), p.children.load(Ordering::Acquire));
    if txs + children != 0 {
        return set_error(
            DAISY_EBUSY,
            format!(
                "{}: {txs} transaction(s) and {children} collection handle(s) still open",
                p.pool.path().display(),
            ),
        );
    }
    // SAFETY: from Box::into_raw in create/open; the caller gives it up.
    let h = unsafe { Box::from_raw(pool) };
    guard(None, move || {
        if h.pool.is_poisoned() {
            drop(h);
            return Ok(0);
        }
        h.pool.clone().close().map_err(err)?;
        Ok(0)
    })
}

/// Figures about an open pool, filled by `daisy_pool_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct daisy_info {
    /// Current size (the end of the heap), bytes.
    pub size: u64,
    /// The size it may grow to, bytes.
    pub max_size: u64,
    /// Bytes of heap.
    pub heap_size: u64,
    /// Bytes in allocated objects.
    pub used: u64,
    /// Allocated objects.
    pub objects: u64,
    /// The root object's offset (0: none yet) and size.
    pub root_off: u64,
    /// The root object's size in bytes (0: none yet).
    pub root_size: u64,
    /// Log lanes.
    pub lanes: u32,
    /// Bytes per log slot.
    pub log_slot_size: u32,
    /// `DAISY_MODE_PMEM` or `DAISY_MODE_MSYNC`: the persistence mode in use.
    pub mode: c_int,
    /// The flush instruction in pmem mode ("clwb", "clflushopt", "clflush"), "" in msync
    /// mode; NUL-terminated.
    pub flush: [c_char; 16],
    /// The layout name, NUL-terminated.
    pub layout: [c_char; 64],
    /// The file system holding the file ("tmpfs", "ext4", ...), NUL-terminated.
    pub fs_type: [c_char; 16],
}

fn fill(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len() - 1);
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
    dst[n] = 0;
}

/// Fill `*info` (scans the allocator metadata: not for hot paths). Errors: `DAISY_EINVAL`.
/// Thread-safe.
///
/// # Safety
/// `pool` is a live handle; `info` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_pool_info(pool: *const daisy_pool, info: *mut daisy_info) -> c_int {
    if pool.is_null() || info.is_null() {
        return invalid("NULL pool or info");
    }
    // SAFETY: a live handle by contract.
    let p = unsafe { &(*pool).pool };
    guard(Some(p), || {
        let i = p.info();
        let mut out = daisy_info {
            size: i.size,
            max_size: i.max_size,
            heap_size: i.heap_size,
            used: i.used,
            objects: i.objects,
            root_off: i.root.map(|r| r.0).unwrap_or(0),
            root_size: i.root.map(|r| r.1).unwrap_or(0),
            lanes: i.lanes,
            log_slot_size: i.log_slot_size,
            mode: match i.mode {
                daisy::Mode::Pmem(_) => DAISY_MODE_PMEM,
                daisy::Mode::Msync => DAISY_MODE_MSYNC,
            },
            flush: [0; 16],
            layout: [0; 64],
            fs_type: [0; 16],
        };
        if let daisy::Mode::Pmem(f) = i.mode {
            fill(&mut out.flush, f.name());
        }
        fill(&mut out.layout, &i.layout);
        fill(&mut out.fs_type, i.fs_type);
        // SAFETY: non-null (checked), writable by contract.
        unsafe { info.write(out) };
        Ok(0)
    })
}

/// Verify the pool's allocator metadata and logs (read-only; a walk of all metadata: not for
/// hot paths). Returns 0 when sound, `DAISY_ECORRUPT` with the problems in `daisy_errmsg()`
/// otherwise; `DAISY_EINVAL` for NULL. Thread-safe, but run it with no transaction
/// committing for a meaningful answer.
///
/// # Safety
/// `pool` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn daisy_pool_check(pool: *const daisy_pool) -> c_int {
    if pool.is_null() {
        return invalid("NULL pool");
    }
    // SAFETY: a live handle by contract.
    let p = unsafe { &(*pool).pool };
    guard(Some(p), || {
        let r = p.check(None);
        if r.ok() {
            Ok(0)
        } else {
            Err(set_error(
                DAISY_ECORRUPT,
                format!("{}: {}", p.path().display(), r.problems.join("; ")),
            ))
        }
    })
}

/// The root object: `size` bytes, created zeroed (durably) on first call; its offset in
/// `*off`. Errors: `DAISY_EINVAL` (NULL, size 0), `DAISY_EROOTSIZE` (it exists with another
/// size), `DAISY_ENOSPC`, `DAISY_EPOISONED`. Thread-safe (one root is created however many
/// threads ask at once). Must not be called while this thread holds an open transaction on
/// the pool whose lanes are all taken (`DAISY_ENESTED`).
///
/// # Safety
/// `pool` is a live handle; `off` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_root(pool: *const daisy_pool, size: u64, off: *mut u64) -> c_int {
    if pool.is_null() || size == 0 {
        return invalid("NULL pool or size 0");
    }
    // SAFETY: a live handle by contract.
    let p = unsafe { &(*pool).pool };
    guard(Some(p), || {
        let r = p.root_sized(size).map_err(err)?;
        // SAFETY: by contract.
        unsafe { put(off, r.offset())? };
        Ok(0)
    })
}

/// The address of persistent pointer `off` in this process: valid while the pool is open
/// (the mapping never moves; growth extends it in place). NULL when `off` is 0 or outside the
/// heap (then `daisy_errmsg()` says why). Reading through it sees committed data, not an open
/// transaction's logged writes (use `daisy_tx_read`). Storing through it is crash-consistent
/// only inside a transaction, after `daisy_tx_add_range` declared the bytes. Thread-safe.
///
/// # Safety
/// `pool` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn daisy_direct(pool: *const daisy_pool, off: u64) -> *mut c_void {
    if pool.is_null() {
        invalid("NULL pool");
        return std::ptr::null_mut();
    }
    // SAFETY: a live handle by contract.
    let p = unsafe { &(*pool).pool };
    match p.direct(off, 1) {
        Ok(a) => a as *mut c_void,
        Err(e) => {
            fail(&e);
            std::ptr::null_mut()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Transactions.

/// An open transaction (opaque). It belongs to the thread that began it: every call with it
/// from another thread fails with `DAISY_ETHREAD` and does nothing. The handle lives in its
/// pool, one per log lane (no allocation per transaction); it is invalid once the
/// transaction is committed or aborted.
pub struct daisy_tx {
    /// The transaction, initialised while `open`: it borrows the pool of `pool`'s handle,
    /// which cannot be closed while any slot holds one. Not an `Option`: moving a `Tx` out of
    /// an `Option` copies its discriminant byte (the `Tx`'s own flag) apart from the rest,
    /// and the commit's next copy of the whole `Tx` then cannot take the bytes from the
    /// stores just made (a store-forwarding stall: it waits until every earlier store, the
    /// transaction's in-place writes included, has reached the cache; perf put 90% of
    /// `daisy_tx_commit`'s own samples in `alloc-free` on that load). Moved whole, it is
    /// copied as it is read.
    tx: MaybeUninit<Tx<'static>>,
    /// `tx` holds a live transaction.
    open: bool,
    /// An earlier call failed: the transaction is kept (its lane held, so this slot stays
    /// ours) until the program commits or aborts it, and then rolled back.
    failed: bool,
    pool: *const daisy_pool,
    thread: usize,
}

/// One transaction handle per lane of a pool.
struct TxSlot(std::cell::UnsafeCell<daisy_tx>);

/// Begin a transaction on `pool`; its handle in `*tx`. End it with `daisy_tx_commit` or
/// `daisy_tx_abort` in the same thread. A thread may hold several (each takes a log lane).
///
/// Errors: `DAISY_EINVAL`, `DAISY_EPOISONED`, `DAISY_ENESTED`. Thread-safe (transactions of
/// different threads run at once, each on its own lane; a thread waits when every lane is
/// taken; isolation between them is the program's: lock what two threads share).
///
/// # Safety
/// `pool` is a live handle; `tx` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_tx_begin(pool: *mut daisy_pool, tx: *mut *mut daisy_tx) -> c_int {
    if pool.is_null() || tx.is_null() {
        return invalid("NULL pool or tx");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &*pool };
    guard(Some(&h.pool), || {
        let t = h.pool.begin().map_err(err)?;
        // SAFETY: `t` borrows the `PoolInner` behind the handle's `Arc`, which lives at a
        // fixed address until the handle is closed; close refuses while a slot holds a
        // transaction, and every path that ends one drops its `Tx` first.
        let t: Tx<'static> = unsafe { std::mem::transmute::<Tx<'_>, Tx<'static>>(t) };
        let slot = h.slots[t.lane_index()].0.get();
        // SAFETY: the slot of the lane `t` holds: no other transaction can have that lane (so
        // no other thread touches the slot) until `t` is committed or aborted.
        let s = unsafe { &mut *slot };
        debug_assert!(!s.open);
        // The slot is empty (every path that ends a transaction takes it out).
        s.tx.write(t);
        s.open = true;
        s.failed = false;
        s.thread = thread_token();
        // SAFETY: `tx` is non-null (checked) and writable by contract.
        unsafe { tx.write(slot) };
        Ok(0)
    })
}

/// Check the handle, run `f` on the live transaction; an error or a panic marks it failed
/// (rolled back at its end).
///
/// # Safety
/// `tx` is NULL or a live transaction handle.
#[inline(always)]
unsafe fn with_tx(
    tx: *mut daisy_tx,
    f: impl FnOnce(&mut Tx<'static>, &Pool) -> Result<c_int, c_int>,
) -> c_int {
    if tx.is_null() {
        return invalid("NULL transaction");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *tx };
    if h.thread != thread_token() {
        return set_error(DAISY_ETHREAD, "the transaction belongs to another thread");
    }
    if h.failed {
        return set_error(
            DAISY_EABORTED,
            "the transaction was aborted by an earlier error",
        );
    }
    // SAFETY: the pool handle outlives its transactions.
    let pool = unsafe { &(*h.pool).pool };
    if !h.open {
        return invalid("not an open transaction");
    }
    // SAFETY: initialised while `open`.
    let t = unsafe { h.tx.assume_init_mut() };
    match catch_unwind(AssertUnwindSafe(|| f(t, pool))) {
        Ok(Ok(v)) => v,
        Ok(Err(code)) => {
            h.failed = true;
            code
        }
        Err(p) => {
            h.failed = true;
            commit_panicked(pool, p)
        }
    }
}

/// Take the transaction out of its slot, leaving the slot empty, before the transaction ends
/// (ending it frees the lane, and with it the slot, to other threads).
fn take_out(h: &mut daisy_tx) -> (Option<Tx<'static>>, bool) {
    h.thread = 0;
    let failed = std::mem::take(&mut h.failed);
    (take_tx(h), failed)
}

/// The transaction out of its slot, which is left empty; None when it holds none.
#[inline(always)]
fn take_tx(h: &mut daisy_tx) -> Option<Tx<'static>> {
    if !std::mem::take(&mut h.open) {
        return None;
    }
    // SAFETY: initialised while `open`, which is now false: read exactly once.
    Some(unsafe { h.tx.assume_init_read() })
}

/// Commit and end the transaction. Returns 0 when every change is durable (after any later
/// crash, opening the pool shows all of it). On an error nothing of the transaction is
/// visible, in memory or on media, and its allocations are returned.
///
/// Direct stores into ranges declared with `daisy_tx_add_range` are compared with the bytes
/// saved at declaration, and each changed range is logged whole: they commit with the rest.
///
/// Errors: `DAISY_EINVAL` (NULL, or not an open transaction), `DAISY_ETHREAD` (another
/// thread: nothing happens, the transaction stays open), `DAISY_EABORTED` (an earlier error
/// marked it failed: it is rolled back now), `DAISY_EPOISONED`, `DAISY_ETXTOOLARGE`,
/// `DAISY_ENOSPC`, `DAISY_EIO`, `DAISY_EPANIC`. The handle is invalid afterwards on every
/// outcome but `DAISY_EINVAL` and `DAISY_ETHREAD`.
///
/// # Safety
/// `tx` is NULL or a live transaction handle.
#[no_mangle]
pub unsafe extern "C" fn daisy_tx_commit(tx: *mut daisy_tx) -> c_int {
    if tx.is_null() {
        return invalid("NULL transaction");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *tx };
    if h.thread != thread_token() {
        return set_error(DAISY_ETHREAD, "the transaction belongs to another thread");
    }
    if h.failed || !h.open {
        return commit_failed(h);
    }
    h.thread = 0;
    h.open = false;
    // Read before the commit frees the slot to other threads.
    let pool = h.pool;
    // The transaction is moved out of its slot inside the closure (one move, no copies
    // through the caller's frame), before it ends: ending it frees the lane, and with it the
    // slot, to other threads.
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: initialised while `open` (checked above, now false): read exactly once.
        unsafe { h.tx.assume_init_read() }.commit()
    }));
    match r {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => fail(&e),
        // SAFETY: the pool handle outlives its transactions.
        Err(p) => commit_panicked(unsafe { &(*pool).pool }, p),
    }
}

/// `daisy_tx_commit` of a handle that is not open, or whose transaction an earlier error
/// marked failed (rolled back now).
#[cold]
#[inline(never)]
fn commit_failed(h: &mut daisy_tx) -> c_int {
    let (t, failed) = take_out(h);
    let Some(t) = t else {
        return invalid("not an open transaction");
    };
    debug_assert!(failed);
    let _ = catch_unwind(AssertUnwindSafe(move || t.abort()));
    set_error(
        DAISY_EABORTED,
        "the transaction was aborted by an earlier error",
    )
}

/// A panic inside a transaction's call or its commit: the pool is poisoned.
#[cold]
#[inline(never)]
fn commit_panicked(pool: &Pool, p: Box<dyn std::any::Any + Send>) -> c_int {
    pool.poison();
    set_error(
        DAISY_EPANIC,
        format!(
            "internal error (transaction aborted, pool poisoned): {}",
            panic_message(&*p)
        ),
    )
}

/// Abort and end the transaction: nothing it did is visible, in memory or on media (direct
/// stores into declared ranges are undone, durably, from the bytes saved at declaration),
/// and its allocations are
/// returned. Returns 0; `DAISY_EINVAL` (NULL, or not an open transaction) or `DAISY_ETHREAD`
/// (another thread: nothing happens). Crash semantics: a crash before the commit point has
/// the same effect. The handle is invalid afterwards.
///
/// # Safety
/// `tx` is NULL or a live transaction handle.
#[no_mangle]
pub unsafe extern "C" fn daisy_tx_abort(tx: *mut daisy_tx) -> c_int {
    if tx.is_null() {
        return invalid("NULL transaction");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *tx };
    if h.thread != thread_token() {
        return set_error(DAISY_ETHREAD, "the transaction belongs to another thread");
    }
    if !h.open {
        return invalid("not an open transaction");
    }
    // SAFETY: the pool handle outlives its transactions.
    let pool = unsafe { &(*h.pool).pool };
    let (t, _) = take_out(h);
    if catch_unwind(AssertUnwindSafe(move || drop(t))).is_err() {
        pool.poison();
    }
    0
}

/// A transaction body for `daisy_tx_run`: return 0 to commit, anything else to abort.
pub type daisy_tx_fn = Option<unsafe extern "C" fn(tx: *mut daisy_tx, arg: *mut c_void) -> c_int>;

/// Run `fn(tx, arg)` as one transaction: begin, call, then commit when it returns 0, or abort
/// when it returns anything else (that value is returned, so a body may pass on a `DAISY_E*`
/// code or its own positive code). When a call inside the body failed, the transaction is
/// aborted whatever the body returns, and `daisy_tx_run` returns `DAISY_EABORTED` (or the
/// body's own nonzero value). The body must not commit or abort `tx` itself.
///
/// Errors: those of `daisy_tx_begin` and `daisy_tx_commit`. Thread-safe as `daisy_tx_begin`.
///
/// # Safety
/// `pool` is a live handle; `fn` is a valid function.
#[no_mangle]
pub unsafe extern "C" fn daisy_tx_run(
    pool: *mut daisy_pool,
    func: daisy_tx_fn,
    arg: *mut c_void,
) -> c_int {
    let Some(func) = func else {
        return invalid("NULL function");
    };
    let mut tx: *mut daisy_tx = std::ptr::null_mut();
    // SAFETY: by contract.
    let r = unsafe { daisy_tx_begin(pool, &mut tx) };
    if r != 0 {
        return r;
    }
    // SAFETY: a C function given by the caller, called with a live transaction.
    let v = unsafe { func(tx, arg) };
    if v != 0 {
        // SAFETY: live, same thread.
        unsafe { daisy_tx_abort(tx) };
        v
    } else {
        // SAFETY: live, same thread.
        unsafe { daisy_tx_commit(tx) }
    }
}

/// Allocate `size` bytes (at least 1) in the transaction; the offset in `*off`. The contents
/// are unspecified: write them with `daisy_tx_write` (in place and flushed at commit, no log:
/// the object is the transaction's own) or declare them with `daisy_tx_add_range` and store
/// through `daisy_direct`. The allocation is durable with the commit, returned on abort or
/// crash. Errors: `DAISY_EINVAL`, `DAISY_ENOSPC`, and the transaction errors; any error aborts
/// the transaction. Thread: the transaction's.
///
/// # Safety
/// `tx` is a live transaction handle; `off` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_tx_alloc(tx: *mut daisy_tx, size: u64, off: *mut u64) -> c_int {
    // SAFETY: by contract.
    unsafe {
        with_tx(tx, |t, _| {
            if off.is_null() {
                return Err(invalid("NULL output pointer"));
            }
            let o = t.alloc_uninit(size).map_err(err)?;
            off.write(o);
            Ok(0)
        })
    }
}

/// `daisy_tx_alloc` with the contents zeroed.
///
/// # Safety
/// As `daisy_tx_alloc`.
#[no_mangle]
pub unsafe extern "C" fn daisy_tx_alloc_zeroed(
    tx: *mut daisy_tx,
    size: u64,
    off: *mut u64,
) -> c_int {
    // SAFETY: by contract.
    unsafe {
        with_tx(tx, |t, _| {
            if off.is_null() {
                return Err(invalid("NULL output pointer"));
            }
            let o = t.alloc_zeroed_bytes(size).map_err(err)?;
            off.write(o.offset());
            Ok(0)
        })
    }
}

/// Free the object at `off` (allocated in this or an earlier transaction) when the
/// transaction commits. Errors: `DAISY_EPTR` (not an allocated object), and the transaction
/// errors; any error aborts the transaction. Thread: the transaction's.
///
/// # Safety
/// `tx` is a live transaction handle.
#[no_mangle]
pub unsafe extern "C" fn daisy_tx_free(tx: *mut daisy_tx, off: u64) -> c_int {
    // SAFETY: by contract.
    unsafe {
        with_tx(tx, |t, _| {
            t.free(PPtr::<u8>::from_offset(off)).map(|_| 0).map_err(err)
        })
    }
}

/// Write `len` bytes from `src` at `off`, as part of the transaction (logged; applied at
/// commit; read back by `daisy_tx_read` before then). Into an object the transaction
/// allocated, the bytes go in place unlogged. Errors: `DAISY_EINVAL`, `DAISY_EPTR` (outside
/// the heap), `DAISY_ETXTOOLARGE`, and the transaction errors; any error aborts the
/// transaction. Thread: the transaction's.
///
/// # Safety
/// `tx` is a live transaction handle; `src` points at `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn daisy_tx_write(
    tx: *mut daisy_tx,
    off: u64,
    src: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: by contract.
    unsafe {
        with_tx(tx, |t, _| {
            let d = bytes(src, len, "NULL source")?;
            t.write_bytes(off, d).map_err(err)?;
            Ok(0)
        })
    }
}

/// Copy `len` bytes at `off` into `dst` as the transaction sees them (its own writes
/// included). Errors: `DAISY_EINVAL`, `DAISY_EPTR`; any error aborts the transaction.
/// Thread: the transaction's.
///
/// # Safety
/// `tx` is a live transaction handle; `dst` points at `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn daisy_tx_read(
    tx: *mut daisy_tx,
    off: u64,
    dst: *mut c_void,
    len: usize,
) -> c_int {
    // SAFETY: by contract.
    unsafe {
        with_tx(tx, |t, _| {
            let d = bytes_mut(dst, len, "NULL destination")?;
            t.read_bytes(off, d).map_err(err)?;
            Ok(0)
        })
    }
}

/// Declare `[off, off + len)` (PMDK's `pmemobj_tx_add_range`): the program may then store
/// into those bytes directly, through `daisy_direct`, until the transaction ends; the stores
/// commit atomically with the rest of it. Before this returns, the bytes' current contents
/// are durable in the pool's undo area (one fence; two for a transaction's first range, and
/// one more at its commit). At commit each range that changed is logged whole (a copy and a
/// compare of the range, and a logged write of `len` bytes when changed).
///
/// Crash semantics (as PMDK's undo log): a crash before the commit point leaves no trace of
/// the direct stores: opening the pool puts the declared bytes back (docs/FORMAT.md section
/// 2.5); an abort or an error puts them back at the transaction's end. Declaring a range
/// twice is allowed (the first declaration's bytes are the ones restored). Ranges must not
/// overlap bytes written with `daisy_tx_write` in the same transaction. Bytes of an object
/// this transaction allocated need no undo and take none.
///
/// Errors: `DAISY_EPTR` (outside the heap), `DAISY_ENOSPC` (no room for the undo area),
/// `DAISY_EIO`, `DAISY_EINVAL`; any error aborts the transaction. Thread: the transaction's.
///
/// # Safety
/// `tx` is a live transaction handle.
#[no_mangle]
pub unsafe extern "C" fn daisy_tx_add_range(tx: *mut daisy_tx, off: u64, len: usize) -> c_int {
    // SAFETY: by contract.
    unsafe {
        with_tx(tx, |t, _| {
            t.add_range(off, len as u64).map_err(err)?;
            Ok(0)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Collections: shared pieces.

/// A value callback: called with the bytes (valid only during the call).
pub type daisy_value_fn =
    Option<unsafe extern "C" fn(arg: *mut c_void, val: *const c_void, len: usize)>;

/// An entry callback for iteration: return 0 to go on, nonzero to stop (the iteration then
/// returns that value). The bytes are valid only during the call.
pub type daisy_entry_fn = Option<
    unsafe extern "C" fn(
        arg: *mut c_void,
        key: *const c_void,
        klen: usize,
        val: *const c_void,
        vlen: usize,
    ) -> c_int,
>;

/// Copy `v` into `buf[..cap]`, its length in `*len`; `DAISY_ENOBUFS` when it did not fit.
///
/// # Safety
/// `buf` points at `cap` writable bytes; `len` is valid for a write.
unsafe fn copy_out(
    v: &[u8],
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> Result<c_int, c_int> {
    // SAFETY: by contract.
    unsafe { put(len, v.len())? };
    let n = v.len().min(cap);
    // SAFETY: by contract.
    let d = unsafe { bytes_mut(buf, n, "NULL buffer")? };
    d.copy_from_slice(&v[..n]);
    if n < v.len() {
        return Err(set_error(
            DAISY_ENOBUFS,
            format!("value of {} bytes, buffer of {cap}", v.len()),
        ));
    }
    Ok(0)
}

/// Run `f` with the transaction when `tx` is non-NULL (its rules), else with none.
///
/// # Safety
/// `tx` is NULL or a live transaction handle.
#[inline(always)]
unsafe fn maybe_tx(
    pool: &Pool,
    tx: *mut daisy_tx,
    f: impl FnOnce(Option<&mut Tx<'static>>) -> Result<c_int, c_int>,
) -> c_int {
    if tx.is_null() {
        guard(Some(pool), || f(None))
    } else {
        // SAFETY: by contract.
        unsafe { with_tx(tx, |t, _| f(Some(t))) }
    }
}

fn not_found() -> c_int {
    set_error(DAISY_ENOTFOUND, "not found")
}

// ---------------------------------------------------------------------------------------------
// Hash map of byte strings (PBytesMap).

/// An open hash map of byte strings (opaque). Not thread-safe: one thread at a time per handle
/// (a program's lock around it); the map may be open through one handle at a time.
pub struct daisy_map {
    m: PBytesMap,
    pool: *const daisy_pool,
}

/// Create an empty hash map inside `tx`; its id (an offset) in `*id`. Store the id somewhere
/// reachable (the root) in the same transaction: an unreachable map is a leak. Errors:
/// the transaction's; any error aborts it. Thread: the transaction's.
///
/// # Safety
/// `tx` is a live transaction handle; `id` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_map_create(tx: *mut daisy_tx, id: *mut u64) -> c_int {
    // SAFETY: by contract.
    unsafe {
        with_tx(tx, |t, _| {
            let p = PBytesMap::create_in(t).map_err(err)?;
            put(id, p.offset())?;
            Ok(0)
        })
    }
}

/// Open the hash map `id` of `pool`; the handle in `*map`. Errors: `DAISY_ENOTCOLL`,
/// `DAISY_EBUSY` (open through another handle), `DAISY_EPTR`. Thread-safe.
///
/// # Safety
/// `pool` is a live handle; `map` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_map_open(
    pool: *mut daisy_pool,
    id: u64,
    map: *mut *mut daisy_map,
) -> c_int {
    if pool.is_null() || map.is_null() {
        return invalid("NULL pool or map");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &*pool };
    guard(Some(&h.pool), || {
        let m = PBytesMap::open(&h.pool, PPtr::from_offset(id)).map_err(err)?;
        h.children.fetch_add(1, Ordering::AcqRel);
        // SAFETY: `map` is non-null and writable by contract.
        unsafe { map.write(Box::into_raw(Box::new(daisy_map { m, pool }))) };
        Ok(0)
    })
}

/// Close a map handle (the map stays in the pool). NULL is ignored. Thread: the handle's.
///
/// # Safety
/// `map` is NULL or a live map handle, not used again.
#[no_mangle]
pub unsafe extern "C" fn daisy_map_close(map: *mut daisy_map) {
    if map.is_null() {
        return;
    }
    // SAFETY: from daisy_map_open, given up by the caller.
    let b = unsafe { Box::from_raw(map) };
    // SAFETY: the pool handle outlives its children.
    let pool = unsafe { &*b.pool };
    drop(b);
    pool.children.fetch_sub(1, Ordering::AcqRel);
}

/// Insert or replace `key` → `val`. With `tx` NULL the insert is its own transaction, durable
/// when this returns; otherwise it is part of `tx` (durable with its commit; an error aborts
/// `tx`). Returns 1 when a value was replaced, 0 when the key is new, or an error:
/// `DAISY_EINVAL`, `DAISY_ENOSPC`, `DAISY_EPOISONED`, the transaction's. Thread: the handle's
/// (and the transaction's).
///
/// # Safety
/// `map` is a live handle; `tx` NULL or live; `key`/`val` point at `klen`/`vlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn daisy_map_insert(
    map: *mut daisy_map,
    tx: *mut daisy_tx,
    key: *const c_void,
    klen: usize,
    val: *const c_void,
    vlen: usize,
) -> c_int {
    if map.is_null() {
        return invalid("NULL map");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *map };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let k = bytes(key, klen, "NULL key")?;
            let v = bytes(val, vlen, "NULL value")?;
            let r = match t {
                Some(t) => h.m.insert_tx(t, k, v),
                None => h.m.insert(k, v),
            };
            Ok(r.map_err(err)? as c_int)
        })
    }
}

/// Copy the value of `key` into `buf` (at most `cap` bytes); its length in `*vlen`. With `tx`
/// non-NULL, as the transaction sees it. Returns 0, `DAISY_ENOTFOUND`, `DAISY_ENOBUFS` (the
/// first `cap` bytes copied, `*vlen` the whole length: not an error for the transaction),
/// `DAISY_EINVAL`. Thread: the handle's.
///
/// # Safety
/// `map` live; `tx` NULL or live; `key` has `klen` bytes; `buf` has `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn daisy_map_get(
    map: *mut daisy_map,
    tx: *mut daisy_tx,
    key: *const c_void,
    klen: usize,
    buf: *mut c_void,
    cap: usize,
    vlen: *mut usize,
) -> c_int {
    let mut v: Option<Vec<u8>> = None;
    // SAFETY: by contract.
    let r = unsafe { daisy_map_get_with(map, tx, key, klen, &mut |x: &[u8]| v = Some(x.to_vec())) };
    if r != 0 {
        return r;
    }
    let v = v.unwrap_or_default();
    // SAFETY: by contract.
    match unsafe { copy_out(&v, buf, cap, vlen) } {
        Ok(x) | Err(x) => x,
    }
}

/// # Safety
/// As `daisy_map_get`.
unsafe fn daisy_map_get_with(
    map: *mut daisy_map,
    tx: *mut daisy_tx,
    key: *const c_void,
    klen: usize,
    f: &mut dyn FnMut(&[u8]),
) -> c_int {
    if map.is_null() {
        return invalid("NULL map");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *map };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let k = bytes(key, klen, "NULL key")?;
            let r = match t {
                Some(t) => h.m.get_tx(t, k),
                None => h.m.get(k),
            };
            match r.map_err(err)? {
                Some(v) => {
                    f(&v);
                    Ok(0)
                }
                None => Ok(not_found()),
            }
        })
    }
}

/// Call `cb(arg, value, len)` with the value of `key` (valid during the call only): for
/// values of any length without guessing a buffer. Returns 0, `DAISY_ENOTFOUND`,
/// `DAISY_EINVAL`. Thread: the handle's.
///
/// # Safety
/// As `daisy_map_get`; `cb` a valid function.
#[no_mangle]
pub unsafe extern "C" fn daisy_map_get_cb(
    map: *mut daisy_map,
    tx: *mut daisy_tx,
    key: *const c_void,
    klen: usize,
    cb: daisy_value_fn,
    arg: *mut c_void,
) -> c_int {
    let Some(cb) = cb else {
        return invalid("NULL callback");
    };
    // SAFETY: by contract; the callback gets bytes valid for the call.
    unsafe {
        daisy_map_get_with(map, tx, key, klen, &mut |v: &[u8]| {
            cb(arg, v.as_ptr() as *const c_void, v.len())
        })
    }
}

/// Remove `key`. With `tx` NULL durable when this returns, else part of `tx`. Returns 0,
/// `DAISY_ENOTFOUND` (nothing changed; not an error for the transaction), `DAISY_EINVAL`, the
/// transaction's. Thread: the handle's.
///
/// # Safety
/// As `daisy_map_insert`.
#[no_mangle]
pub unsafe extern "C" fn daisy_map_remove(
    map: *mut daisy_map,
    tx: *mut daisy_tx,
    key: *const c_void,
    klen: usize,
) -> c_int {
    if map.is_null() {
        return invalid("NULL map");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *map };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let k = bytes(key, klen, "NULL key")?;
            let r = match t {
                Some(t) => h.m.remove_tx(t, k),
                None => h.m.remove(k),
            };
            Ok(if r.map_err(err)? { 0 } else { not_found() })
        })
    }
}

/// The number of entries in `*len` (as `tx` sees it when non-NULL). Thread: the handle's.
///
/// # Safety
/// `map` live; `tx` NULL or live; `len` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_map_len(
    map: *mut daisy_map,
    tx: *mut daisy_tx,
    len: *mut u64,
) -> c_int {
    if map.is_null() {
        return invalid("NULL map");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *map };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let n = match t {
                Some(t) => h.m.len_tx(t),
                None => h.m.len(),
            }
            .map_err(err)?;
            put(len, n)?;
            Ok(0)
        })
    }
}

/// Call `cb` for every entry, in no particular order (as `tx` sees the map when non-NULL).
/// Returns 0 after the last, or the first nonzero value `cb` returned (iteration stops). The
/// callback must not change the map. Thread: the handle's.
///
/// # Safety
/// `map` live; `tx` NULL or live; `cb` a valid function.
#[no_mangle]
pub unsafe extern "C" fn daisy_map_foreach(
    map: *mut daisy_map,
    tx: *mut daisy_tx,
    cb: daisy_entry_fn,
    arg: *mut c_void,
) -> c_int {
    if map.is_null() {
        return invalid("NULL map");
    }
    let Some(cb) = cb else {
        return invalid("NULL callback");
    };
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *map };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    let call = |k: &[u8], v: &[u8]| {
        // SAFETY: a C callback given by the caller; bytes valid for the call.
        unsafe {
            cb(
                arg,
                k.as_ptr() as *const c_void,
                k.len(),
                v.as_ptr() as *const c_void,
                v.len(),
            )
        }
    };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            match t {
                None => {
                    for e in h.m.iter().map_err(err)? {
                        let (k, v) = e.map_err(err)?;
                        let r = call(&k, &v);
                        if r != 0 {
                            return Ok(r);
                        }
                    }
                }
                Some(t) => {
                    let mut cursor = 0u64;
                    let mut batch = Vec::new();
                    loop {
                        batch.clear();
                        cursor = h.m.scan_tx(t, cursor, 64, &mut batch).map_err(err)?;
                        for (k, e) in &batch {
                            let mut v = vec![0u8; e.value_len()];
                            e.read_tx(t, 0, &mut v).map_err(err)?;
                            let r = call(k, &v);
                            if r != 0 {
                                return Ok(r);
                            }
                        }
                        if cursor == 0 {
                            break;
                        }
                    }
                }
            }
            Ok(0)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Ordered map (PTreeMap).

/// An open ordered map of byte strings (a B+-tree; keys in byte order). Opaque; thread rules
/// as `daisy_map`.
pub struct daisy_tree {
    m: PTreeMap,
    pool: *const daisy_pool,
}

/// Create an empty ordered map inside `tx`; its id in `*id` (store it in the same
/// transaction). Errors: the transaction's. Thread: the transaction's.
///
/// # Safety
/// `tx` live; `id` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_tree_create(tx: *mut daisy_tx, id: *mut u64) -> c_int {
    // SAFETY: by contract.
    unsafe {
        with_tx(tx, |t, _| {
            let p = PTreeMap::create_in(t).map_err(err)?;
            put(id, p.offset())?;
            Ok(0)
        })
    }
}

/// Open the ordered map `id`. Errors as `daisy_map_open`. Thread-safe.
///
/// # Safety
/// `pool` live; `tree` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_tree_open(
    pool: *mut daisy_pool,
    id: u64,
    tree: *mut *mut daisy_tree,
) -> c_int {
    if pool.is_null() || tree.is_null() {
        return invalid("NULL pool or tree");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &*pool };
    guard(Some(&h.pool), || {
        let m = PTreeMap::open(&h.pool, PPtr::from_offset(id)).map_err(err)?;
        h.children.fetch_add(1, Ordering::AcqRel);
        // SAFETY: non-null, writable by contract.
        unsafe { tree.write(Box::into_raw(Box::new(daisy_tree { m, pool }))) };
        Ok(0)
    })
}

/// Close an ordered-map handle. NULL is ignored.
///
/// # Safety
/// `tree` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn daisy_tree_close(tree: *mut daisy_tree) {
    if tree.is_null() {
        return;
    }
    // SAFETY: from daisy_tree_open, given up by the caller.
    let b = unsafe { Box::from_raw(tree) };
    // SAFETY: the pool handle outlives its children.
    let pool = unsafe { &*b.pool };
    drop(b);
    pool.children.fetch_sub(1, Ordering::AcqRel);
}

/// Insert or replace; 1 when replaced, 0 when new; `tx` as in `daisy_map_insert`.
///
/// # Safety
/// As `daisy_map_insert`.
#[no_mangle]
pub unsafe extern "C" fn daisy_tree_insert(
    tree: *mut daisy_tree,
    tx: *mut daisy_tx,
    key: *const c_void,
    klen: usize,
    val: *const c_void,
    vlen: usize,
) -> c_int {
    if tree.is_null() {
        return invalid("NULL tree");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *tree };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let k = bytes(key, klen, "NULL key")?;
            let v = bytes(val, vlen, "NULL value")?;
            let r = match t {
                Some(t) => h.m.insert_tx(t, k, v),
                None => h.m.insert(k, v),
            };
            Ok(r.map_err(err)? as c_int)
        })
    }
}

/// The value of `key` into `buf`, as `daisy_map_get`.
///
/// # Safety
/// As `daisy_map_get`.
#[no_mangle]
pub unsafe extern "C" fn daisy_tree_get(
    tree: *mut daisy_tree,
    tx: *mut daisy_tx,
    key: *const c_void,
    klen: usize,
    buf: *mut c_void,
    cap: usize,
    vlen: *mut usize,
) -> c_int {
    if tree.is_null() {
        return invalid("NULL tree");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *tree };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let k = bytes(key, klen, "NULL key")?;
            let r = match t {
                Some(t) => h.m.get_tx(t, k),
                None => h.m.get(k),
            };
            match r.map_err(err)? {
                Some(v) => match copy_out(&v, buf, cap, vlen) {
                    Ok(x) | Err(x) => Ok(x),
                },
                None => Ok(not_found()),
            }
        })
    }
}

/// Remove `key`: 0, or `DAISY_ENOTFOUND`; `tx` as in `daisy_map_insert`.
///
/// # Safety
/// As `daisy_map_remove`.
#[no_mangle]
pub unsafe extern "C" fn daisy_tree_remove(
    tree: *mut daisy_tree,
    tx: *mut daisy_tx,
    key: *const c_void,
    klen: usize,
) -> c_int {
    if tree.is_null() {
        return invalid("NULL tree");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *tree };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let k = bytes(key, klen, "NULL key")?;
            let r = match t {
                Some(t) => h.m.remove_tx(t, k),
                None => h.m.remove(k),
            };
            Ok(if r.map_err(err)?.is_some() {
                0
            } else {
                not_found()
            })
        })
    }
}

/// The number of entries in `*len` (as `tx` sees it when non-NULL).
///
/// # Safety
/// As `daisy_map_len`.
#[no_mangle]
pub unsafe extern "C" fn daisy_tree_len(
    tree: *mut daisy_tree,
    tx: *mut daisy_tx,
    len: *mut u64,
) -> c_int {
    if tree.is_null() {
        return invalid("NULL tree");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *tree };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let n = match t {
                Some(t) => h.m.len_tx(t),
                None => h.m.len(),
            }
            .map_err(err)?;
            put(len, n)?;
            Ok(0)
        })
    }
}

/// Call `cb` for every committed entry in key order (ascending, or descending when `rev` is
/// nonzero); returns 0 or the first nonzero value of `cb`. Reads committed data only (not an
/// open transaction's writes). Thread: the handle's.
///
/// # Safety
/// `tree` live; `cb` a valid function.
#[no_mangle]
pub unsafe extern "C" fn daisy_tree_foreach(
    tree: *mut daisy_tree,
    rev: c_int,
    cb: daisy_entry_fn,
    arg: *mut c_void,
) -> c_int {
    if tree.is_null() {
        return invalid("NULL tree");
    }
    let Some(cb) = cb else {
        return invalid("NULL callback");
    };
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *tree };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    guard(Some(pool), || {
        let it =
            h.m.iter_range(
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                rev != 0,
            )
            .map_err(err)?;
        for e in it {
            let (k, v) = e.map_err(err)?;
            // SAFETY: a C callback given by the caller; bytes valid for the call.
            let r = unsafe {
                cb(
                    arg,
                    k.as_ptr() as *const c_void,
                    k.len(),
                    v.as_ptr() as *const c_void,
                    v.len(),
                )
            };
            if r != 0 {
                return Ok(r);
            }
        }
        Ok(0)
    })
}

// ---------------------------------------------------------------------------------------------
// Sequence (PSeq).

/// An open sequence of byte strings (a deque: O(1) at both ends, indexing). Opaque; thread
/// rules as `daisy_map`.
pub struct daisy_seq {
    s: PSeq,
    pool: *const daisy_pool,
}

/// Create an empty sequence inside `tx`; its id in `*id` (store it in the same transaction).
///
/// # Safety
/// `tx` live; `id` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_seq_create(tx: *mut daisy_tx, id: *mut u64) -> c_int {
    // SAFETY: by contract.
    unsafe {
        with_tx(tx, |t, _| {
            let p = PSeq::create_in(t).map_err(err)?;
            put(id, p.offset())?;
            Ok(0)
        })
    }
}

/// Open the sequence `id`. Errors as `daisy_map_open`. Thread-safe.
///
/// # Safety
/// `pool` live; `seq` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_seq_open(
    pool: *mut daisy_pool,
    id: u64,
    seq: *mut *mut daisy_seq,
) -> c_int {
    if pool.is_null() || seq.is_null() {
        return invalid("NULL pool or seq");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &*pool };
    guard(Some(&h.pool), || {
        let s = PSeq::open(&h.pool, PPtr::from_offset(id)).map_err(err)?;
        h.children.fetch_add(1, Ordering::AcqRel);
        // SAFETY: non-null, writable by contract.
        unsafe { seq.write(Box::into_raw(Box::new(daisy_seq { s, pool }))) };
        Ok(0)
    })
}

/// Close a sequence handle. NULL is ignored.
///
/// # Safety
/// `seq` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn daisy_seq_close(seq: *mut daisy_seq) {
    if seq.is_null() {
        return;
    }
    // SAFETY: from daisy_seq_open, given up by the caller.
    let b = unsafe { Box::from_raw(seq) };
    // SAFETY: the pool handle outlives its children.
    let pool = unsafe { &*b.pool };
    drop(b);
    pool.children.fetch_sub(1, Ordering::AcqRel);
}

/// Append `item` at the back (`front` zero) or the front (nonzero); `tx` as in
/// `daisy_map_insert`. Returns 0 or an error.
///
/// # Safety
/// `seq` live; `tx` NULL or live; `item` has `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn daisy_seq_push(
    seq: *mut daisy_seq,
    tx: *mut daisy_tx,
    front: c_int,
    item: *const c_void,
    len: usize,
) -> c_int {
    if seq.is_null() {
        return invalid("NULL seq");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *seq };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let i = bytes(item, len, "NULL item")?;
            match (t, front != 0) {
                (Some(t), false) => h.s.push_back_tx(t, i),
                (Some(t), true) => h.s.push_front_tx(t, i),
                (None, false) => h.s.push_back(i),
                (None, true) => h.s.push_front(i),
            }
            .map_err(err)?;
            Ok(0)
        })
    }
}

/// Remove the item at the back (`front` zero) or the front, copying it into `buf` as
/// `daisy_map_get` does (`DAISY_ENOBUFS`: truncated copy, the item is removed all the same).
/// `DAISY_ENOTFOUND` when empty. `tx` as in `daisy_map_insert`.
///
/// # Safety
/// `seq` live; `tx` NULL or live; `buf` has `cap` writable bytes; `len` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn daisy_seq_pop(
    seq: *mut daisy_seq,
    tx: *mut daisy_tx,
    front: c_int,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> c_int {
    if seq.is_null() {
        return invalid("NULL seq");
    }
    if len.is_null() {
        return invalid("NULL length pointer");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *seq };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let r = match (t, front != 0) {
                (Some(t), false) => h.s.pop_back_tx(t),
                (Some(t), true) => h.s.pop_front_tx(t),
                (None, false) => h.s.pop_back(),
                (None, true) => h.s.pop_front(),
            }
            .map_err(err)?;
            match r {
                Some(v) => match copy_out(&v, buf, cap, len) {
                    Ok(x) | Err(x) => Ok(x),
                },
                None => Ok(not_found()),
            }
        })
    }
}

/// Copy the item at `index` (negative: from the back, -1 the last) into `buf` as
/// `daisy_map_get` does; `DAISY_ERANGE` when there is none.
///
/// # Safety
/// As `daisy_seq_pop`.
#[no_mangle]
pub unsafe extern "C" fn daisy_seq_get(
    seq: *mut daisy_seq,
    tx: *mut daisy_tx,
    index: i64,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> c_int {
    if seq.is_null() {
        return invalid("NULL seq");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *seq };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let r = match t {
                Some(t) => h.s.get_tx(t, index),
                None => h.s.get(index),
            }
            .map_err(err)?;
            match r {
                Some(v) => match copy_out(&v, buf, cap, len) {
                    Ok(x) | Err(x) => Ok(x),
                },
                None => Ok(set_error(DAISY_ERANGE, format!("no item at index {index}"))),
            }
        })
    }
}

/// The number of items in `*len` (as `tx` sees it when non-NULL).
///
/// # Safety
/// As `daisy_map_len`.
#[no_mangle]
pub unsafe extern "C" fn daisy_seq_len(
    seq: *mut daisy_seq,
    tx: *mut daisy_tx,
    len: *mut u64,
) -> c_int {
    if seq.is_null() {
        return invalid("NULL seq");
    }
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *seq };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            let n = match t {
                Some(t) => h.s.len_tx(t),
                None => h.s.len(),
            }
            .map_err(err)?;
            put(len, n)?;
            Ok(0)
        })
    }
}

/// Call `cb(arg, item, len)` for every item from the front (as `tx` sees the sequence when
/// non-NULL). Returns 0. The callback must not change the sequence. Thread: the handle's.
///
/// # Safety
/// `seq` live; `tx` NULL or live; `cb` a valid function.
#[no_mangle]
pub unsafe extern "C" fn daisy_seq_foreach(
    seq: *mut daisy_seq,
    tx: *mut daisy_tx,
    cb: daisy_value_fn,
    arg: *mut c_void,
) -> c_int {
    if seq.is_null() {
        return invalid("NULL seq");
    }
    let Some(cb) = cb else {
        return invalid("NULL callback");
    };
    // SAFETY: a live handle by contract.
    let h = unsafe { &mut *seq };
    // SAFETY: the pool outlives the handle.
    let pool = unsafe { &(*h.pool).pool };
    // SAFETY: a C callback given by the caller; bytes valid for the call.
    let call = |v: &[u8]| unsafe { cb(arg, v.as_ptr() as *const c_void, v.len()) };
    // SAFETY: by contract.
    unsafe {
        maybe_tx(pool, tx, |t| {
            match t {
                Some(t) => {
                    h.s.range_each_tx(t, 0, -1, false, call).map_err(err)?;
                }
                None => {
                    for v in h.s.iter(0, false).map_err(err)? {
                        call(&v.map_err(err)?);
                    }
                }
            }
            Ok(0)
        })
    }
}
