//! Persistent block stores (`PBlockStore`): behaviour, limits, claims and freeing, crashes,
//! many threads at once (no torn block is ever read), damage, and property tests against a
//! `HashMap` model.
//!
//! One test binary (`cargo test -p daisy --test blocks`). Seeds are printed by the tests that
//! draw them; assertion messages name the step.

use daisy::{Error, MapCheck, PBlockStore, PPtr, Pool, PoolOptions};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const LAYOUT: &str = "test.blocks";

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("daisy-blocks-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

fn new_pool(dir: &tempfile::TempDir, name: &str) -> Pool {
    Pool::create(
        dir.path().join(name),
        &PoolOptions::new(LAYOUT).size(16 << 20).max_size(1 << 30),
    )
    .unwrap()
}

/// A store of `nblocks` blocks of `bs` bytes with `spare` spare blocks, linked from the root,
/// in format version 2 (the tests that depend on the version say so; the default, version 1,
/// runs in `format_1_stores_keep_working` and with `create_fmt`).
fn create(pool: &Pool, bs: u32, nblocks: u64, spare: u32) -> PPtr<PBlockStore> {
    create_fmt(pool, bs, nblocks, spare, PBlockStore::FORMAT)
}

fn create_fmt(pool: &Pool, bs: u32, nblocks: u64, spare: u32, format: u32) -> PPtr<PBlockStore> {
    let root = pool.root::<PPtr<PBlockStore>>().unwrap();
    pool.transaction(|tx| {
        let id = PBlockStore::create_in_format(tx, bs, nblocks, spare, format)?;
        tx.write(root, &id)?;
        Ok::<_, Error>(id)
    })
    .unwrap()
}

fn assert_ok(c: &MapCheck) {
    assert!(
        c.problems.is_empty(),
        "block store check found: {:?}",
        c.problems
    );
    assert_eq!(c.kind, "block store");
}

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// A self-describing block: LBA, version and writer in the first 24 bytes, a checksum of the
/// rest in the last 8, the middle filled from the version (so a mix of two versions shows).
fn block(bs: usize, lba: u64, version: u64, writer: u64) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    b[0..8].copy_from_slice(&lba.to_le_bytes());
    b[8..16].copy_from_slice(&version.to_le_bytes());
    b[16..24].copy_from_slice(&writer.to_le_bytes());
    let mut x = version.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ lba ^ (writer << 32) | 1;
    for chunk in b[24..bs - 8].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let n = chunk.len();
        chunk.copy_from_slice(&x.to_le_bytes()[..n]);
    }
    let sum = fnv(&b[..bs - 8]);
    b[bs - 8..].copy_from_slice(&sum.to_le_bytes());
    b
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// (lba, version, writer) of a block that is whole, or why it is not.
fn parse(b: &[u8]) -> Result<(u64, u64, u64), String> {
    let bs = b.len();
    if b.iter().all(|&x| x == 0) {
        return Ok((u64::MAX, 0, 0));
    }
    let sum = u64::from_le_bytes(b[bs - 8..].try_into().unwrap());
    if sum != fnv(&b[..bs - 8]) {
        return Err("checksum mismatch (a torn or mixed block)".into());
    }
    let w = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    Ok((w(0), w(8), w(16)))
}

#[test]
fn fresh_blocks_read_as_zeros_and_writes_read_back() {
    let dir = tmp();
    let pool = new_pool(&dir, "b.pool");
    let id = create(&pool, 512, 100, 4);
    let s = PBlockStore::open(&pool, id).unwrap();
    assert_eq!((s.block_size(), s.len(), s.spare()), (512, 100, 4));
    assert_eq!(s.id(), id);
    let mut buf = vec![0xffu8; 512];
    s.read(99, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0), "a fresh block reads as zeros");
    for round in 0..5u64 {
        for lba in 0..100 {
            s.write(lba, &block(512, lba, round, 0)).unwrap();
        }
        for lba in 0..100 {
            s.read(lba, &mut buf).unwrap();
            assert_eq!(buf, block(512, lba, round, 0), "round {round} lba {lba}");
        }
    }
    let c = s.check();
    assert_ok(&c);
    assert_eq!((c.entries, c.segments), (100, 104));
    // Zeroing: reads as zeros, counts as no data, and the next write replaces it.
    s.set_zero(7).unwrap();
    s.set_zero(7).unwrap();
    s.read(7, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    assert_eq!(s.check().entries, 99);
    s.write(7, &block(512, 7, 9, 0)).unwrap();
    s.read(7, &mut buf).unwrap();
    assert_eq!(buf, block(512, 7, 9, 0));
    assert_ok(&s.check());
}

