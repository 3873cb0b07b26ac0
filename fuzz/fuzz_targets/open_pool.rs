//! Fuzz target: damaged pool images must be refused with an error or handled without a panic.
//!
//! The input is a list of patches applied to a valid template pool (built once per process):
//!
//! ```text
//! byte 0        flags: bit 0 use the crashed template (committed records still in the log)
//!                      bit 1 recompute the header checksum after patching
//!                      bit 2 recompute the checksum of every slot that holds a record
//!                      bit 3 truncate: the next 4 bytes (LE) give the length, modulo the size
//! then, repeated: region (1 byte), offset (2 bytes LE), length (1 byte), that many bytes
//! ```
//!
//! A region selects where the offset points (modulo the region's size): the header, the state
//! page, the log lanes, the chunk table, the first run bitmap, or anywhere in the file. The
//! checksum fix-ups let patches reach the geometry and record validation behind the checksums.
//!
//! The target panics when the library panics, and also when a promise is broken: a refused open
//! that does not name the file or that changed it.

#![no_main]

use daisy::internals::{ChunkEntry, Header, LogHeader, CHUNK_SIZE, LOG_HEADER_SIZE, LOG_MAGIC};
use daisy::{Error, ModeChoice, PPtr, Pool, PoolOptions};
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const HEADER_BYTES: usize = std::mem::size_of::<Header>();

struct Templates {
    clean: Vec<u8>,
    crashed: Vec<u8>,
    hdr: Header,
    /// Start of the first RUN chunk.
    run: u64,
    /// Where this process writes its images.
    path: PathBuf,
}

fn dir() -> PathBuf {
    // tmpfs when available, as users run it.
    if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    }
}

