//! The on-media format, version 2. docs/FORMAT.md is the prose version of this file; keep them
//! in step, and bump [`FORMAT_VERSION`] for any change an older reader would misread.
//! (Version 2 added the 16-byte word log entries, which a version-1 reader would take for a
//! damaged record.)
//!
//! ```text
//! offset 0            Header        4 KiB, written once at create, crc32c-protected
//! offset 4096         PoolState     4 KiB page, first cache line used: watermark, heap_end, root,
//!                                   undo table (version 5)
//! lanes_off           lanes         lane_count x slots_per_lane x slot_size bytes of redo log
//! chunk_table_off     chunk table   one u64 per chunk of the *maximum* pool size
//! heap_off            heap          chunks of CHUNK_SIZE bytes, up to heap_end
//! ```
//!
//! Invariants (checked by `pool check`, asserted where cheap):
//! * every offset field is a multiple of 4096 and the regions are in the order above;
//! * `heap_end` is `heap_off + k * CHUNK_SIZE`, `<= max_size`, `<= file length`;
//! * a chunk table entry is FREE, RUN(class) or LARGE(n) (the head of n chunks); the n-1
//!   chunks after a LARGE head are covered by it and stay FREE in the table;
//! * a RUN chunk starts with its allocation bitmap; bit i set <=> block i is allocated.

use bytemuck::{Pod, Zeroable};

/// First 8 bytes of every pool file.
pub const MAGIC: [u8; 8] = *b"DAISYPL\0";
/// The format this build writes. Version 3 added the run classes of 80 and 112 KiB
/// ([`SIZE_CLASSES`]); version 4 the overflow records of transactions larger than a log slot
/// (log.rs); version 5 the undo table of direct stores ([`PoolState::undo_table`], undo.rs).
/// Older pools are valid version-5 pools and are marked 5 when this build opens them
/// (docs/FORMAT.md, the versions list at the top).
pub const FORMAT_VERSION: u32 = 5;
/// The oldest format this build reads (and upgrades to [`FORMAT_VERSION`] at open).
pub const OLDEST_READ_VERSION: u32 = 2;
/// Bytes reserved for the header (one page).
pub const HEADER_SIZE: u64 = 4096;
/// Offset of the state page.
pub const STATE_OFF: u64 = 4096;
/// Bytes reserved for the state page.
pub const STATE_SIZE: u64 = 4096;
/// Heap chunk: unit of large allocations and of runs of small blocks.
pub const CHUNK_SIZE: u64 = 256 * 1024;
/// Bytes of the layout-name field (names are at most one less, NUL-padded).
pub const LAYOUT_MAX: usize = 64;

/// Log lanes of a new pool unless it says (at most this many threads commit without waiting).
pub const DEFAULT_LANES: u32 = 32;
/// Log slots per lane: chosen when a pool is created (see [`default_slots_per_lane`]) and kept
/// in its header. A lane lets `slots - 2` of its commits pass before it writes back the lines a
/// transaction applied (`tx.rs`, "deferred write-back"), so more slots mean fewer write-backs
/// of lines written again and again (a counter, a map's length), for more log space.
pub const DEFAULT_SLOTS_PER_LANE: u32 = 8;
/// The slot count of pools with room for it (see [`default_slots_per_lane`]).
pub const ROOMY_SLOTS_PER_LANE: u32 = 32;
/// Fewest log slots per lane a pool may have.
pub const MIN_SLOTS_PER_LANE: u32 = 4;
/// Most log slots per lane a pool may have.
pub const MAX_SLOTS_PER_LANE: u32 = 64;

/// Slots per lane for a new pool that does not say: [`ROOMY_SLOTS_PER_LANE`] when their log
/// takes at most a quarter of the pool's initial size, else [`DEFAULT_SLOTS_PER_LANE`]. (With
/// the default 32 lanes of 16 KiB slots that is pools of 64 MiB and more; `daisy serve`'s 2
/// lanes of 1 MiB slots get 32 from 256 MiB on, and keep 8 in its default 64 MiB pool.)
pub fn default_slots_per_lane(lanes: u32, slot_size: u32, size: u64) -> u32 {
    let roomy = lanes as u64 * ROOMY_SLOTS_PER_LANE as u64 * slot_size as u64;
    if roomy <= size / 4 {
        ROOMY_SLOTS_PER_LANE
    } else {
        DEFAULT_SLOTS_PER_LANE
    }
}
/// Bytes of a log slot (the most redo record one transaction may write) unless a pool says.
pub const DEFAULT_SLOT_SIZE: u32 = 16 * 1024;
/// Smallest log slot a pool may have.
pub const MIN_SLOT_SIZE: u32 = 256;
/// Largest log slot a pool may have.
pub const MAX_SLOT_SIZE: u32 = 64 * 1024 * 1024;