#[test]
fn prefault_maps_every_page_and_changes_nothing() {
    let dir = tmp();
    let pool = new_pool(&dir, "b.pool");
    let id = create(&pool, 4096, 64, 4);
    let s = PBlockStore::open(&pool, id).unwrap();
    for lba in (0..64).step_by(3) {
        s.write(lba, &block(4096, lba, 1, 0)).unwrap();
    }
    // 68 physical blocks of one page each (68 or 69 pages: the data area starts on a 64-byte
    // boundary, not a page's) and a map of 512 bytes (1 or 2 pages).
    let pages = s.prefault();
    assert!((69..=71).contains(&pages), "{pages} pages touched");
    let mut buf = vec![0u8; 4096];
    for lba in 0..64 {
        s.read(lba, &mut buf).unwrap();
        if lba % 3 == 0 {
            assert_eq!(buf, block(4096, lba, 1, 0), "lba {lba} after prefault");
        } else {
            assert!(buf.iter().all(|&b| b == 0), "lba {lba} still zeros");
        }
    }
    assert_ok(&s.check());
}

#[test]
fn bad_arguments_are_errors() {
    let dir = tmp();
    let pool = new_pool(&dir, "a.pool");
    let id = create(&pool, 256, 10, 2);
    let s = PBlockStore::open(&pool, id).unwrap();
    let mut small = vec![0u8; 255];
    assert!(matches!(s.read(0, &mut small), Err(Error::Unsupported(_))));
    assert!(matches!(s.write(0, &[0; 512]), Err(Error::Unsupported(_))));
    let mut buf = vec![0u8; 256];
    assert!(matches!(
        s.read(10, &mut buf),
        Err(Error::IndexOutOfRange { len: 10, .. })
    ));
    assert!(matches!(
        s.write(u64::MAX, &buf),
        Err(Error::IndexOutOfRange { .. })
    ));
    assert!(matches!(s.set_zero(10), Err(Error::IndexOutOfRange { .. })));
    // Geometry limits: refused inside the transaction, which then aborts.
    for (bs, n, spare, what) in [
        (0u32, 10u64, 1u32, "block size"),
        (100, 10, 1, "block size"),
        (2 << 20, 10, 1, "block size"),
        (512, 0, 1, "blocks"),
        (512, (1 << 40) + 1, 1, "blocks"),
        (512, 10, 0, "spare"),
        (512, 10, 5000, "spare"),
    ] {
        let e = pool
            .transaction(|tx| PBlockStore::create_in_with(tx, bs, n, spare))
            .unwrap_err();
        assert!(
            matches!(&e, Error::Unsupported(m) if m.contains(what)),
            "{bs} {n} {spare}: {e}"
        );
    }
    // A store larger than the pool may grow: an error, nothing allocated.
    let before = pool.objects().unwrap().len();
    assert!(pool
        .transaction(|tx| PBlockStore::create_in(tx, 1 << 20, 4096))
        .is_err());
    assert_eq!(pool.objects().unwrap().len(), before);
    // Not a block store.
    let root = pool.root::<PPtr<PBlockStore>>().unwrap();
    let e = PBlockStore::open(&pool, PPtr::from_offset(root.offset())).unwrap_err();
    assert!(matches!(e, Error::NotACollection { .. }), "{e}");
}

