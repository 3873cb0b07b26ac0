//! Online backups (`Pool::begin_backup`, `Backup::finish`): a copy taken while writers run is
//! a valid pool holding exactly the state at the pause.

use daisy::{check_all, Error, PBytesMap, PPtr, Pool, PoolOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

struct Files(Vec<PathBuf>);
impl Drop for Files {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    Path::new(daisy::DEFAULT_DIR).join(format!("daisy-test-backup-{}-{name}", std::process::id()))
}

fn new_map_pool(path: &Path, size: u64) -> (Pool, PPtr<PBytesMap>) {
    let pool = Pool::create(
        path,
        &PoolOptions::new("backup-test").size(size).max_size(1 << 30),
    )
    .unwrap();
    let root = pool.root::<u64>().unwrap();
    let id = pool
        .transaction(|tx| {
            let id = PBytesMap::create_in_with_seed(tx, 7)?;
            tx.write(root, &id.offset())?;
            Ok::<_, Error>(id)
        })
        .unwrap();
    (pool, id)
}

fn contents(pool: &Pool) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let root = pool.root::<u64>().unwrap();
    let id = PPtr::<PBytesMap>::from_offset(pool.read(root));
    let m = PBytesMap::open(pool, id).unwrap();
    m.iter().unwrap().map(|e| e.unwrap()).collect()
}

fn assert_sound(pool: &Pool) {
    let report = pool.check(None);
    assert!(report.ok(), "pool check: {:?}", report.problems);
    for c in check_all(pool).unwrap() {
        assert!(c.problems.is_empty(), "map check: {:?}", c.problems);
    }
}

/// A writer thread inserts, overwrites and removes keys (the pool grows meanwhile) while a
/// backup copies; the test pauses the writer only for `begin_backup` and `finish`, as a server
/// does between its transactions. The copy must open, pass every check, and hold exactly the
/// writer's model at the pause, although the writer went on afterwards.
#[test]
fn a_backup_taken_under_writes_holds_exactly_the_state_at_the_pause() {
    let seed = 20261125u64;
    println!("seed {seed}");
    let (src, dst) = (scratch("src.pool"), scratch("dst.pool"));
    let _files = Files(vec![src.clone(), dst.clone()]);
    let (pool, id) = new_map_pool(&src, 8 << 20);
    let model = Arc::new(Mutex::new(BTreeMap::<Vec<u8>, Vec<u8>>::new()));
    {
        let mut m = PBytesMap::open(&pool, id).unwrap();
        let mut g = model.lock().unwrap();
        for i in 0..20_000u64 {
            let (k, v) = (format!("k{i}").into_bytes(), vec![i as u8; 100]);
            m.insert(&k, &v).unwrap();
            g.insert(k, v);
        }
    }
    // Writers hold the gate shared for each operation; begin and finish take it exclusively.
    let gate = Arc::new(RwLock::new(()));
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let writer = {
        let (pool, gate, stop, ops, model) = (
            pool.clone(),
            gate.clone(),
            stop.clone(),
            ops.clone(),
            model.clone(),
        );
        std::thread::spawn(move || {
            let mut m = PBytesMap::open(&pool, id).unwrap();
            let mut x = seed;
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = format!("k{}", x % 60_000).into_bytes();
                let _g = gate.read().unwrap();
                let mut md = model.lock().unwrap();
                if x.is_multiple_of(5) {
                    m.remove(&k).unwrap();
                    md.remove(&k);
                } else {
                    let v = vec![(x >> 8) as u8; 50 + (x % 300) as usize];
                    m.insert(&k, &v).unwrap();
                    md.insert(k, v);
                }
                ops.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    while ops.load(Ordering::Relaxed) < 2_000 {
        std::thread::yield_now();
    }
    let backup = {
        let _g = gate.write().unwrap();
        pool.begin_backup(&dst).unwrap()
    };
    let ops_at_begin = ops.load(Ordering::Relaxed);
    while !backup.is_ready() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    while ops.load(Ordering::Relaxed) < ops_at_begin + 5_000 {
        std::thread::yield_now();
    }
    let (report, expected) = {
        let _g = gate.write().unwrap();
        let expected = model.lock().unwrap().clone();
        (backup.finish().unwrap(), expected)
    };
    // The writer goes on, so the source moves past the backup.
    let ops_at_finish = ops.load(Ordering::Relaxed);
    while ops.load(Ordering::Relaxed) < ops_at_finish + 2_000 {
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    println!(
        "backup: {} bytes, copied {}, {} live passes, {} pages in a pause of {:?}, {:?} in all; writer ops {} during the copy",
        report.file_size,
        report.copied_bytes,
        report.live_passes,
        report.final_pages,
        report.pause,
        report.elapsed,
        ops_at_finish - ops_at_begin
    );
    assert_eq!(report.path, dst);
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), report.file_size);
    let after = contents(&pool);
    assert_ne!(after, expected, "the source moved on after the pause");
    drop(pool);

    let copy = Pool::open(&dst, "backup-test").unwrap();
    assert_sound(&copy);
    let got = contents(&copy);
    assert_eq!(got.len(), expected.len());
    assert!(
        got == expected,
        "the backup differs from the state at the pause"
    );
    // The source itself is intact.
    let src_pool = Pool::open(&src, "backup-test").unwrap();
    assert_sound(&src_pool);
    assert_eq!(contents(&src_pool), after);
    // No temporary file is left beside the backup.
    let stray: Vec<_> = std::fs::read_dir(daisy::DEFAULT_DIR)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name().to_string_lossy().contains(&format!(
                "daisy-test-backup-{}-dst.pool.backup",
                std::process::id()
            ))
        })
        .collect();
    assert!(stray.is_empty(), "temporary files left: {stray:?}");
}

