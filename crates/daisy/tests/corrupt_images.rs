//! Corrupt, truncated and foreign pool images.
//!
//! The rule under test: opening a damaged file either fails with a `daisy::Error` that names
//! the file and leaves it byte-for-byte unchanged, or succeeds with a pool on which `check`,
//! `info`, `objects` and small transactions return errors or report problems, never panic.
//!
//! Every image is derived from one of two templates (a cleanly closed pool, and the same pool
//! after a crash with committed records still in its log) by a mutation drawn from an RNG
//! seeded with (seed, case number), so any failure replays on its own:
//!
//! ```text
//! DAISY_CORRUPT_SEED=<seed> DAISY_CORRUPT_CASE=<case> cargo test -p daisy --test corrupt_images -- --nocapture
//! ```
//!
//! `DAISY_CORRUPT_CASES=<n>` runs more (or fewer) cases than the default.

use bytemuck::{Pod, Zeroable};
use daisy::internals::{
    run_geometry, ChunkEntry, EntryHeader, EntryKind, Header, LogHeader, CHUNK_SIZE, HEADER_SIZE,
    LOG_HEADER_SIZE, LOG_MAGIC, SIZE_CLASSES, STATE_HEAP_END, STATE_OFF, STATE_ROOT_OFF,
    STATE_ROOT_SIZE, STATE_SIZE, STATE_WATERMARK,
};
use daisy::{Error, ModeChoice, PPtr, Pool, PoolOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

const DEFAULT_SEED: u64 = 0xda15_c0de_2024;
const DEFAULT_CASES: u64 = 420;
const HEADER_BYTES: usize = std::mem::size_of::<Header>();

#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct Root {
    count: u64,
    head: PPtr<Node>,
    big: PPtr<u8>,
    blobs: PPtr<u8>,
    pad: [u64; 4],
}

/// 64 bytes, so the per-image transactions allocate from a run that already exists (and
/// harvest its possibly damaged bitmap).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct Node {
    value: u64,
    next: PPtr<Node>,
    payload: [u64; 6],
}

// ---------------------------------------------------------------------------------------------
// Templates

/// A valid pool image and where its metadata lives.
struct Template {
    name: &'static str,
    bytes: Vec<u8>,
    hdr: Header,
    heap_end: u64,
    watermark: u64,
    /// (chunk start, bitmap bytes, blocks) of every RUN chunk.
    runs: Vec<(u64, u64, u64)>,
    /// Offsets of the log slots that hold a record.
    records: Vec<u64>,
    /// Objects allocated in the template (after recovery, for the crashed one).
    objects: Vec<u64>,
    /// Chunk indices worth damaging: RUN chunks and LARGE heads.
    live_chunks: Vec<u64>,
}

impl Template {
    fn from_bytes(name: &'static str, bytes: Vec<u8>, objects: Vec<u64>) -> Template {
        let hdr: Header = bytemuck::pod_read_unaligned(&bytes[..HEADER_BYTES]);
        let heap_end = get_u64(&bytes, STATE_HEAP_END);
        let watermark = get_u64(&bytes, STATE_WATERMARK);
        let chunks = (heap_end - hdr.heap_off) / CHUNK_SIZE;
        let mut runs = Vec::new();
        let mut live_chunks = Vec::new();
        for c in 0..chunks {
            let w = get_u64(&bytes, hdr.chunk_table_off + c * 8);
            match ChunkEntry::decode(w) {
                Some(ChunkEntry::Run { class }) => {
                    let (n, data_off) = run_geometry(class as usize);
                    runs.push((hdr.heap_off + c * CHUNK_SIZE, data_off as u64, n as u64));
                    live_chunks.push(c);
                }
                Some(ChunkEntry::Large { .. }) => live_chunks.push(c),
                _ => {}
            }
        }
        let mut records = Vec::new();
        for s in 0..hdr.lane_count as u64 * hdr.slots_per_lane as u64 {
            let off = hdr.lanes_off + s * hdr.slot_size as u64;
            if get_u32(&bytes, off + 4) == LOG_MAGIC {
                records.push(off);
            }
        }
        assert!(
            !runs.is_empty() && !records.is_empty(),
            "{name}: template too plain"
        );
        Template {
            name,
            bytes,
            hdr,
            heap_end,
            watermark,
            runs,
            records,
            objects,
            live_chunks,
        }
    }

    fn slot_count(&self) -> u64 {
        self.hdr.lane_count as u64 * self.hdr.slots_per_lane as u64
    }

    fn slot_off(&self, s: u64) -> u64 {
        self.hdr.lanes_off + s * self.hdr.slot_size as u64
    }
}

