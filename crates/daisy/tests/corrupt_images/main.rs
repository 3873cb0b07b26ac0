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
//!
//! One test binary (`cargo test -p daisy --test corrupt_images`), in modules:
//!
//! - `templates`: the two template pools (clean, and crashed with records to replay).
//! - `mutations`: the kinds of damage, and what opening each must do.
//! - `records`: damage to the redo log: edited and forged checksummed records.
//! - `exercise`: opening one image and exercising the pool.
//!
//! The byte helpers and the test itself (which runs the cases) live here.

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

mod exercise;
mod mutations;
mod records;
mod templates;

use exercise::{exercise, Outcome};
use mutations::{mutate, KINDS};
use templates::{build_templates, test_dir};

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
// Running the cases

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