/// A backup taken with no writer (`backup_to`) of a pool that grew past its initial size.
#[test]
fn backup_to_copies_a_quiet_pool_that_grew() {
    let (src, dst) = (scratch("quiet.pool"), scratch("quiet-copy.pool"));
    let _files = Files(vec![src.clone(), dst.clone()]);
    let (pool, id) = new_map_pool(&src, 8 << 20);
    let mut m = PBytesMap::open(&pool, id).unwrap();
    for i in 0..100_000u32 {
        m.insert(&i.to_le_bytes(), &[i as u8; 100]).unwrap();
    }
    drop(m);
    assert!(pool.size() > 8 << 20, "the pool grew");
    let report = pool.backup_to(&dst).unwrap();
    assert_eq!(report.file_size, std::fs::metadata(&src).unwrap().len());
    let expected = contents(&pool);
    drop(pool);
    let copy = Pool::open(&dst, "backup-test").unwrap();
    assert_sound(&copy);
    assert_eq!(contents(&copy), expected);
}

/// The pause ends at `freeze`: the pool is written again (and grows) before `complete` syncs
/// and renames the copy, on another thread, and the copy holds the state at the freeze
/// exactly, none of the later writes. Dropping a frozen backup leaves no file.
#[test]
fn a_frozen_backup_completes_on_another_thread_while_the_pool_is_written() {
    let (src, dst) = (scratch("frozen.pool"), scratch("frozen-copy.pool"));
    let _files = Files(vec![src.clone(), dst.clone()]);
    let (pool, id) = new_map_pool(&src, 8 << 20);
    let mut m = PBytesMap::open(&pool, id).unwrap();
    for i in 0..20_000u32 {
        m.insert(&i.to_le_bytes(), &[i as u8; 100]).unwrap();
    }
    let b = pool.begin_backup(&dst).unwrap();
    while !b.is_ready() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let frozen = b.freeze().unwrap();
    drop(m);
    let expected = contents(&pool);
    let mut m = PBytesMap::open(&pool, id).unwrap();
    let completing = std::thread::spawn(move || frozen.complete());
    // After the pause: overwrite, remove and add (the pool grows).
    for i in 0..100_000u32 {
        m.insert(&i.to_le_bytes(), &[!(i as u8); 100]).unwrap();
    }
    for i in 0..1000u32 {
        m.remove(&i.to_le_bytes()).unwrap();
    }
    let report = completing.join().unwrap().unwrap();
    assert!(report.completion > std::time::Duration::ZERO);
    assert!(report.elapsed >= report.pause + report.completion);
    drop(m);
    assert_ne!(
        contents(&pool),
        expected,
        "the pool changed after the pause"
    );
    drop(pool);
    let copy = Pool::open(&dst, "backup-test").unwrap();
    assert_sound(&copy);
    assert_eq!(contents(&copy), expected);
    drop(copy);

    // A frozen backup dropped before completing: no temporary file is left, and the last
    // backup stays.
    let pool = Pool::open(&src, "backup-test").unwrap();
    let b = pool.begin_backup(&dst).unwrap();
    drop(b.freeze().unwrap());
    let dir = dst.parent().unwrap();
    let name = dst.file_name().unwrap().to_string_lossy().into_owned();
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!(".{name}.backup-")))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    drop(pool);
    let copy = Pool::open(&dst, "backup-test").unwrap();
    assert_eq!(contents(&copy), expected);
}

/// The destination may not be the pool itself, a directory, or a pool open elsewhere; one
/// backup runs at a time; an abandoned backup leaves no file.
#[test]
fn a_backup_refuses_bad_destinations_and_cleans_up_when_dropped() {
    let (src, other, dst) = (
        scratch("refuse.pool"),
        scratch("refuse-other.pool"),
        scratch("refuse-dst.pool"),
    );
    let _files = Files(vec![src.clone(), other.clone(), dst.clone()]);
    let (pool, _) = new_map_pool(&src, 8 << 20);
    let e = pool.begin_backup(&src).unwrap_err();
    assert!(e.to_string().contains("the pool being backed up"), "{e}");
    let e = pool.begin_backup(daisy::DEFAULT_DIR).unwrap_err();
    assert!(matches!(e, Error::IsADirectory { .. }), "{e}");
    let (open_other, _) = new_map_pool(&other, 8 << 20);
    let e = pool.begin_backup(&other).unwrap_err();
    assert!(e.to_string().contains("open"), "{e}");
    drop(open_other);
    let e = pool.begin_backup("/nonexistent-dir/x.pool").unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");

    let b = pool.begin_backup(&dst).unwrap();
    let e = pool
        .begin_backup(scratch("refuse-second.pool"))
        .unwrap_err();
    assert!(e.to_string().contains("already running"), "{e}");
    assert!(!scratch("refuse-second.pool").exists());
    drop(b);
    assert!(
        !dst.exists(),
        "an abandoned backup leaves nothing at the destination"
    );
    // Tracking stopped: a new backup can start and finish.
    pool.backup_to(&dst).unwrap();
    assert!(dst.exists());
}
