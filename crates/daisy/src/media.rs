//! The open pool file as every layer sees it: its path, file, mapping, header, persistence
//! functions and geometry, the heap end, and the poisoned flag; with the few operations that
//! need nothing more (bounds checks, the state page, durable one-word stores, the chunk table).
//! `shared::PoolInner` holds one and derefs to it.

use crate::alloc::Geometry;
use crate::error::{Error, Result};
use crate::layout::*;
use crate::map::Mapping;
use crate::persist::Persister;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub(crate) struct Media {
    pub path: PathBuf,
    pub file: File,
    pub map: Mapping,
    pub hdr: Header,
    pub persist: Persister,
    pub geo: Geometry,
    /// DRAM copy of the state page's heap end (bounds checks on the hot path read this);
    /// raised by growth after the new end is durable.
    pub heap_end_cache: AtomicU64,
    /// The size the pool may grow to now (bytes, at most the header's `max_size`, which is
    /// the pool's capacity): `Pool::set_max_size`, in DRAM only.
    pub size_limit: AtomicU64,
    /// A persist failed, or the process is to be treated as crashed: no more writes.
    pub poisoned: AtomicBool,
    /// Fault injection for tests (see `Pool::fail_next_apply_for_test`).
    pub fail_apply: AtomicBool,
}

impl Media {
    /// The state page's words.
    pub fn state(&self) -> PoolState {
        self.map.read(STATE_OFF)
    }

    /// The size the pool may grow to now.
    pub fn max_size(&self) -> u64 {
        self.size_limit.load(Ordering::Relaxed)
    }

    #[inline]
    pub fn heap_end(&self) -> u64 {
        self.heap_end_cache.load(Ordering::Acquire)
    }

    /// `Ok` when `[off, off + len)` lies inside the heap.
    pub fn heap_range(&self, off: u64, len: u64) -> Result<()> {
        let end = off.checked_add(len);
        if off >= self.hdr.heap_off && end.is_some_and(|e| e <= self.heap_end()) {
            Ok(())
        } else {
            Err(Error::InvalidPointer {
                offset: off,
                why: "outside the pool's heap",
            })
        }
    }

    /// Bounds check for user-supplied pointers: out-of-range pointers are a bug in the caller,
    /// reported with the offset (a panic).
    pub fn check_ptr(&self, off: u64, len: u64) {
        let end = off.checked_add(len);
        assert!(
            off >= self.hdr.heap_off && end.is_some_and(|e| e <= self.heap_end()),
            "persistent pointer {off:#x}+{len} is outside the heap of {}",
            self.path.display()
        );
    }

    /// Store one aligned 8-byte word in place and make it durable: store, flush, fence. An
    /// aligned 8-byte store is atomic under power failure, so a crash leaves the old word or
    /// the new one; the callers (one-word transactions, hash maps' in-place slot writes) state
    /// why no log record can be replayed over it.
    #[inline(always)]
    pub fn store_word_durable(&self, off: u64, word: u64) -> Result<()> {
        self.store_word_flushed(off, word);
        self.persist.fence().map_err(|e| self.io_err("persist", e))
    }

    /// The store and write-back of [`Self::store_word_durable`] without its fence: the
    /// caller fences before it reports the word durable (and may do DRAM bookkeeping first:
    /// its stores then drain while the line is written back instead of queuing behind the
    /// fence).
    #[inline(always)]
    pub fn store_word_flushed(&self, off: u64, word: u64) {
        if sim_fault!(TransientStore) {
            self.map.atomic_u64(off).store(!word, Ordering::Relaxed);
        }
        self.map.atomic_u64(off).store(word, Ordering::Relaxed);
        if !sim_fault!(NoInPlaceFlush) {
            self.persist.flush(self.map.at(off, 8), 8);
        }
    }

    pub fn io_err(&self, what: &'static str, e: std::io::Error) -> Error {
        self.poisoned.store(true, Ordering::Release);
        Error::io(&self.path, what, e)
    }

    /// Read a chunk table entry (None when the encoding is invalid).
    pub fn chunk_entry(&self, chunk: u64) -> Option<ChunkEntry> {
        ChunkEntry::decode(self.map.read(self.geo.chunk_entry_off(chunk)))
    }

    pub fn heap_chunks(&self) -> u64 {
        (self.heap_end() - self.hdr.heap_off) / CHUNK_SIZE
    }

    /// The usable size of the allocated object that starts exactly at `off`, or why there is
    /// none (for checkers of pointers read from the media: the chunk table and the run's
    /// bitmap decide, as `free` would).
    pub fn allocated_object(&self, off: u64) -> std::result::Result<u64, &'static str> {
        let chunk = self
            .geo
            .chunk_of(off)
            .filter(|&c| c < self.heap_chunks())
            .ok_or("outside the heap")?;
        match self.chunk_entry(chunk) {
            Some(ChunkEntry::Run { class }) => {
                let b = self
                    .geo
                    .block_at(chunk, class, off)
                    .ok_or("not the start of a block")?;
                let word = self.map.atomic_u64(b.bitmap_word).load(Ordering::Acquire);
                if word & b.mask == 0 {
                    return Err("a free block");
                }
                Ok(SIZE_CLASSES[class as usize] as u64)
            }
            Some(ChunkEntry::Large { chunks }) if off == self.geo.chunk_start(chunk) => {
                Ok(chunks as u64 * CHUNK_SIZE)
            }
            Some(ChunkEntry::Large { .. }) => Err("inside a large object, not at its start"),
            _ => Err("not in an allocated chunk"),
        }
    }
}