#[test]
fn one_handle_at_a_time_and_freeing() {
    let dir = tmp();
    let pool = new_pool(&dir, "f.pool");
    let id = create(&pool, 4096, 300, 8);
    let s = PBlockStore::open(&pool, id).unwrap();
    s.write(3, &block(4096, 3, 1, 0)).unwrap();
    assert!(matches!(
        PBlockStore::open(&pool, id),
        Err(Error::CollectionInUse { .. })
    ));
    let e = pool
        .transaction(|tx| PBlockStore::free_in(&pool, tx, id))
        .unwrap_err();
    assert!(matches!(e, Error::CollectionInUse { .. }), "{e}");
    // Opening inside a transaction is refused (a later commit could write the map).
    let e = pool
        .transaction(|_tx| PBlockStore::open(&pool, id).map(|_| ()))
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e}");
    drop(s);
    let objects = daisy::block_store_objects(&pool, id.offset()).unwrap();
    assert_eq!(objects.len(), 3);
    let root = pool.root::<PPtr<PBlockStore>>().unwrap();
    pool.transaction(|tx| {
        PBlockStore::free_in(&pool, tx, id)?;
        tx.write(root, &PPtr::null())
    })
    .unwrap();
    let left: Vec<u64> = pool.objects().unwrap().iter().map(|o| o.off).collect();
    for o in objects {
        assert!(!left.contains(&o), "object {o:#x} still allocated");
    }
    assert!(pool.check(None).ok());
}

/// Writes survive a close and a crash (the handle dropped as a crash would). The small
/// store's creation was logged: recovery after the crash must not replay it over the map.
#[test]
fn writes_survive_close_and_crash() {
    for (bs, n, format) in [
        (64u32, 8u64, 2u32),
        (512, 40, 2),
        (4096, 2000, 2),
        (64, 8, 1),
        (512, 40, 1),
    ] {
        let dir = tmp();
        let path = dir.path().join("c.pool");
        let pool = new_pool(&dir, "c.pool");
        let id = create_fmt(&pool, bs, n, 3, format);
        let s = PBlockStore::open(&pool, id).unwrap();
        let mut last = HashMap::new();
        let mut rng = xorshift(n);
        for v in 1..=3 * n {
            let lba = rng() % n;
            s.write(lba, &block(bs as usize, lba, v, 0)).unwrap();
            last.insert(lba, v);
        }
        drop(s);
        pool.crash_for_test();
        let pool = Pool::open(&path, LAYOUT).unwrap();
        let s = PBlockStore::open(&pool, id).unwrap();
        assert_ok(&s.check());
        let mut buf = vec![0u8; bs as usize];
        for lba in 0..n {
            s.read(lba, &mut buf).unwrap();
            match last.get(&lba) {
                Some(&v) => assert_eq!(buf, block(bs as usize, lba, v, 0), "bs {bs} lba {lba}"),
                None => assert!(buf.iter().all(|&b| b == 0), "bs {bs} lba {lba}"),
            }
        }
        // More writes after the recovery, then a clean close.
        for lba in 0..n.min(10) {
            s.write(lba, &block(bs as usize, lba, 1000, 0)).unwrap();
        }
        drop(s);
        pool.close().unwrap();
        let pool = Pool::open(&path, LAYOUT).unwrap();
        let r = PBlockStore::reader(&pool, id).unwrap();
        for lba in 0..n.min(10) {
            r.read(lba, &mut buf).unwrap();
            assert_eq!(buf, block(bs as usize, lba, 1000, 0));
        }
        assert_ok(&daisy::check_all(&pool).unwrap()[0]);
    }
}