/// The pool header. Written once by `create`, then only read, except the version-2 to 3
/// upgrade at open, one atomic store of the aligned word that holds `format_version` and
/// `checksum`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// [`FORMAT_VERSION`] when written by this build.
    pub format_version: u32,
    /// crc32c of the whole struct with this field set to zero.
    pub checksum: u32,
    /// Random (version 4) identity of the pool.
    pub uuid: [u8; 16],
    /// Layout name, NUL-padded UTF-8.
    pub layout: [u8; LAYOUT_MAX],
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_unix_ns: u64,
    /// The pool never grows beyond this many bytes of file.
    pub max_size: u64,
    /// Offset of the first log lane.
    pub lanes_off: u64,
    /// Offset of the chunk table.
    pub chunk_table_off: u64,
    /// Offset of chunk 0 of the heap.
    pub heap_off: u64,
    /// Number of log lanes.
    pub lane_count: u32,
    /// Log slots per lane.
    pub slots_per_lane: u32,
    /// Bytes per log slot.
    pub slot_size: u32,
    /// [`CHUNK_SIZE`].
    pub chunk_size: u32,
}

const _: () = assert!(std::mem::size_of::<Header>() == 152);

impl Header {
    /// crc32c of the header with `checksum` zero.
    pub fn compute_checksum(&self) -> u32 {
        let mut h = *self;
        h.checksum = 0;
        crc32c::crc32c(bytemuck::bytes_of(&h))
    }

    /// The layout name (lossy UTF-8).
    pub fn layout_name(&self) -> String {
        let end = self
            .layout
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(LAYOUT_MAX);
        String::from_utf8_lossy(&self.layout[..end]).into_owned()
    }

    /// Chunks the heap may grow to.
    pub fn max_chunks(&self) -> u64 {
        (self.max_size - self.heap_off) / CHUNK_SIZE
    }

    /// Bytes of one lane's log.
    pub fn lane_bytes(&self) -> u64 {
        self.slots_per_lane as u64 * self.slot_size as u64
    }
}

/// Mutable pool state, one cache line at [`STATE_OFF`]. Each field is one 8-byte word updated
/// either by an atomic 8-byte store + flush + fence (`watermark`, `heap_end`) or through the
/// redo log (`root_off`, `root_size`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct PoolState {
    /// Every transaction with `seq <= watermark` is durably applied; recovery ignores its log.
    pub watermark: u64,
    /// End of the usable heap (bytes from the start of the file).
    pub heap_end: u64,
    /// Offset of the root object, 0 when none.
    pub root_off: u64,
    /// Size of the root object in bytes.
    pub root_size: u64,
    /// The undo table of the session that last had the pool open, 0 when none (format
    /// version 5; undo.rs): recovery restores from it, then clears it.
    pub undo_table: u64,
}

/// Offset of [`PoolState::watermark`].
pub const STATE_WATERMARK: u64 = STATE_OFF;
/// Offset of [`PoolState::heap_end`].
pub const STATE_HEAP_END: u64 = STATE_OFF + 8;
/// Offset of [`PoolState::root_off`].
pub const STATE_ROOT_OFF: u64 = STATE_OFF + 16;
/// Offset of [`PoolState::root_size`].
pub const STATE_ROOT_SIZE: u64 = STATE_OFF + 24;
/// Offset of [`PoolState::undo_table`].
pub const STATE_UNDO_TABLE: u64 = STATE_OFF + 32;

// ---- chunk table entries ----

/// A free chunk's table entry.
pub const CHUNK_FREE: u64 = 0;
const KIND_SHIFT: u32 = 56;
const KIND_RUN: u64 = 1;
const KIND_LARGE: u64 = 2;

/// A decoded chunk table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkEntry {
    /// Not in use (or covered by a large object's head).
    Free,
    /// A run of blocks of size class `class`.
    Run {
        /// Index into [`SIZE_CLASSES`].
        class: u16,
    },
    /// Head of a large allocation spanning `chunks` chunks.
    Large {
        /// Chunks the object spans, this one included.
        chunks: u32,
    },
}

impl ChunkEntry {
    /// The table word.
    pub fn encode(self) -> u64 {
        match self {
            ChunkEntry::Free => CHUNK_FREE,
            ChunkEntry::Run { class } => (KIND_RUN << KIND_SHIFT) | class as u64,
            ChunkEntry::Large { chunks } => (KIND_LARGE << KIND_SHIFT) | chunks as u64,
        }
    }
    /// The entry a table word holds (None: damage).
    pub fn decode(w: u64) -> Option<ChunkEntry> {
        if w == CHUNK_FREE {
            return Some(ChunkEntry::Free);
        }
        let low = w & ((1 << KIND_SHIFT) - 1);
        match w >> KIND_SHIFT {
            KIND_RUN if (low as usize) < SIZE_CLASSES.len() => {
                Some(ChunkEntry::Run { class: low as u16 })
            }
            KIND_LARGE if low > 0 && low <= u32::MAX as u64 => {
                Some(ChunkEntry::Large { chunks: low as u32 })
            }
            _ => None,
        }
    }
}

