//! The mapping of a pool file, and every raw memory operation on it.
//!
//! With `persist::arch` (the CPU's flush and fence instructions) and `lock` (the lanes' spin
//! lock), one of the few modules allowed to use `unsafe` (the workspace lints deny it
//! elsewhere). Everything above works with pool *offsets* and calls the bounds-checked
//! accessors below.
//!
//! Address space: at open we reserve the pool's maximum size as one `PROT_NONE` anonymous
//! mapping, then map the file over its beginning with `MAP_FIXED`. Growing the pool maps the
//! file's new extent right after the old one, inside the reservation, so the base address never
//! changes and references into the pool stay valid while it grows.
//!
//! Concurrency: the mapping is shared memory that several threads (and, after a crash, the
//! recovery code) read and write. We never hand out `&`/`&mut` references into it; all access
//! is by raw pointer copies (`read`, `write`) or explicit atomics, so Rust's aliasing rules are
//! not involved. Isolation between threads is the caller's responsibility (locks), exactly as
//! in PMDK; a data race on pool memory produces torn values, not undefined behaviour in the
//! library's own bookkeeping.

#![expect(
    unsafe_code,
    reason = "the mapping: mmap, raw pointer reads and writes of the pool, its atomics"
)]

use bytemuck::Pod;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p <= 0 {
        4096
    } else {
        p as usize
    }
}

/// A reserved address range with a pool file mapped over its beginning.
pub struct Mapping {
    base: *mut u8,
    reserved: usize,
    mapped: AtomicUsize,
    /// True when the kernel accepted `MAP_SYNC` (a DAX file system: real persistent memory).
    map_sync: bool,
    /// A copy-on-write mapping: stores never reach the file (`Pool::open_snapshot`).
    private: bool,
}