/// Eight writers and four readers at once on 64 blocks, with fewer spare blocks than
/// writers and every LBA written by two writers: no read ever returns a torn or mixed block,
/// each block ends as one of its writers' last versions, and the store checks sound.
#[test]
fn many_threads_never_see_a_torn_block() {
    for (spare, format) in [(1u32, 2u32), (3, 2), (64, 2), (3, 1), (64, 1)] {
        let dir = tmp();
        let pool = new_pool(&dir, "t.pool");
        let (bs, n) = (1024usize, 64u64);
        let id = create_fmt(&pool, bs as u32, n, spare, format);
        let s = PBlockStore::open(&pool, id).unwrap();
        let stop = AtomicBool::new(false);
        let reads = AtomicU64::new(0);
        let lasts: Vec<HashMap<u64, u64>> = std::thread::scope(|sc| {
            for r in 0..4u64 {
                let (s, stop, reads) = (&s, &stop, &reads);
                sc.spawn(move || {
                    let mut rng = xorshift(77 + r);
                    let mut buf = vec![0u8; bs];
                    while !stop.load(Ordering::Relaxed) {
                        let lba = rng() % n;
                        s.read(lba, &mut buf).unwrap();
                        let (l, _, _) = parse(&buf).unwrap_or_else(|e| panic!("lba {lba}: {e}"));
                        assert!(l == lba || l == u64::MAX, "lba {lba} holds block {l}");
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            let writers: Vec<_> = (0..8u64)
                .map(|w| {
                    let s = &s;
                    sc.spawn(move || {
                        // Writer w writes the LBAs congruent to w and w + 4 modulo 8: each LBA
                        // has two writers.
                        let mut rng = xorshift(1000 + w);
                        let mut last = HashMap::new();
                        for v in 1..=1500u64 {
                            let lba = (rng() % (n / 8)) * 8 + (w % 4) + 4 * (rng() % 2);
                            s.write(lba, &block(bs, lba, v, w)).unwrap();
                            last.insert(lba, v);
                        }
                        last
                    })
                })
                .collect();
            let lasts = writers.into_iter().map(|h| h.join().unwrap()).collect();
            stop.store(true, Ordering::Relaxed);
            lasts
        });
        assert!(reads.load(Ordering::Relaxed) > 0);
        let mut buf = vec![0u8; bs];
        for lba in 0..n {
            s.read(lba, &mut buf).unwrap();
            let (l, v, w) = parse(&buf).unwrap();
            if l == u64::MAX {
                assert!(
                    lasts.iter().all(|m| !m.contains_key(&lba)),
                    "lba {lba} lost"
                );
                continue;
            }
            assert_eq!(l, lba);
            assert_eq!(
                lasts[w as usize].get(&lba),
                Some(&v),
                "spare {spare}: lba {lba} holds writer {w}'s version {v}, not its last"
            );
        }
        assert_ok(&s.check());
        drop(s);
        // The free blocks found at open are exactly the spares.
        let s = PBlockStore::open(&pool, id).unwrap();
        assert_eq!(s.spare(), spare);
    }
}

fn damage(pool: &Pool, at: u64, bytes: &[u8]) {
    pool.transaction(|tx| tx.write_bytes(at, bytes)).unwrap();
}

/// The map's offset (header bytes 32..40).
fn map_of(pool: &Pool, id: PPtr<PBlockStore>) -> u64 {
    pool.read(PPtr::<u64>::from_offset(id.offset() + 32))
}

/// Damaged map words: the checker names the damage, open refuses the store, reads of the
/// damaged LBA return errors; nothing panics.
#[test]
fn damaged_maps_are_reported() {
    let nphys = 16u64 + 4;
    for (what, word, expect) in [
        ("duplicate", 5u64, "which another LBA names too"),
        ("beyond", nphys + 3, "beyond the"),
        ("flags", 1 << 50, "unknown flag bits"),
    ] {
        let dir = tmp();
        let pool = new_pool(&dir, "d.pool");
        let id = create(&pool, 128, 16, 4);
        {
            let s = PBlockStore::open(&pool, id).unwrap();
            for lba in 0..16 {
                s.write(lba, &block(128, lba, 1, 0)).unwrap();
            }
        }
        let map = map_of(&pool, id);
        let w5: u64 = pool.read(PPtr::<u64>::from_offset(map + 8 * 5));
        let word = if what == "duplicate" { w5 } else { word };
        damage(&pool, map + 8 * 9, &word.to_le_bytes());
        let all = daisy::check_all(&pool).unwrap();
        let c = all.iter().find(|c| c.header == id.offset()).expect("found");
        assert!(
            c.problems.iter().any(|p| p.contains(expect)),
            "{what}: {:?}",
            c.problems
        );
        let e = PBlockStore::open(&pool, id).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }), "{what}: {e}");
        let r = PBlockStore::reader(&pool, id).unwrap();
        let mut buf = vec![0u8; 128];
        r.read(4, &mut buf).unwrap();
        if what != "duplicate" {
            assert!(
                matches!(r.read(9, &mut buf), Err(Error::Corrupt { .. })),
                "{what}"
            );
        }
    }
}

/// A damaged header: refused at open with a clear error, skipped by `check_all`'s finder
/// when its checksum fails.
#[test]
fn damaged_headers_are_refused() {
    for (what, at, bytes) in [
        ("magic", 0u64, &b"DAISYBLX"[..]),
        ("format", 8, &[3, 0, 0, 0][..]),
        ("block size", 12, &[0, 3, 0, 0][..]),
        ("checksum", 48, &[1, 2, 3, 4][..]),
    ] {
        let dir = tmp();
        let pool = new_pool(&dir, "h.pool");
        let id = create(&pool, 128, 16, 4);
        damage(&pool, id.offset() + at, bytes);
        let e = PBlockStore::open(&pool, id).unwrap_err();
        assert!(matches!(e, Error::NotACollection { .. }), "{what}: {e}");
        assert!(PBlockStore::reader(&pool, id).is_err(), "{what}");
        assert!(daisy::block_store_objects(&pool, id.offset()).is_err());
    }
}

/// Random bytes flipped in the header and the map (seeded, printed): open, reads, writes and
/// the checker return, none panics.
#[test]
fn random_damage_never_panics() {
    let seed = 0xb10c_u64;
    eprintln!("seed {seed}");
    let mut rng = xorshift(seed);
    for round in 0..60 {
        let dir = tmp();
        let pool = new_pool(&dir, "r.pool");
        let id = create(&pool, 64, 32, 2);
        {
            let s = PBlockStore::open(&pool, id).unwrap();
            for lba in 0..32 {
                s.write(lba, &block(64, lba, 1, 0)).unwrap();
            }
        }
        let map = map_of(&pool, id);
        for _ in 0..(1 + rng() % 3) {
            let at = if rng().is_multiple_of(3) {
                id.offset() + rng() % 64
            } else {
                map + rng() % (32 * 8)
            };
            damage(&pool, at, &[rng() as u8]);
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = daisy::check_all(&pool);
            if let Ok(s) = PBlockStore::open(&pool, id) {
                assert_ok(&s.check());
                let mut buf = vec![0u8; 64];
                for lba in 0..32 {
                    let _ = s.read(lba, &mut buf);
                    let _ = s.write(lba, &block(64, lba, 2, 0));
                }
            }
        }));
        assert!(r.is_ok(), "round {round} panicked");
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Write(u64, u64),
        Zero(u64),
        Read(u64),
        Reopen,
        Crash,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..40u64, any::<u64>()).prop_map(|(l, v)| Op::Write(l, v)),
            1 => (0..40u64).prop_map(Op::Zero),
            3 => (0..40u64).prop_map(Op::Read),
            1 => Just(Op::Reopen),
            1 => Just(Op::Crash),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Random writes, zeroings, reads, reopenings and crashes against a model: every
        /// read returns the model's block, the store checks sound after each step.
        #[test]
        fn store_matches_model(ops in proptest::collection::vec(op(), 1..80), spare in 1u32..5) {
            let dir = tmp();
            let path = dir.path().join("p.pool");
            let mut pool = new_pool(&dir, "p.pool");
            let id = create(&pool, 192, 40, spare);
            let mut s = Some(PBlockStore::open(&pool, id).unwrap());
            let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
            let mut buf = vec![0u8; 192];
            for (i, op) in ops.iter().enumerate() {
                let st = s.as_ref().unwrap();
                match *op {
                    Op::Write(l, v) => {
                        let b = block(192, l, v, 0);
                        st.write(l, &b).unwrap();
                        model.insert(l, b);
                    }
                    Op::Zero(l) => {
                        st.set_zero(l).unwrap();
                        model.remove(&l);
                    }
                    Op::Read(l) => {
                        st.read(l, &mut buf).unwrap();
                        let want = model.get(&l).cloned().unwrap_or_else(|| vec![0; 192]);
                        prop_assert_eq!(&buf, &want, "step {} read {}", i, l);
                    }
                    Op::Reopen | Op::Crash => {
                        drop(s.take());
                        if matches!(op, Op::Crash) {
                            pool.crash_for_test();
                        } else {
                            pool.close().unwrap();
                        }
                        pool = Pool::open(&path, LAYOUT).unwrap();
                        s = Some(PBlockStore::open(&pool, id).unwrap());
                    }
                }
                let c = s.as_ref().unwrap().check();
                prop_assert!(c.problems.is_empty(), "step {}: {:?}", i, c.problems);
                prop_assert_eq!(c.entries, model.len() as u64);
            }
            let st = s.as_ref().unwrap();
            for l in 0..40 {
                st.read(l, &mut buf).unwrap();
                let want = model.get(&l).cloned().unwrap_or_else(|| vec![0; 192]);
                prop_assert_eq!(&buf, &want, "final read {}", l);
            }
        }
    }
}