fn test_dir() -> tempfile::TempDir {
    // tmpfs when available, as users run it; any directory works (msync mode elsewhere).
    if Path::new("/dev/shm").is_dir() {
        tempfile::Builder::new()
            .prefix("daisy-corrupt-")
            .tempdir_in("/dev/shm")
            .unwrap()
    } else {
        tempfile::Builder::new()
            .prefix("daisy-corrupt-")
            .tempdir()
            .unwrap()
    }
}

fn push_nodes(pool: &Pool, root: PPtr<Root>, from: u64, n: u64) {
    pool.transaction(|tx| {
        let mut r = tx.read(root)?;
        for v in from..from + n {
            r.head = tx.alloc(&Node {
                value: v,
                next: r.head,
                payload: [v; 6],
            })?;
            r.count += 1;
        }
        tx.write(root, &r)
    })
    .unwrap();
}

/// Build both templates: a pool with a root, a few hundred small objects linked from it, a
/// large object, freed objects, closed cleanly; then the same pool after more commits and a
/// crash (valid records newer than the watermark, which the next open replays).
fn build_templates(dir: &Path) -> (Template, Template) {
    let path = dir.join("template.pool");
    let objects: Vec<u64>;
    let opts = PoolOptions::new("corrupt-test")
        .size(8 << 20)
        .max_size(64 << 20)
        .lanes(4);
    {
        let pool = Pool::create(&path, &opts).unwrap();
        let root = pool.root::<Root>().unwrap();
        for batch in 0..15 {
            push_nodes(&pool, root, batch * 20, 20);
        }
        // A large object (two chunks) and an array of blobs of another size class.
        pool.transaction(|tx| {
            let big = tx.alloc_zeroed_bytes(300 << 10)?;
            tx.write_bytes(big.offset() + 1000, b"large object")?;
            let blobs = tx.alloc_bytes(&[7u8; 200])?;
            tx.update(root, |r| {
                r.big = big;
                r.blobs = blobs;
            })
        })
        .unwrap();
        // Some objects allocated and freed again, in separate transactions.
        let tmp: Vec<PPtr<u8>> = (0..10)
            .map(|i| {
                pool.transaction(|tx| tx.alloc_bytes(&[i as u8; 500]))
                    .unwrap()
            })
            .collect();
        for p in tmp.into_iter().step_by(2) {
            pool.transaction(|tx| tx.free(p)).unwrap();
        }
        let rep = pool.check(None);
        assert!(rep.ok(), "template: {:?}", rep.problems);
        objects = pool.objects().unwrap().iter().map(|o| o.off).collect();
        pool.close().unwrap();
    }
    let clean = std::fs::read(&path).unwrap();
    {
        let pool = Pool::open_with(&path, None, ModeChoice::Auto).unwrap();
        let root = pool.root::<Root>().unwrap();
        for batch in 0..4 {
            push_nodes(&pool, root, 1000 + batch * 5, 5);
        }
        let big = pool.read(root).big;
        pool.transaction(|tx| {
            tx.free(big)?;
            tx.update(root, |r| r.big = PPtr::null())
        })
        .unwrap();
        pool.crash_for_test();
    }
    let crashed = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    // The crashed image must really need recovery, or the variant tests nothing new.
    let crashed_objects: Vec<u64>;
    {
        let p = dir.join("template-check.pool");
        std::fs::write(&p, &crashed).unwrap();
        let pool = Pool::open_with(&p, None, ModeChoice::Auto).unwrap();
        assert!(
            pool.recovery_report().records_replayed > 0,
            "crashed template has nothing to replay: {:?}",
            pool.recovery_report()
        );
        let rep = pool.check(None);
        assert!(rep.ok(), "crashed template: {:?}", rep.problems);
        crashed_objects = pool.objects().unwrap().iter().map(|o| o.off).collect();
        drop(pool);
        std::fs::remove_file(&p).unwrap();
    }
    (
        Template::from_bytes("clean", clean, objects),
        Template::from_bytes("crashed", crashed, crashed_objects),
    )
}

// ---------------------------------------------------------------------------------------------
// Byte helpers