// SAFETY: the mapping is plain shared memory; all access goes through raw-pointer copies and
// atomics whose synchronisation is described in the module comment.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Reserve `reserve` bytes of address space and map `len` bytes of `file` at its start.
    pub fn new(file: &std::fs::File, len: usize, reserve: usize) -> std::io::Result<Mapping> {
        Self::with_options(file, len, reserve, false)
    }

    /// Like [`Mapping::new`]; `private` maps copy-on-write (for
    /// inspecting a file without ever writing it).
    pub fn with_options(
        file: &std::fs::File,
        len: usize,
        reserve: usize,
        private: bool,
    ) -> std::io::Result<Mapping> {
        assert!(len <= reserve, "mapped length exceeds reservation");
        // SAFETY: an anonymous PROT_NONE reservation touches no existing memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserve,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let mut m = Mapping {
            base: base as *mut u8,
            reserved: reserve,
            mapped: AtomicUsize::new(0),
            map_sync: false,
            private,
        };
        m.map_sync = m.map_extent(file, 0, len)?;
        m.mapped.store(len, Ordering::Release);
        Ok(m)
    }

    /// Map `[off, off+len)` of the file at the same offset of the reservation.
    /// Returns whether `MAP_SYNC` was accepted.
    fn map_extent(&self, file: &std::fs::File, off: usize, len: usize) -> std::io::Result<bool> {
        if len == 0 {
            return Ok(self.map_sync);
        }
        assert!(off + len <= self.reserved);
        let fd = file.as_raw_fd();
        // SAFETY: the target range lies inside our own reservation (asserted above), so
        // MAP_FIXED replaces only memory this Mapping owns.
        let addr = unsafe { self.base.add(off) } as *mut libc::c_void;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        if self.private {
            // SAFETY: as above.
            let p = unsafe {
                libc::mmap(
                    addr,
                    len,
                    prot,
                    libc::MAP_PRIVATE | libc::MAP_FIXED,
                    fd,
                    off as libc::off_t,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error());
            }
            return Ok(false);
        }
        // Try MAP_SYNC first: it succeeds only on DAX file systems, where it guarantees that
        // flushed stores are persistent without msync.
        // SAFETY: as above.
        let p = unsafe {
            libc::mmap(
                addr,
                len,
                prot,
                libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC | libc::MAP_FIXED,
                fd,
                off as libc::off_t,
            )
        };
        if p != libc::MAP_FAILED {
            return Ok(true);
        }
        // SAFETY: as above.
        let p = unsafe {
            libc::mmap(
                addr,
                len,
                prot,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd,
                off as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(false)
    }

    /// Extend the mapping to `new_len` bytes of the file (the file must already be that long).
    pub fn grow(&self, file: &std::fs::File, new_len: usize) -> std::io::Result<()> {
        let old = self.mapped.load(Ordering::Acquire);
        assert!(new_len >= old && new_len <= self.reserved);
        self.map_extent(file, old, new_len - old)?;
        self.mapped.store(new_len, Ordering::Release);
        #[cfg(feature = "sim")]
        crate::sim::on_grow(self.base, new_len);
        Ok(())
    }

    /// Address of byte 0 of the file in this process.
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Bytes of the file mapped.
    pub fn len(&self) -> usize {
        self.mapped.load(Ordering::Acquire)
    }

    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of address space reserved (the pool's maximum size).
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Whether the kernel accepted `MAP_SYNC` (a DAX file system).
    pub fn map_sync(&self) -> bool {
        self.map_sync
    }

    /// Whether `[off, off+len)` lies inside the mapped part.
    #[inline]
    pub fn in_bounds(&self, off: u64, len: usize) -> bool {
        (off as usize)
            .checked_add(len)
            .is_some_and(|end| end <= self.len())
    }

    /// Raw pointer to `off`. Panics when `[off, off+len)` is outside the mapping: callers
    /// validate offsets that come from the media before they get here.
    #[inline]
    pub fn at(&self, off: u64, len: usize) -> *mut u8 {
        if !self.in_bounds(off, len) {
            out_of_bounds(off, len, self.len());
        }
        // SAFETY: in bounds of the mapped range, checked just above.
        unsafe { self.base.add(off as usize) }
    }

    /// Every store into the mapping passes here first (sim builds only: the power-failure
    /// simulator records what the lines held until now, a value an eviction may have
    /// persisted; normal builds compile this away).
    #[inline(always)]
    fn note_store(&self, p: *const u8, len: usize) {
        #[cfg(feature = "sim")]
        crate::sim::on_store(p as usize, len);
        #[cfg(not(feature = "sim"))]
        let _ = (p, len);
    }

    /// Ask the CPU to bring the cache line at `off` closer (a hint: nothing happens when
    /// `off` is outside the mapping). Batched lookups use it to overlap their cache misses.
    #[inline(always)]
    pub fn prefetch(&self, off: u64) {
        if !self.in_bounds(off, 1) {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults and has no architectural effect; the address is
        // inside the mapping anyway (checked above).
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(self.base.add(off as usize) as *const i8);
        }
    }

    /// Copy a `T` out of the pool.
    #[inline]
    pub fn read<T: Pod>(&self, off: u64) -> T {
        let p = self.at(off, std::mem::size_of::<T>());
        // SAFETY: `p` is valid for size_of::<T>() bytes (checked by `at`), and every bit
        // pattern is a valid `T` (Pod). read_unaligned copes with any alignment.
        unsafe { std::ptr::read_unaligned(p as *const T) }
    }

    /// Copy a `T` into the pool (not yet persistent: flush and fence follow).
    #[inline]
    pub fn write<T: Pod>(&self, off: u64, v: &T) {
        let p = self.at(off, std::mem::size_of::<T>());
        self.note_store(p, std::mem::size_of::<T>());
        // SAFETY: `p` is valid for size_of::<T>() bytes (checked by `at`).
        unsafe { std::ptr::write_unaligned(p as *mut T, *v) }
    }

    /// Copy bytes out of the pool.
    #[inline]
    pub fn read_bytes(&self, off: u64, out: &mut [u8]) {
        let p = self.at(off, out.len());
        // SAFETY: source valid for out.len() bytes (checked); `out` is a distinct Rust buffer.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) }
    }

    /// Copy bytes into the pool.
    #[inline]
    pub fn write_bytes(&self, off: u64, src: &[u8]) {
        let p = self.at(off, src.len());
        self.note_store(p, src.len());
        // SAFETY: destination valid for src.len() bytes (checked); `src` is a Rust buffer,
        // which cannot overlap the mapping.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) }
    }

    /// Copy `src` (a multiple of 8 bytes long) into the pool as 8-byte words: for short log
    /// records this beats a call to memcpy.
    #[inline]
    pub fn write_words(&self, off: u64, src: &[u8]) -> *const u8 {
        debug_assert!(src.len().is_multiple_of(8));
        let p = self.at(off, src.len()) as *mut u64;
        self.note_store(p as *const u8, src.len());
        for (i, w) in src.chunks_exact(8).enumerate() {
            let v = u64::from_ne_bytes(w.try_into().unwrap());
            // SAFETY: i < src.len() / 8, so the word lies in the range `at` checked.
            unsafe { p.add(i).write_unaligned(v) };
        }
        p as *const u8
    }

    /// Copy bytes into the pool with non-temporal stores where alignment allows (cached
    /// stores and a write-back at the unaligned edges): written back without a flush, durable
    /// after the next fence. Returns the destination's address.
    #[inline]
    pub fn write_nt(&self, off: u64, src: &[u8]) -> *const u8 {
        let p = self.at(off, src.len());
        self.note_store(p, src.len());
        // SAFETY: destination valid for src.len() bytes (checked by `at`); `src` is a Rust
        // buffer, which cannot overlap the mapping.
        unsafe { crate::persist::arch::copy_nt(p, src) };
        p
    }

    /// Store one 64-byte line (a short log record with its tail); returns its address. A
    /// fixed-size copy is a few vector moves, where a call to memcpy costs more than the copy.
    #[inline(always)]
    pub fn write_line(&self, off: u64, line: &[u8; 64]) -> *const u8 {
        let p = self.at(off, 64);
        self.note_store(p, 64);
        // SAFETY: `p` is valid for 64 bytes (checked by `at`); unaligned write.
        unsafe { (p as *mut [u8; 64]).write_unaligned(*line) };
        p as *const u8
    }

    /// Store one 8-byte word; returns its address (for the caller's flush bookkeeping).
    #[inline(always)]
    pub fn write_u64(&self, off: u64, v: u64) -> usize {
        let p = self.at(off, 8);
        self.note_store(p, 8);
        // SAFETY: `p` is valid for 8 bytes (checked by `at`).
        unsafe { std::ptr::write_unaligned(p as *mut u64, v) };
        p as usize
    }

    /// Fill bytes of the pool with `byte`.
    #[inline]
    pub fn fill(&self, off: u64, len: usize, byte: u8) {
        let p = self.at(off, len);
        self.note_store(p, len);
        // SAFETY: destination valid for len bytes (checked).
        unsafe { std::ptr::write_bytes(p, byte, len) }
    }

    /// The 8-byte word at `off` (8-aligned) as an atomic.
    #[inline(always)]
    pub fn atomic_u64(&self, off: u64) -> &AtomicU64 {
        assert!(off.is_multiple_of(8), "unaligned atomic at {off:#x}");
        let p = self.at(off, 8);
        self.note_store(p, 8);
        // SAFETY: in bounds, 8-aligned (base is page aligned), and the mapping outlives the
        // returned reference (it borrows self). AtomicU64 has the same layout as u64.
        unsafe { &*(p as *const AtomicU64) }
    }

    /// Call `f(offset, line)` for every 64-byte line of the mapping that differs from
    /// `reference` (which covers the mapping's first `reference.len()` bytes). Used by the
    /// power-failure simulator. Other threads may store meanwhile: each page is copied out
    /// (raw copies, as every access here), so a line caught mid-store reads as a mix of its
    /// old and new 8-byte words, which is what a crash at that instant could leave too.
    pub fn for_each_differing_line(&self, reference: &[u8], mut f: impl FnMut(usize, &[u8; 64])) {
        let n = reference.len().min(self.len()) & !63;
        let mut page = [0u8; 4096];
        let mut off = 0;
        while off < n {
            let len = (n - off).min(4096);
            let live = &mut page[..len];
            self.read_bytes(off as u64, live);
            if live[..] != reference[off..off + len] {
                for l in (0..len).step_by(64) {
                    if live[l..l + 64] != reference[off + l..off + l + 64] {
                        f(off + l, live[l..l + 64].try_into().unwrap());
                    }
                }
            }
            off += len;
        }
    }

    /// Write the mapped bytes `[off, off+len)` to `file` at the same offset (an online
    /// backup's copy). The kernel reads the mapping (`pwrite` from its address), so stores
    /// that other threads make meanwhile are no data race in this process: a page they change
    /// may be copied half old, half new, and the backup copies it again (`persist::dirty`).
    pub fn copy_to_file(&self, file: &std::fs::File, off: u64, len: usize) -> std::io::Result<()> {
        let src = self.at(off, len);
        let mut done = 0usize;
        while done < len {
            // SAFETY: `at` checked that [off, off+len) lies inside the mapping, which stays
            // mapped while `self` lives; pwrite only reads those bytes.
            let n = unsafe {
                libc::pwrite(
                    file.as_raw_fd(),
                    src.add(done) as *const libc::c_void,
                    len - done,
                    (off as usize + done) as libc::off_t,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "pwrite wrote nothing",
                ));
            }
            done += n as usize;
        }
        Ok(())
    }

    /// A read-only copy of the mapped bytes `[off, off+len)` (used by checks and tests).
    pub fn snapshot(&self, off: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.read_bytes(off, &mut v);
        v
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/reserved describe exactly the reservation made in `new`; unmapping it
        // also removes the file mappings placed inside it.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.reserved);
        }
    }
}