/// Format 1 stores (two fences per write, no records) are still read and written, by their
/// own protocol, and stay version 1: across writes, a crash and a reopening.
#[test]
fn format_1_stores_keep_working() {
    let dir = tmp();
    let path = dir.path().join("v1.pool");
    let pool = new_pool(&dir, "v1.pool");
    let root = pool.root::<PPtr<PBlockStore>>().unwrap();
    let id = pool
        .transaction(|tx| {
            let id = PBlockStore::create_in_format(tx, 256, 32, 3, PBlockStore::FORMAT_V1)?;
            tx.write(root, &id)?;
            Ok::<_, Error>(id)
        })
        .unwrap();
    let s = PBlockStore::open(&pool, id).unwrap();
    for v in 1..=100u64 {
        s.write(v % 32, &block(256, v % 32, v, 0)).unwrap();
    }
    s.set_zero(7).unwrap();
    drop(s);
    pool.crash_for_test();
    let pool = Pool::open(&path, LAYOUT).unwrap();
    let format: u32 = pool.read(PPtr::<u32>::from_offset(id.offset() + 8));
    assert_eq!(format, 1, "a format 1 store stays format 1");
    let s = PBlockStore::open(&pool, id).unwrap();
    assert_ok(&s.check());
    let mut buf = vec![0u8; 256];
    for lba in 0..32u64 {
        s.read(lba, &mut buf).unwrap();
        if lba == 7 {
            assert!(buf.iter().all(|&b| b == 0));
        } else {
            let v = (68..=100).rev().find(|v| v % 32 == lba).unwrap();
            assert_eq!(buf, block(256, lba, v, 0), "lba {lba}");
        }
    }
    // create_in picks the version by block size.
    for (bs, want) in [(512u32, 2u32), (1024, 1)] {
        let id = pool
            .transaction(|tx| PBlockStore::create_in_with(tx, bs, 4, 1))
            .unwrap();
        let format: u32 = pool.read(PPtr::<u32>::from_offset(id.offset() + 8));
        assert_eq!(format, want, "block size {bs}");
    }
    // Another version number is refused at creation.
    let e = pool
        .transaction(|tx| PBlockStore::create_in_format(tx, 256, 4, 1, 3).map(|_| ()))
        .unwrap_err();
    assert!(e.to_string().contains("format version 3"), "{e}");
}

