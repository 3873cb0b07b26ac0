//! The templates every damaged image is derived from.

use super::*;

// ---------------------------------------------------------------------------------------------
// Templates

/// A valid pool image and where its metadata lives.
pub(crate) struct Template {
    pub(crate) name: &'static str,
    pub(crate) bytes: Vec<u8>,
    pub(crate) hdr: Header,
    pub(crate) heap_end: u64,
    pub(crate) watermark: u64,
    /// (chunk start, bitmap bytes, blocks) of every RUN chunk.
    pub(crate) runs: Vec<(u64, u64, u64)>,
    /// Offsets of the log slots that hold a record.
    pub(crate) records: Vec<u64>,
    /// Objects allocated in the template (after recovery, for the crashed one).
    pub(crate) objects: Vec<u64>,
    /// Chunk indices worth damaging: RUN chunks and LARGE heads.
    pub(crate) live_chunks: Vec<u64>,
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

    pub(crate) fn slot_count(&self) -> u64 {
        self.hdr.lane_count as u64 * self.hdr.slots_per_lane as u64
    }

    pub(crate) fn slot_off(&self, s: u64) -> u64 {
        self.hdr.lanes_off + s * self.hdr.slot_size as u64
    }
}

pub(crate) fn test_dir() -> tempfile::TempDir {
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
pub(crate) fn build_templates(dir: &Path) -> (Template, Template) {
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