/// `msync(MS_SYNC)` of a page-aligned range.
pub fn msync(addr: usize, len: usize) -> std::io::Result<()> {
    // SAFETY: msync only reads the page tables of the given range; an unmapped range returns
    // ENOMEM, which we report.
    let r = unsafe { libc::msync(addr as *mut libc::c_void, len, libc::MS_SYNC) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Lower the calling thread's CPU priority by `nice` steps (Linux: nice values are per
/// thread). Best effort: an error leaves the priority as it was. A backup's copier uses it, so
/// that on a busy machine the threads serving requests get the CPU first.
pub fn lower_thread_priority(nice: i32) {
    // SAFETY: getpriority/setpriority take no pointers; `who` 0 is the calling thread.
    unsafe {
        *libc::__errno_location() = 0;
        let cur = libc::getpriority(libc::PRIO_PROCESS, 0);
        if *libc::__errno_location() == 0 {
            libc::setpriority(libc::PRIO_PROCESS, 0, (cur + nice).min(19));
        }
    }
}

/// `flock(LOCK_SH | LOCK_NB)`; false when another open file description holds an exclusive
/// lock (a pool open for writing). The lock goes with the file.
pub fn try_lock_shared(file: &std::fs::File) -> std::io::Result<bool> {
    // SAFETY: flock on a valid descriptor has no memory-safety preconditions.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// `flock(LOCK_EX | LOCK_NB)`; false when another open file description holds the lock.
pub fn try_lock_exclusive(file: &std::fs::File) -> std::io::Result<bool> {
    // SAFETY: flock on a valid descriptor has no memory-safety preconditions.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// True when the file lives on tmpfs (DRAM that the origin documents use to emulate NVM).
pub fn is_tmpfs(file: &std::fs::File) -> bool {
    // SAFETY: statfs writes into the zeroed struct we pass; the fd is valid.
    unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        if libc::fstatfs(file.as_raw_fd(), &mut s) != 0 {
            return false;
        }
        s.f_type == libc::TMPFS_MAGIC
    }
}

/// Name of the file system type holding `file` ("tmpfs", "ext4", ...), for reports.
pub fn fs_type_name(file: &std::fs::File) -> &'static str {
    // SAFETY: as in is_tmpfs.
    let t = unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        if libc::fstatfs(file.as_raw_fd(), &mut s) != 0 {
            return "unknown";
        }
        s.f_type
    };
    match t {
        libc::TMPFS_MAGIC => "tmpfs",
        libc::EXT4_SUPER_MAGIC => "ext4",
        libc::XFS_SUPER_MAGIC => "xfs",
        libc::BTRFS_SUPER_MAGIC => "btrfs",
        0x794c7630 => "overlayfs",
        _ => "other",
    }
}

/// Reserve file space so later stores cannot fault with SIGBUS on a full file system.
pub fn fallocate(file: &std::fs::File, off: u64, len: u64) -> std::io::Result<()> {
    // SAFETY: posix_fallocate on a valid descriptor has no memory-safety preconditions.
    let r =
        unsafe { libc::posix_fallocate(file.as_raw_fd(), off as libc::off_t, len as libc::off_t) };
    if r != 0 {
        return Err(std::io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// The panic of [`Mapping::at`], out of line: every checked pool access inlines `at`, and
/// building the message's arguments inline made the hot paths spill registers to the stack
/// (seen in the hash-map batch's put loop).
#[cold]
#[inline(never)]
fn out_of_bounds(off: u64, len: usize, map_len: usize) -> ! {
    panic!("pool access out of bounds: {off:#x}+{len} > {map_len:#x}")
}