/// A format 2 store's geometry, from its header, for tests that write torn states by hand.
struct Geo2 {
    bs: u64,
    nblocks: u64,
    nphys: u64,
    map: u64,
    base: u64,
}

impl Geo2 {
    fn of(pool: &Pool, id: PPtr<PBlockStore>) -> Geo2 {
        let r = |at: u64| pool.read(PPtr::<u64>::from_offset(id.offset() + at));
        let bs = r(8) >> 32;
        let nblocks = r(16);
        let spare = r(24) & 0xffff_ffff;
        Geo2 {
            bs,
            nblocks,
            nphys: nblocks + spare,
            map: r(32),
            base: r(40).next_multiple_of(64),
        }
    }
    fn word(&self, pool: &Pool, lba: u64) -> u64 {
        pool.read(PPtr::<u64>::from_offset(self.map + 8 * lba))
    }
    fn rec_off(&self, p: u64) -> u64 {
        self.base + self.nphys * self.bs + 32 * p
    }
    /// (lba, seq, kind) of block p's record.
    fn record(&self, pool: &Pool, p: u64) -> (u64, u64, u32) {
        let r = |at: u64| pool.read(PPtr::<u64>::from_offset(self.rec_off(p) + at));
        (r(0), r(8), r(16) as u32)
    }
    /// The blocks no map word names.
    fn free(&self, pool: &Pool) -> Vec<u64> {
        let named: Vec<u64> = (0..self.nblocks)
            .map(|l| self.word(pool, l) & ((1 << 48) - 1))
            .collect();
        (0..self.nphys).filter(|p| !named.contains(p)).collect()
    }
    /// Block p's record as a write writes it: crc32c over `data` (kind 1) then the record.
    fn put_record(&self, pool: &Pool, p: u64, lba: u64, seq: u64, kind: u32, data: &[u8]) {
        let mut r = [0u8; 32];
        r[0..8].copy_from_slice(&lba.to_le_bytes());
        r[8..16].copy_from_slice(&seq.to_le_bytes());
        r[16..20].copy_from_slice(&kind.to_le_bytes());
        let d = if kind == 1 { crc32c::crc32c(data) } else { 0 };
        let crc = crc32c::crc32c_append(d, &r[..28]);
        r[28..32].copy_from_slice(&crc.to_le_bytes());
        damage(pool, self.rec_off(p), &r);
    }
}