// ---- size classes ----

/// Block sizes of runs. Allocations larger than the last class take whole chunks.
///
/// Above 64 KiB only the classes that pack more than one block into a chunk are worth having:
/// 80 KiB (3 per chunk) and 112 KiB (2 per chunk; a 100 KB value took a whole 256 KiB chunk
/// before them). A 96 or 128 KiB class would hold no more per chunk than 112 KiB does (two, and
/// one with the bitmap). Added in format version 3, at the end, so the indices of the older
/// classes (in the chunk table's RUN entries) are unchanged.
pub const SIZE_CLASSES: [u32; 46] = [
    16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024,
    1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336,
    16384, 20480, 24576, 28672, 32768, 40960, 49152, 57344, 65536, 81920, 114688,
];

/// The largest block size of a run.
pub const MAX_RUN_BLOCK: u64 = SIZE_CLASSES[SIZE_CLASSES.len() - 1] as u64;

/// Smallest class that fits `size` bytes.
#[inline]
pub fn class_for(size: u64) -> Option<usize> {
    if size <= 128 {
        return Some((size.max(1) as usize).div_ceil(16) - 1);
    }
    if size > MAX_RUN_BLOCK {
        return None;
    }
    Some(SIZE_CLASSES.partition_point(|&c| (c as u64) < size))
}

/// Geometry of a run of class `class`: (blocks, offset of block 0 from the chunk start).
/// The bitmap occupies the start of the chunk, rounded up to a cache line.
#[inline]
pub const fn run_geometry(class: usize) -> (u32, u32) {
    RUN_GEOMETRY[class]
}

/// [`run_geometry`] for every class, computed at compile time.
const RUN_GEOMETRY: [(u32, u32); SIZE_CLASSES.len()] = {
    let mut t = [(0u32, 0u32); SIZE_CLASSES.len()];
    let mut i = 0;
    while i < SIZE_CLASSES.len() {
        t[i] = compute_run_geometry(i);
        i += 1;
    }
    t
};

const fn compute_run_geometry(class: usize) -> (u32, u32) {
    let size = SIZE_CLASSES[class] as u64;
    // The largest n with bitmap(n) + n * size <= CHUNK_SIZE.
    let mut n = CHUNK_SIZE / size;
    loop {
        let bitmap = (n.div_ceil(64) * 8).next_multiple_of(64);
        if bitmap + n * size <= CHUNK_SIZE {
            return (n as u32, bitmap as u32);
        }
        n -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_sorted_and_16_aligned() {
        for w in SIZE_CLASSES.windows(2) {
            assert!(w[0] < w[1]);
        }
        for c in SIZE_CLASSES {
            assert_eq!(c % 16, 0);
        }
    }

    #[test]
    fn class_for_picks_smallest_fit() {
        for size in 1..=MAX_RUN_BLOCK {
            let c = class_for(size).unwrap();
            assert!(SIZE_CLASSES[c] as u64 >= size, "size {size}");
            if c > 0 {
                assert!((SIZE_CLASSES[c - 1] as u64) < size, "size {size}");
            }
        }
        assert_eq!(class_for(MAX_RUN_BLOCK + 1), None);
    }

    #[test]
    fn run_geometry_fits_chunk() {
        for (c, &size) in SIZE_CLASSES.iter().enumerate() {
            let (n, off) = run_geometry(c);
            // Every class packs at least two blocks into a chunk (else it would be no better
            // than a large object of one chunk).
            assert!(n >= 2, "class {c}");
            assert_eq!(off % 64, 0);
            assert!(off as u64 + n as u64 * size as u64 <= CHUNK_SIZE);
            assert!(off as u64 * 8 >= n as u64);
        }
    }

    #[test]
    fn chunk_entry_roundtrip() {
        for e in [
            ChunkEntry::Free,
            ChunkEntry::Run { class: 0 },
            ChunkEntry::Run { class: 43 },
            ChunkEntry::Run { class: 45 },
            ChunkEntry::Large { chunks: 1 },
            ChunkEntry::Large { chunks: 1 << 20 },
        ] {
            assert_eq!(ChunkEntry::decode(e.encode()), Some(e));
        }
        assert_eq!(ChunkEntry::decode(7 << 56), None);
        assert_eq!(ChunkEntry::decode((1 << 56) | 46), None);
        assert_eq!(ChunkEntry::decode(2 << 56), None);
    }
}