fn build() -> Templates {
    let path = dir().join(format!("daisy-fuzz-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    // Small geometry: every iteration writes the whole image.
    let opts = PoolOptions::new("fuzz")
        .size(2 << 20)
        .max_size(16 << 20)
        .lanes(2)
        .log_slot_size(4096);
    let clean = {
        let pool = Pool::create(&path, &opts).expect("create template");
        let root = pool.root::<[u64; 8]>().expect("root");
        for i in 0..40u64 {
            pool.transaction(|tx| {
                let n = tx.alloc(&[i; 8])?;
                tx.update(root, |r| r[(i % 8) as usize] = n.offset())
            })
            .expect("template transaction");
        }
        pool.transaction(|tx| {
            let big = tx.alloc_zeroed_bytes(300 << 10)?;
            tx.update(root, |r| r[7] = big.offset())
        })
        .expect("template transaction");
        pool.close().expect("close template");
        std::fs::read(&path).expect("read template")
    };
    let crashed = {
        let pool = Pool::open_with(&path, None, ModeChoice::Auto).expect("reopen template");
        let root = pool.root::<[u64; 8]>().expect("root");
        for i in 0..5u64 {
            pool.transaction(|tx| {
                let n = tx.alloc(&[i; 8])?;
                tx.update(root, |r| r[0] = n.offset())
            })
            .expect("template transaction");
        }
        pool.crash_for_test();
        std::fs::read(&path).expect("read template")
    };
    let _ = std::fs::remove_file(&path);
    let hdr: Header = bytemuck::pod_read_unaligned(&clean[..HEADER_BYTES]);
    let run = (0..(clean.len() as u64 - hdr.heap_off) / CHUNK_SIZE)
        .find(|c| {
            let o = (hdr.chunk_table_off + c * 8) as usize;
            let w = u64::from_le_bytes(clean[o..o + 8].try_into().unwrap());
            matches!(ChunkEntry::decode(w), Some(ChunkEntry::Run { .. }))
        })
        .map(|c| hdr.heap_off + c * CHUNK_SIZE)
        .expect("template has a run");
    Templates {
        clean,
        crashed,
        hdr,
        run,
        path,
    }
}

fn templates() -> &'static Templates {
    static T: OnceLock<Templates> = OnceLock::new();
    T.get_or_init(build)
}

/// Apply the fuzz input to a copy of a template.
fn image(t: &Templates, data: &[u8]) -> Vec<u8> {
    let Some((&flags, mut rest)) = data.split_first() else {
        return t.clean.clone();
    };
    let mut img = if flags & 1 != 0 {
        t.crashed.clone()
    } else {
        t.clean.clone()
    };
    let h = &t.hdr;
    let regions: [(u64, u64); 6] = [
        (0, 4096),
        (4096, 4096),
        (h.lanes_off, h.chunk_table_off - h.lanes_off),
        (h.chunk_table_off, h.heap_off - h.chunk_table_off),
        (t.run, 4096),
        (0, img.len() as u64),
    ];
    let mut truncate = None;
    if flags & 8 != 0 && rest.len() >= 4 {
        truncate =
            Some(u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize % (img.len() + 1));
        rest = &rest[4..];
    }
    while rest.len() >= 4 {
        let (start, size) = regions[rest[0] as usize % regions.len()];
        let off = (start + u16::from_le_bytes([rest[1], rest[2]]) as u64 % size) as usize;
        let len = (rest[3] as usize).min(rest.len() - 4).min(img.len() - off);
        img[off..off + len].copy_from_slice(&rest[4..4 + len]);
        rest = &rest[4 + len..];
    }
    if flags & 2 != 0 {
        let mut hdr: Header = bytemuck::pod_read_unaligned(&img[..HEADER_BYTES]);
        hdr.checksum = hdr.compute_checksum();
        img[..HEADER_BYTES].copy_from_slice(bytemuck::bytes_of(&hdr));
    }
    if flags & 4 != 0 {
        let slots = h.lane_count as u64 * h.slots_per_lane as u64;
        for s in 0..slots {
            let o = (h.lanes_off + s * h.slot_size as u64) as usize;
            let mut lh: LogHeader = bytemuck::pod_read_unaligned(&img[o..o + LOG_HEADER_SIZE]);
            if lh.magic != LOG_MAGIC {
                continue;
            }
            let plen = (lh.payload_len as usize).min(h.slot_size as usize - LOG_HEADER_SIZE);
            let payload = &img[o + LOG_HEADER_SIZE..o + LOG_HEADER_SIZE + plen];
            lh.checksum = daisy::internals::record_checksum(&lh, payload);
            img[o..o + LOG_HEADER_SIZE].copy_from_slice(bytemuck::bytes_of(&lh));
        }
    }
    if let Some(n) = truncate {
        img.truncate(n);
    }
    img
}

fn exercise(path: &Path, img: &[u8]) {
    let pool = match Pool::open_with(path, None, ModeChoice::Auto) {
        Ok(p) => p,
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&path.display().to_string()),
                "open error does not name the file: {msg}"
            );
            // Read failures are the environment's, not the library's.
            if let Ok(now) = std::fs::read(path) {
                assert!(now == img, "refused open changed the file: {msg}");
            }
            return;
        }
    };
    let _ = pool.check(None);
    let _ = pool.info();
    let objs = pool.objects();
    if let Ok(root) = pool.root::<[u64; 8]>() {
        let _ = pool.transaction(|tx| tx.read(root).map(|_| ()));
    }
    let small = pool.transaction(|tx| {
        let p = tx.alloc(&[0xa5u8; 64])?;
        tx.write(p, &[0x5au8; 64])?;
        Ok::<_, Error>(p)
    });
    if let Ok(p) = small {
        let _ = pool.transaction(|tx| tx.free(p));
    }
    if let Ok(objs) = &objs {
        for o in objs.iter().take(4) {
            let _ = pool.transaction(|tx| tx.free(PPtr::<u8>::from_offset(o.off)));
        }
    }
    for _ in 0..8 {
        let _ = pool.transaction(|tx| tx.alloc(&[1u64; 8]));
    }
    if let Ok(p) = pool.transaction(|tx| tx.alloc_zeroed_bytes(600 << 10)) {
        let _ = pool.transaction(|tx| tx.free(p));
    }
    let _ = pool.check(None);
}

fuzz_target!(|data: &[u8]| {
    let t = templates();
    let img = image(t, data);
    if std::fs::write(&t.path, &img).is_err() {
        return;
    }
    exercise(&t.path, &img);
    let _ = std::fs::remove_file(&t.path);
});