/// The store [`interrupted_writes_are_settled_at_open`] starts from: 8 LBAs of 128 B written
/// once (LBA 5 twice more, then zeroed), then four interrupted writes made by hand in the
/// four free blocks. Returns the pool, the store, its geometry, the words recovery must store
/// (LBA -> word: LBA 3 back to its old block, LBA 4 to its whole new one, LBA 5 back to its
/// old block reading as zeros), and what each LBA must read after recovery.
#[allow(clippy::type_complexity)]
fn interrupted_state(
    dir: &tempfile::TempDir,
    name: &str,
) -> (Pool, PPtr<PBlockStore>, Geo2, Vec<(u64, u64)>, Vec<Vec<u8>>) {
    let pool = new_pool(dir, name);
    let (bs, n) = (128usize, 8u64);
    let id = create(&pool, bs as u32, n, 4);
    let s = PBlockStore::open(&pool, id).unwrap();
    for lba in 0..n {
        s.write(lba, &block(bs, lba, 1, 0)).unwrap();
    }
    s.write(5, &block(bs, 5, 2, 0)).unwrap();
    s.set_zero(5).unwrap();
    drop(s);
    let g = Geo2::of(&pool, id);
    assert_eq!(g.bs, bs as u64);
    let seq_of = |lba: u64| g.record(&pool, g.word(&pool, lba) & ((1 << 48) - 1)).1;
    assert_eq!(seq_of(3), 1);
    assert_eq!(seq_of(5), 3, "write, write, zeroing");
    let free = g.free(&pool);
    assert_eq!(free.len(), 4);
    let plan = vec![(3, g.word(&pool, 3)), (4, free[1]), (5, g.word(&pool, 5))];
    // LBA 3: the word switched to free[0], whose record is whole but whose data is not.
    let d3 = block(bs, 3, 9, 0);
    damage(&pool, g.base + free[0] * g.bs, &block(bs, 3, 8, 0));
    g.put_record(&pool, free[0], 3, 2, 1, &d3);
    damage(&pool, g.map + 8 * 3, &free[0].to_le_bytes());
    // LBA 4: free[1] holds a whole version 2, its word still names version 1.
    let d4 = block(bs, 4, 9, 0);
    damage(&pool, g.base + free[1] * g.bs, &d4);
    g.put_record(&pool, free[1], 4, 2, 1, &d4);
    // LBA 5 (zeros): switched to free[2] without the zero flag, record torn.
    damage(&pool, g.map + 8 * 5, &free[2].to_le_bytes());
    damage(&pool, g.rec_off(free[2]) + 28, &[0xde, 0xad, 0xbe, 0xef]);
    // LBA 6: free[3] holds a whole but older version (0) of it.
    let d6 = block(bs, 6, 0, 0);
    damage(&pool, g.base + free[3] * g.bs, &d6);
    g.put_record(&pool, free[3], 6, 0, 1, &d6);
    let expect = (0..n)
        .map(|lba| match lba {
            4 => d4.clone(),
            5 => vec![0; bs],
            _ => block(bs, lba, 1, 0),
        })
        .collect();
    (pool, id, g, plan, expect)
}