fn get_u64(b: &[u8], off: u64) -> u64 {
    let o = off as usize;
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

fn get_u32(b: &[u8], off: u64) -> u32 {
    let o = off as usize;
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn put_u64(b: &mut [u8], off: u64, v: u64) {
    let o = off as usize;
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

fn flip_bytes(rng: &mut StdRng, img: &mut [u8], start: u64, end: u64, n: usize) -> String {
    let mut what = Vec::new();
    for _ in 0..n {
        let o = rng.gen_range(start..end) as usize;
        let mask = if rng.gen_bool(0.5) {
            1u8 << rng.gen_range(0..8)
        } else {
            rng.gen_range(1..=255u8)
        };
        img[o] ^= mask;
        what.push(format!("{o:#x}^{mask:#04x}"));
    }
    format!("flip {}", what.join(","))
}

/// A value near `base` or at an edge: the values that break range checks.
fn interesting(rng: &mut StdRng, base: u64) -> u64 {
    match rng.gen_range(0..14) {
        0 => 0,
        1 => u64::MAX,
        2 => rng.gen(),
        3 => base.wrapping_add(rng.gen_range(1..16)),
        4 => base.wrapping_sub(rng.gen_range(1..16)),
        5 => base.wrapping_add(4096),
        6 => base.wrapping_sub(4096),
        7 => base.wrapping_add(CHUNK_SIZE),
        8 => base.wrapping_sub(CHUNK_SIZE),
        9 => base.wrapping_mul(2),
        10 => base / 2,
        11 => 1u64 << rng.gen_range(0..64),
        12 => u64::MAX - rng.gen_range(0..2 * CHUNK_SIZE),
        _ => base ^ (1u64 << rng.gen_range(0..64)),
    }
}

fn random_chunk_word(rng: &mut StdRng, max_chunks: u64) -> u64 {
    match rng.gen_range(0..8) {
        0 => ChunkEntry::Free.encode(),
        1 => ChunkEntry::Run {
            class: rng.gen_range(0..SIZE_CLASSES.len() as u16),
        }
        .encode(),
        2 => (1u64 << 56) | rng.gen_range(SIZE_CLASSES.len() as u64..1 << 16), // bad class
        3 => ChunkEntry::Large {
            chunks: rng.gen_range(1..=max_chunks as u32 + 4),
        }
        .encode(),
        4 => ChunkEntry::Large { chunks: u32::MAX }.encode(),
        5 => 2u64 << 56, // LARGE of zero chunks
        6 => (rng.gen_range(3..256u64) << 56) | rng.gen_range(0..1024), // unknown kind
        _ => rng.gen(),
    }
}

// ---------------------------------------------------------------------------------------------
// Mutations

/// What an image must do when opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Open must fail.
    Refused,
    /// Open must fail, or `check` / `objects` must report the damage.
    Detected,
    /// Anything but a panic (the damage may be harmless, or undetectable by design).
    Any,
}

struct Image {
    bytes: Vec<u8>,
    what: String,
    expect: Expect,
}

const KINDS: u64 = 11;

fn mutate(rng: &mut StdRng, t: &Template, kind: u64) -> Image {
    let mut img = t.bytes.clone();
    let h = &t.hdr;
    let max_chunks = (h.max_size - h.heap_off) / CHUNK_SIZE;
    let heap_chunks = (t.heap_end - h.heap_off) / CHUNK_SIZE;
    let (what, expect) = match kind {
        // Header bytes: all of them are covered by the magic, the version or the checksum.
        0 => {
            let n = rng.gen_range(1..=4);
            (
                flip_bytes(rng, &mut img, 0, HEADER_BYTES as u64, n),
                Expect::Refused,
            )
        }
        // Header geometry with a valid checksum: exercises the range checks themselves.
        1 => {
            let mut hdr = *h;
            let mut what = Vec::new();
            for _ in 0..rng.gen_range(1..=2) {
                match rng.gen_range(0..10) {
                    0 => hdr.max_size = interesting(rng, hdr.max_size),
                    1 => hdr.lanes_off = interesting(rng, hdr.lanes_off),
                    2 => hdr.chunk_table_off = interesting(rng, hdr.chunk_table_off),
                    3 => hdr.heap_off = interesting(rng, hdr.heap_off),
                    4 => hdr.lane_count = interesting(rng, hdr.lane_count as u64) as u32,
                    5 => hdr.slots_per_lane = interesting(rng, hdr.slots_per_lane as u64) as u32,
                    6 => hdr.slot_size = interesting(rng, hdr.slot_size as u64) as u32,
                    7 => hdr.chunk_size = interesting(rng, hdr.chunk_size as u64) as u32,
                    8 => {
                        // Shift the heap and table consistently (aligned, plausible values).
                        let d = rng.gen_range(1..64u64) * 4096;
                        if rng.gen_bool(0.5) {
                            hdr.heap_off += d;
                            hdr.max_size += d;
                        } else {
                            hdr.chunk_table_off += d;
                            hdr.heap_off += d;
                        }
                    }
                    _ => hdr.max_size = hdr.heap_off + rng.gen_range(0..40) * CHUNK_SIZE,
                }
            }
            hdr.checksum = hdr.compute_checksum();
            img[..HEADER_BYTES].copy_from_slice(bytemuck::bytes_of(&hdr));
            what.push(format!(
                "header max_size={:#x} lanes_off={:#x} chunk_table_off={:#x} heap_off={:#x} \
                 lanes={} slots={} slot_size={} chunk_size={} (checksum recomputed)",
                hdr.max_size,
                hdr.lanes_off,
                hdr.chunk_table_off,
                hdr.heap_off,
                hdr.lane_count,
                hdr.slots_per_lane,
                hdr.slot_size,
                hdr.chunk_size
            ));
            (what.join("; "), Expect::Any)
        }
        // State page words.
        2 => {
            let field = rng.gen_range(0..5);
            if field == 4 {
                let n = rng.gen_range(1..=3);
                (
                    flip_bytes(rng, &mut img, STATE_OFF, STATE_OFF + 32, n),
                    Expect::Any,
                )
            } else {
                let off = [
                    STATE_WATERMARK,
                    STATE_HEAP_END,
                    STATE_ROOT_OFF,
                    STATE_ROOT_SIZE,
                ][field];
                let old = get_u64(&img, off);
                let base = match rng.gen_range(0..4) {
                    0 => old,
                    1 => h.heap_off,
                    2 => t.heap_end,
                    _ => h.max_size,
                };
                let v = interesting(rng, base);
                put_u64(&mut img, off, v);
                let expect = if field == 1
                    && (v < h.heap_off + CHUNK_SIZE
                        || v > t.bytes.len() as u64
                        || !(v - h.heap_off).is_multiple_of(CHUNK_SIZE))
                {
                    Expect::Refused
                } else {
                    Expect::Any
                };
                (format!("state word {off:#x}: {old:#x} -> {v:#x}"), expect)
            }
        }
        // Log area: flips and word overwrites, mostly in slots that hold records.
        3 => {
            let mut what = Vec::new();
            for _ in 0..rng.gen_range(1..=3) {
                let slot = if rng.gen_bool(0.7) {
                    t.records[rng.gen_range(0..t.records.len())]
                } else {
                    t.slot_off(rng.gen_range(0..t.slot_count()))
                };
                let span = if rng.gen_bool(0.6) { 64 } else { 512 };
                if rng.gen_bool(0.5) {
                    what.push(flip_bytes(rng, &mut img, slot, slot + span, 1));
                } else {
                    let o = slot + rng.gen_range(0..span / 8) * 8;
                    let v = interesting(rng, get_u64(&img, o));
                    put_u64(&mut img, o, v);
                    what.push(format!("log word {o:#x} = {v:#x}"));
                }
            }
            (what.join("; "), Expect::Any)
        }
        // A checksummed record with bad contents: edit an existing record, or forge a new one.
        4 => {
            let what = if rng.gen_bool(0.5) {
                edit_record(rng, t, &mut img)
            } else {
                forge_record(rng, t, &mut img)
            };
            (what, Expect::Any)
        }
        // Chunk table entries.
        5 => {
            let mut what = Vec::new();
            let mut expect = Expect::Any;
            for _ in 0..rng.gen_range(1..=3) {
                let c = match rng.gen_range(0..5) {
                    0 | 1 => t.live_chunks[rng.gen_range(0..t.live_chunks.len())],
                    2 | 3 => rng.gen_range(0..heap_chunks),
                    _ => rng.gen_range(0..max_chunks),
                };
                let off = h.chunk_table_off + c * 8;
                if rng.gen_bool(0.3) {
                    what.push(flip_bytes(rng, &mut img, off, off + 8, 1));
                } else {
                    let v = random_chunk_word(rng, max_chunks);
                    put_u64(&mut img, off, v);
                    what.push(format!("chunk {c} entry = {v:#x}"));
                }
            }
            // An invalid encoding inside the heap must always be noticed (check walks every
            // entry); later edits may hide one behind a LARGE head, so look at the final image.
            // (Not in the crashed template: replay may legitimately overwrite the entry.)
            if t.name == "clean" && invalid_entry_visible(&img, h, heap_chunks) {
                expect = Expect::Detected;
            }
            (what.join("; "), expect)
        }
        // Run bitmaps.
        6 => {
            let (start, bitmap, blocks) = t.runs[rng.gen_range(0..t.runs.len())];
            match rng.gen_range(0..3) {
                0 => {
                    let n = rng.gen_range(1..=4);
                    (
                        flip_bytes(rng, &mut img, start, start + bitmap, n),
                        Expect::Any,
                    )
                }
                1 => {
                    let o = start + rng.gen_range(0..bitmap / 8) * 8;
                    let v = if rng.gen_bool(0.5) {
                        u64::MAX
                    } else {
                        rng.gen()
                    };
                    put_u64(&mut img, o, v);
                    (format!("bitmap word {o:#x} = {v:#x}"), Expect::Any)
                }
                _ => {
                    // Set every bit of the bitmap: check must notice bits past the last block.
                    img[start as usize..(start + bitmap) as usize].fill(0xff);
                    let expect = if bitmap * 8 > blocks {
                        Expect::Detected
                    } else {
                        Expect::Any
                    };
                    (format!("bitmap at {start:#x} all ones"), expect)
                }
            }
        }
        // Truncation.
        7 => {
            let len = t.bytes.len() as u64;
            let cuts = [
                0,
                1,
                7,
                8,
                11,
                12,
                HEADER_BYTES as u64 - 1,
                HEADER_BYTES as u64,
                HEADER_SIZE,
                STATE_OFF + 16,
                h.lanes_off,
                h.chunk_table_off,
                h.heap_off,
                h.heap_off + CHUNK_SIZE - 1,
                t.heap_end - 1,
            ];
            let cut = if rng.gen_bool(0.4) {
                cuts[rng.gen_range(0..cuts.len())]
            } else {
                rng.gen_range(0..len)
            };
            img.truncate(cut as usize);
            (format!("truncated to {cut} bytes"), Expect::Refused)
        }
        // Foreign files: empty, random junk, junk behind a magic (and version), zeros.
        8 => {
            let len = rng.gen_range(0..128 << 10);
            let mut junk = vec![0u8; len];
            rng.fill(&mut junk[..]);
            let (what, expect) = match rng.gen_range(0..6) {
                0 => {
                    junk.clear();
                    ("empty file".to_string(), Expect::Refused)
                }
                1 => (format!("{len} random bytes"), Expect::Refused),
                2 => {
                    let n = len.min(8);
                    junk[..n].copy_from_slice(&t.bytes[..n]);
                    (format!("magic + {len} random bytes"), Expect::Refused)
                }
                3 => {
                    let n = len.min(12);
                    junk[..n].copy_from_slice(&t.bytes[..n]);
                    (
                        format!("magic, version + {len} random bytes"),
                        Expect::Refused,
                    )
                }
                4 => {
                    let n = len.min(HEADER_SIZE as usize);
                    junk[..n].copy_from_slice(&t.bytes[..n]);
                    (
                        format!("valid header + {len} random bytes"),
                        Expect::Refused,
                    )
                }
                _ => {
                    junk = vec![0u8; t.bytes.len()];
                    ("all zeros".to_string(), Expect::Refused)
                }
            };
            img = junk;
            (what, expect)
        }
        // Bytes nobody reads (header padding, the rest of the state page), and junk appended
        // past the heap end: must be harmless.
        9 => {
            let what = match rng.gen_range(0..3) {
                0 => flip_bytes(rng, &mut img, HEADER_BYTES as u64, HEADER_SIZE, 4),
                1 => flip_bytes(rng, &mut img, STATE_OFF + 32, STATE_OFF + STATE_SIZE, 4),
                _ => {
                    let n = rng.gen_range(1..3 * CHUNK_SIZE as usize);
                    let mut junk = vec![0u8; n];
                    rng.fill(&mut junk[..]);
                    img.extend_from_slice(&junk);
                    format!("{n} junk bytes appended")
                }
            };
            (what, Expect::Any)
        }
        // Several metadata regions at once.
        _ => {
            let mut what = Vec::new();
            for _ in 0..rng.gen_range(2..=3) {
                let k = [2, 3, 4, 5, 6][rng.gen_range(0..5)];
                let sub = mutate(rng, t, k);
                // Apply the sub-mutation's changes on top of ours (all keep the length).
                for (i, (a, b)) in sub.bytes.iter().zip(t.bytes.iter()).enumerate() {
                    if a != b {
                        img[i] = *a;
                    }
                }
                what.push(sub.what);
            }
            (what.join(" + "), Expect::Any)
        }
    };
    // A third of the images of the other kinds carry the previous format's header (version 2,
    // checksum recomputed). It is read like version 3 and marked 3 only by an open that gets
    // past every check, so a refused open must leave it unchanged like any other image.
    let mut what = what;
    if kind > 1 && img.len() >= HEADER_BYTES && rng.gen_ratio(1, 3) {
        let mut hdr: Header = bytemuck::pod_read_unaligned(&img[..HEADER_BYTES]);
        hdr.format_version = 2;
        hdr.checksum = hdr.compute_checksum();
        img[..HEADER_BYTES].copy_from_slice(bytemuck::bytes_of(&hdr));
        what.push_str(" (version-2 header)");
    }
    Image {
        bytes: img,
        what,
        expect,
    }
}

/// Whether the image has a chunk table entry with an invalid encoding that a walk from chunk 0
/// reaches (one inside a LARGE object's span is skipped by design).
fn invalid_entry_visible(img: &[u8], h: &Header, heap_chunks: u64) -> bool {
    let mut c = 0;
    while c < heap_chunks {
        match ChunkEntry::decode(get_u64(img, h.chunk_table_off + c * 8)) {
            None => return true,
            Some(ChunkEntry::Large { chunks }) => c += chunks as u64,
            Some(_) => c += 1,
        }
    }
    false
}

/// Rewrite a record's header fields or one entry, then fix its checksum.
fn edit_record(rng: &mut StdRng, t: &Template, img: &mut [u8]) -> String {
    let slot = t.records[rng.gen_range(0..t.records.len())];
    let mut lh: LogHeader =
        bytemuck::pod_read_unaligned(&img[slot as usize..slot as usize + LOG_HEADER_SIZE]);
    let max_payload = t.hdr.slot_size as usize - LOG_HEADER_SIZE;
    let what;
    match rng.gen_range(0..6) {
        0 => {
            lh.seq = interesting(rng, lh.seq);
            what = format!("seq = {:#x}", lh.seq);
        }
        1 => {
            lh.claim = interesting(rng, lh.claim);
            what = format!("claim = {:#x}", lh.claim);
        }
        2 => {
            lh.payload_len = interesting(rng, lh.payload_len as u64) as u32;
            what = format!("payload_len = {}", lh.payload_len);
        }
        3 => {
            lh.n_entries = interesting(rng, lh.n_entries as u64) as u32;
            what = format!("n_entries = {}", lh.n_entries);
        }
        _ => {
            // One word of the payload (entry targets, kind/length words, data).
            let words = (lh.payload_len as u64 / 8).max(1);
            let o = slot + LOG_HEADER_SIZE as u64 + rng.gen_range(0..words) * 8;
            let v = interesting(rng, get_u64(img, o));
            put_u64(img, o, v);
            // Make it replay: a record the watermark covers is never applied.
            lh.seq = lh.seq.max(t.watermark + 1 + rng.gen_range(0..4));
            what = format!("payload word {o:#x} = {v:#x}, seq {}", lh.seq);
        }
    }
    let plen = (lh.payload_len as usize).min(max_payload);
    let payload = &img[slot as usize + LOG_HEADER_SIZE..slot as usize + LOG_HEADER_SIZE + plen];
    lh.checksum = daisy::internals::record_checksum(&lh, payload);
    img[slot as usize..slot as usize + LOG_HEADER_SIZE].copy_from_slice(bytemuck::bytes_of(&lh));
    format!("record at {slot:#x}: {what} (checksum recomputed)")
}

/// Write a new, checksummed record whose entries change metadata: the state page words, chunk
/// table entries, bitmaps, or targets at the edges of (or outside) the data area.
fn forge_record(rng: &mut StdRng, t: &Template, img: &mut [u8]) -> String {
    let h = &t.hdr;
    let max_chunks = (h.max_size - h.heap_off) / CHUNK_SIZE;
    let heap_chunks = (t.heap_end - h.heap_off) / CHUNK_SIZE;
    let slot = t.slot_off(rng.gen_range(0..t.slot_count()));
    let mut payload = Vec::new();
    let mut what = Vec::new();
    let n = rng.gen_range(1..=3);
    for _ in 0..n {
        let (target, kind, data): (u64, EntryKind, Vec<u8>) = match rng.gen_range(0..7) {
            0 => {
                let off = [
                    STATE_WATERMARK,
                    STATE_HEAP_END,
                    STATE_ROOT_OFF,
                    STATE_ROOT_SIZE,
                ][rng.gen_range(0..4)];
                let base =
                    [get_u64(img, off), h.heap_off, t.heap_end, h.max_size][rng.gen_range(0..4)];
                (
                    off,
                    EntryKind::Copy,
                    interesting(rng, base).to_le_bytes().to_vec(),
                )
            }
            1 => {
                // Several state words at once, at an unaligned start.
                let off = STATE_OFF + rng.gen_range(0..24);
                let mut d = vec![0u8; rng.gen_range(1..=24)];
                rng.fill(&mut d[..]);
                (off, EntryKind::Copy, d)
            }
            2 => {
                let c = rng.gen_range(0..max_chunks);
                let w = random_chunk_word(rng, max_chunks);
                (
                    h.chunk_table_off + c * 8,
                    EntryKind::Copy,
                    w.to_le_bytes().to_vec(),
                )
            }
            3 => {
                let (start, bitmap, _) = t.runs[rng.gen_range(0..t.runs.len())];
                let o = start + rng.gen_range(0..bitmap / 8) * 8;
                let k = if rng.gen_bool(0.5) {
                    EntryKind::Or
                } else {
                    EntryKind::AndNot
                };
                (o, k, rng.gen::<u64>().to_le_bytes().to_vec())
            }
            4 => {
                // Right at the end of the heap (or just past it).
                let len = rng.gen_range(1..64);
                let o = t.heap_end - len + rng.gen_range(0..2);
                (o, EntryKind::Copy, vec![0xee; len as usize])
            }
            5 => {
                // The header or the lanes: never a legal target.
                let o = if rng.gen_bool(0.5) {
                    rng.gen_range(0..HEADER_SIZE)
                } else {
                    h.lanes_off + rng.gen_range(0..h.chunk_table_off - h.lanes_off)
                };
                (o, EntryKind::Copy, vec![0x11; 8])
            }
            _ => {
                // Into a heap chunk, possibly a run's data or a covered chunk.
                let o = h.heap_off + rng.gen_range(0..heap_chunks * CHUNK_SIZE - 8);
                (o, EntryKind::Copy, rng.gen::<u64>().to_le_bytes().to_vec())
            }
        };
        let eh = EntryHeader::new(target, kind, data.len() as u64);
        payload.extend_from_slice(bytemuck::bytes_of(&eh));
        payload.extend_from_slice(&data);
        payload.resize(payload.len().next_multiple_of(8), 0);
        what.push(format!("{kind:?} {target:#x}+{}", data.len()));
    }
    debug_assert!(payload.len() + LOG_HEADER_SIZE <= h.slot_size as usize);
    let seq = match rng.gen_range(0..4) {
        0 => u64::MAX,
        1 => t.watermark.max(1), // covered by the watermark: never replayed
        _ => t.watermark + 1 + rng.gen_range(0..40),
    };
    let claim = if rng.gen_bool(0.8) {
        rng.gen_range(0..seq)
    } else {
        interesting(rng, seq)
    };
    let mut lh = LogHeader {
        checksum: 0,
        magic: LOG_MAGIC,
        seq,
        claim,
        payload_len: payload.len() as u32,
        n_entries: n,
    };
    lh.checksum = daisy::internals::record_checksum(&lh, &payload);
    let s = slot as usize;
    img[s..s + LOG_HEADER_SIZE].copy_from_slice(bytemuck::bytes_of(&lh));
    img[s + LOG_HEADER_SIZE..s + LOG_HEADER_SIZE + payload.len()].copy_from_slice(&payload);
    format!(
        "forged record at {slot:#x} seq={seq:#x} claim={claim:#x}: {}",
        what.join(", ")
    )
}

// ---------------------------------------------------------------------------------------------
// Running one image

#[derive(Debug)]
enum Outcome {
    Refused,
    Opened { problems: usize },
}

/// Open the image and exercise the pool. `Err` is a broken promise other than a panic.
fn exercise(path: &Path, t: &Template, img: &Image, rng: &mut StdRng) -> Result<Outcome, String> {
    let pool = match Pool::open_with(path, None, ModeChoice::Auto) {
        Err(e) => {
            let msg = e.to_string();
            let shown = path.display().to_string();
            if !msg.contains(&shown) {
                return Err(format!("open error does not name the file: {msg}"));
            }
            let now = std::fs::read(path).map_err(|e| format!("re-read: {e}"))?;
            if now != img.bytes {
                let first = now
                    .iter()
                    .zip(&img.bytes)
                    .position(|(a, b)| a != b)
                    .unwrap_or(now.len().min(img.bytes.len()));
                return Err(format!(
                    "refused open changed the file (first difference at {first:#x}): {msg}"
                ));
            }
            return Ok(Outcome::Refused);
        }
        Ok(p) => p,
    };
    if img.expect == Expect::Refused {
        return Err("open accepted an image it must refuse".into());
    }
    let hdr: Header = bytemuck::pod_read_unaligned(&img.bytes[..HEADER_BYTES]);
    let rep = pool.check(None);
    let info = pool.info();
    let objs = pool.objects();
    if let Ok(objs) = &objs {
        // A listing is either an error or true: every object lies inside the heap.
        for o in objs {
            if o.off < hdr.heap_off || o.off.checked_add(o.size).is_none_or(|e| e > info.size) {
                return Err(format!(
                    "objects() lists {:#x}+{} outside the heap {:#x}..{:#x}",
                    o.off, o.size, hdr.heap_off, info.size
                ));
            }
        }
    }
    if img.expect == Expect::Detected && rep.ok() && objs.is_ok() {
        return Err("damage went unnoticed: open, check and objects all succeeded".into());
    }
    // The root and a few nodes (errors are fine: the root may be gone or of another size).
    if let Ok(root) = pool.root::<Root>() {
        let _ = pool.transaction(|tx| {
            let mut p = tx.read(root)?.head;
            for _ in 0..8 {
                if p.is_null() {
                    break;
                }
                p = tx.read(p)?.next;
            }
            Ok::<_, Error>(())
        });
    }
    // Small allocations: commit one, then free it.
    let small = pool.transaction(|tx| {
        let p = tx.alloc(&[0xa5u8; 64])?;
        tx.write(p, &[0x5au8; 64])?;
        Ok::<_, Error>(p)
    });
    if let Ok(p) = small {
        let _ = pool.transaction(|tx| tx.free(p));
    }
    // Free objects the template had (their metadata may be damaged now), and one that the
    // damaged pool lists, in separate transactions.
    // (Objects that start a chunk are the large ones: damage to their entries matters most.)
    let heads: Vec<u64> = (t.objects.iter().copied())
        .filter(|o| (o - t.hdr.heap_off).is_multiple_of(CHUNK_SIZE))
        .collect();
    let mut victims = vec![t.objects[rng.gen_range(0..t.objects.len())]];
    if !heads.is_empty() {
        victims.push(heads[rng.gen_range(0..heads.len())]);
    }
    if let Ok(objs) = &objs {
        if !objs.is_empty() {
            victims.push(objs[rng.gen_range(0..objs.len())].off);
        }
        // And every large object it lists (damaged entries may make them overlap).
        victims.extend(
            objs.iter()
                .filter(|o| o.size >= CHUNK_SIZE)
                .map(|o| o.off)
                .take(8),
        );
    }
    for off in victims {
        let _ = pool.transaction(|tx| tx.free(PPtr::<u8>::from_offset(off)));
    }
    // Enough small commits for the watermark to pass the frees (so their space is reused),
    // then large allocations: they scan the chunk table, take freed chunks and grow the pool.
    for _ in 0..8 {
        let _ = pool.transaction(|tx| tx.alloc(&[1u64; 8]));
    }
    let mut bigs = Vec::new();
    for size in [300 << 10, 600 << 10, 8 << 20] {
        if let Ok(p) = pool.transaction(|tx| tx.alloc_zeroed_bytes(size)) {
            bigs.push(p);
        }
    }
    for p in bigs {
        let _ = pool.transaction(|tx| tx.free(p));
    }
    let _ = pool.check(None);
    let _ = pool.info();
    drop(pool);
    Ok(Outcome::Opened {
        problems: rep.problems.len(),
    })
}

thread_local! {
    static PANIC_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".into()
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={v:?} is not a number")))
}

#[test]
fn corrupt_images_are_refused_or_handled() {
    let t0 = std::time::Instant::now();
    let seed = env_u64("DAISY_CORRUPT_SEED").unwrap_or(DEFAULT_SEED);
    let cases: Vec<u64> = match env_u64("DAISY_CORRUPT_CASE") {
        Some(c) => vec![c],
        None => (0..env_u64("DAISY_CORRUPT_CASES").unwrap_or(DEFAULT_CASES)).collect(),
    };
    // Remember where a panic happened (the payload has only the message).
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let at = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        PANIC_AT.with(|a| a.replace(Some(at)));
        default_hook(info);
    }));
    let dir = test_dir();
    let (clean, crashed) = build_templates(dir.path());
    let mut failures = Vec::new();
    let mut refused = [0usize; KINDS as usize];
    let mut opened = [0usize; KINDS as usize];
    let mut noticed = 0usize;
    for &case in &cases {
        // One RNG per case, so a case replays without running the ones before it.
        let mut rng = StdRng::seed_from_u64(seed ^ case.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let kind = case % KINDS;
        let t = if rng.gen_bool(0.5) { &clean } else { &crashed };
        let path: PathBuf = dir.path().join(format!("case-{case}.pool"));
        let tag = format!("seed={seed:#x} case={case} template={} kind={kind}", t.name);
        let img = mutate(&mut rng, t, kind);
        std::fs::write(&path, &img.bytes).unwrap();
        let result = catch_unwind(AssertUnwindSafe(|| exercise(&path, t, &img, &mut rng)));
        let _ = std::fs::remove_file(&path);
        let tag = format!("{tag} [{}]", img.what);
        match result {
            Err(p) => {
                let at = PANIC_AT.with(|a| a.take()).unwrap_or_default();
                failures.push(format!("{tag}: PANIC at {at}: {}", panic_message(&*p)))
            }
            Ok(Err(e)) => failures.push(format!("{tag}: {e}")),
            Ok(Ok(Outcome::Refused)) => refused[kind as usize] += 1,
            Ok(Ok(Outcome::Opened { problems })) => {
                opened[kind as usize] += 1;
                noticed += (problems > 0) as usize;
            }
        }
    }
    drop(dir);
    println!(
        "{} images in {:.2?} (seed {seed:#x}): refused per kind {refused:?}, opened per kind \
         {opened:?}, {noticed} opened with check problems",
        cases.len(),
        t0.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {} images broke the rule (replay one with DAISY_CORRUPT_SEED=<seed> \
         DAISY_CORRUPT_CASE=<case>):\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