/// Format 2 recovery, each state a crash can leave written by hand (the power-failure
/// simulator's `blocks` workload reaches them by itself): a switched map word naming a torn
/// block goes back to the old block (zeros stay zeros), a whole new block whose word did not
/// switch is taken, an older whole version in a free block is ignored; `reader` shows what
/// `open` settles, and the checker finds a damaged named block no free block can replace.
#[test]
fn interrupted_writes_are_settled_at_open() {
    let dir = tmp();
    let (pool, id, g, _, expected) = interrupted_state(&dir, "r.pool");
    let (bs, n) = (g.bs as usize, expected.len() as u64);
    let seq_of = |lba: u64| g.record(&pool, g.word(&pool, lba) & ((1 << 48) - 1)).1;
    let expect = |lba: u64| expected[lba as usize].clone();
    let mut buf = vec![0u8; bs];
    // Before any open: the reader and the checker see what open will settle.
    let r = PBlockStore::reader(&pool, id).unwrap();
    for lba in 0..n {
        r.read(lba, &mut buf).unwrap();
        assert_eq!(buf, expect(lba), "reader, lba {lba}");
    }
    assert_ok(&daisy::check_all(&pool).unwrap()[0]);
    let s = PBlockStore::open(&pool, id).unwrap();
    for lba in 0..n {
        s.read(lba, &mut buf).unwrap();
        assert_eq!(buf, expect(lba), "open, lba {lba}");
    }
    assert_ok(&s.check());
    assert_eq!(seq_of(4), 2);
    assert_ne!(
        g.word(&pool, 5) & (1 << 63),
        0,
        "LBA 5 reads as zeros again"
    );
    // Writes go on from the settled versions.
    s.write(3, &block(bs, 3, 10, 0)).unwrap();
    assert_eq!(seq_of(3), 2);
    s.write(5, &block(bs, 5, 10, 0)).unwrap();
    assert_eq!(seq_of(5), 4);
    drop(s);
    // A named block damaged with no free block to replace it: the checker says so.
    let p = g.word(&pool, 2) & ((1 << 48) - 1);
    damage(&pool, g.base + p * g.bs + 40, &[1, 2, 3]);
    let c = daisy::check_all(&pool).unwrap().remove(0);
    assert!(
        c.problems
            .iter()
            .any(|m| m.contains("LBA 2") && m.contains("checksum mismatch")),
        "{:?}",
        c.problems
    );
}

/// A crash inside open's recovery (format 2) leaves any subset of its word stores durable:
/// each of the 8 subsets of the three words stored by hand, then an open, must settle the rest
/// (the replaced blocks are torn or older, so they never win back) and read what a whole
/// recovery gives.
#[test]
fn recovery_interrupted_midway_settles_the_rest() {
    let dir = tmp();
    for subset in 0u32..8 {
        let name = format!("m{subset}.pool");
        let (pool, id, g, plan, expected) = interrupted_state(&dir, &name);
        for (i, &(lba, w)) in plan.iter().enumerate() {
            if subset & (1 << i) != 0 {
                damage(&pool, g.map + 8 * lba, &w.to_le_bytes());
            }
        }
        let s = PBlockStore::open(&pool, id).unwrap();
        let mut buf = vec![0u8; g.bs as usize];
        for (lba, want) in expected.iter().enumerate() {
            s.read(lba as u64, &mut buf).unwrap();
            assert_eq!(&buf, want, "subset {subset:03b}, lba {lba}");
        }
        for &(lba, w) in &plan {
            assert_eq!(
                g.word(&pool, lba),
                w,
                "subset {subset:03b}, lba {lba}: the word recovery stores"
            );
        }
        assert_ok(&s.check());
        drop(s);
        assert_ok(&daisy::check_all(&pool).unwrap()[0]);
    }
}
