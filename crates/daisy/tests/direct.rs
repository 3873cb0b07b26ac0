//! Direct stores: `Tx::add_range` declares bytes that the program then stores into through
//! `Pool::direct` (PMDK's `pmemobj_tx_add_range`). They commit with the transaction, an abort
//! puts the old bytes back at once, and a crash before the commit point leaves them undone
//! after recovery (the undo records of docs/FORMAT.md section 2.5), in pmem and msync mode.
#![expect(
    unsafe_code,
    reason = "direct stores through `Pool::direct` are raw pointer writes: what these tests test"
)]

use daisy::{Error, PPtr, Pool, PoolOptions};
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;

fn tmp_pool(name: &str) -> (tempfile::TempDir, PathBuf) {
    let base = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let p = base.path().join(name);
    (base, p)
}

fn opts() -> PoolOptions {
    PoolOptions::new("direct")
        .size(8 * MIB)
        .max_size(64 * MIB)
        .lanes(4)
}

/// Store `bytes` at pool offset `off` directly (as a C program does through `daisy_direct`).
fn store(pool: &Pool, off: u64, bytes: &[u8]) {
    let p = pool.direct(off, bytes.len() as u64).unwrap();
    // SAFETY: `direct` checked that `bytes.len()` bytes at `p` lie in the mapped heap; the
    // test's transaction declared them, and nothing else uses them.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) }
}

fn read(pool: &Pool, off: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    pool.read_bytes(off, &mut b);
    b
}

/// The state page's undo table word (0: no undo table), read from the file.
fn undo_word(path: &Path) -> u64 {
    let b = std::fs::read(path).unwrap();
    u64::from_le_bytes(b[4096 + 32..4096 + 40].try_into().unwrap())
}

/// A pool with an object of `len` bytes holding `fill`, named by the root.
fn pool_with_object(path: &Path, len: u64, fill: u8) -> (Pool, u64) {
    let pool = Pool::create(path, &opts()).unwrap();
    let root = pool.root::<u64>().unwrap();
    let obj = pool
        .transaction(|tx| {
            let o = tx.alloc_bytes(&vec![fill; len as usize])?;
            tx.write(root, &o.offset())?;
            Ok::<_, Error>(o.offset())
        })
        .unwrap();
    // Retired: recovery replays nothing of the creation, so what a test finds after a crash
    // is the undo's doing alone.
    pool.drain().unwrap();
    (pool, obj)
}

#[test]
fn direct_stores_commit_with_the_transaction() {
    let (_d, path) = tmp_pool("commit.pool");
    let (pool, obj) = pool_with_object(&path, 64, 1);
    pool.transaction(|tx| {
        tx.add_range(obj, 16)?;
        store(&pool, obj, &[7; 16]);
        // The transaction reads its own direct stores.
        let mut b = [0u8; 16];
        tx.read_bytes(obj, &mut b)?;
        assert_eq!(b, [7; 16]);
        tx.write_bytes(obj + 32, &[9; 8])
    })
    .unwrap();
    let mut want = vec![1u8; 64];
    want[..16].fill(7);
    want[32..40].fill(9);
    assert_eq!(read(&pool, obj, 64), want);
    drop(pool);
    assert_eq!(undo_word(&path), 0, "a clean close leaves no undo table");
    let pool = Pool::open(&path, "direct").unwrap();
    assert_eq!(read(&pool, obj, 64), want);
}

#[test]
fn an_abort_puts_the_old_bytes_back_at_once() {
    let (_d, path) = tmp_pool("abort.pool");
    let (pool, obj) = pool_with_object(&path, 64, 1);
    let r = pool.transaction(|tx| {
        tx.add_range(obj, 64)?;
        store(&pool, obj, &[5; 64]);
        Err::<(), _>(Error::Aborted("changed my mind".into()))
    });
    assert!(r.is_err());
    assert_eq!(read(&pool, obj, 64), vec![1u8; 64]);
    // A transaction with no change commits nothing and releases its undo the same way.
    pool.transaction(|tx| tx.add_range(obj, 8)).unwrap();
    pool.crash_for_test();
    let pool = Pool::open(&path, "direct").unwrap();
    assert_eq!(read(&pool, obj, 64), vec![1u8; 64]);
}

/// The window PMDK's undo log closes and a redo log alone leaves open: the program's direct
/// stores are in the file (tmpfs keeps every store of a crashed process) but the transaction
/// never committed. Recovery puts the old bytes back, the first declaration's bytes for a
/// range declared twice, and clears the state page's undo table.
#[test]
fn a_crash_before_the_commit_undoes_the_direct_stores() {
    let (_d, path) = tmp_pool("crash.pool");
    let (pool, obj) = pool_with_object(&path, 256, 1);
    let keep = pool.clone();
    let r = pool.transaction(|tx| {
        tx.add_range(obj, 64)?;
        store(&pool, obj, &[2; 64]);
        tx.add_range(obj, 128)?; // again, now holding 2s in its first half
        store(&pool, obj, &[3; 128]);
        tx.write_bytes(obj + 200, &[4; 8])?;
        // The process dies here: nothing is rolled back in memory.
        keep.clone().crash_for_test();
        Err::<(), _>(Error::Aborted("crash".into()))
    });
    assert!(r.is_err());
    assert_eq!(
        read(&pool, obj, 1),
        vec![3],
        "no in-memory rollback after a crash"
    );
    drop(keep);
    drop(pool);
    assert_ne!(undo_word(&path), 0, "the undo table names the extent");
    let pool = Pool::open(&path, "direct").unwrap();
    assert_eq!(read(&pool, obj, 256), vec![1u8; 256]);
    drop(pool);
    assert_eq!(undo_word(&path), 0, "recovery clears the undo table");
    assert!(Pool::open(&path, "direct").unwrap().check(None).ok());
}

/// A crash after the commit point (the record durable, nothing applied, the undo not yet
/// released) keeps the transaction: recovery finds its record and replays it, and undoes
/// nothing.
#[test]
fn a_crash_after_the_commit_point_keeps_the_direct_stores() {
    let (_d, path) = tmp_pool("late.pool");
    let (pool, obj) = pool_with_object(&path, 64, 1);
    pool.fail_next_apply_for_test();
    pool.transaction(|tx| {
        tx.add_range(obj, 64)?;
        store(&pool, obj, &[8; 64]);
        Ok::<_, Error>(())
    })
    .unwrap();
    pool.crash_for_test();
    assert_ne!(undo_word(&path), 0);
    let pool = Pool::open(&path, "direct").unwrap();
    assert!(pool.recovery_report().records_replayed >= 1);
    assert_eq!(read(&pool, obj, 64), vec![8u8; 64]);
}

/// Ranges larger than a chunk and many of them: the undo extent moves to bigger ones; every
/// range comes back after a crash, and committed transactions on the same lane before and
/// after are kept.
#[test]
fn large_and_many_ranges_are_undone() {
    let (_d, path) = tmp_pool("big.pool");
    let len = 600 * 1024;
    let (pool, obj) = pool_with_object(&path, len, 1);
    // A committed one first (its lane's record must not count for the crashed one).
    pool.transaction(|tx| {
        tx.add_range(obj + len - 8, 8)?;
        store(&pool, obj + len - 8, &[6; 8]);
        Ok::<_, Error>(())
    })
    .unwrap();
    let keep = pool.clone();
    let _ = pool.transaction(|tx| {
        for i in 0..50u64 {
            tx.add_range(obj + i * 100, 50)?;
            store(&pool, obj + i * 100, &[9; 50]);
        }
        tx.add_range(obj, len)?;
        store(&pool, obj, &vec![7; len as usize]);
        keep.clone().crash_for_test();
        Err::<(), _>(Error::Aborted("crash".into()))
    });
    drop(keep);
    drop(pool);
    let pool = Pool::open(&path, "direct").unwrap();
    let mut want = vec![1u8; len as usize];
    want[len as usize - 8..].fill(6);
    assert!(read(&pool, obj, len as usize) == want);
}

/// Bytes of an object the transaction allocated need no undo (the object does not exist
/// after a crash) but are made durable with the commit like its other writes.
#[test]
fn ranges_of_new_objects_commit() {
    let (_d, path) = tmp_pool("fresh.pool");
    let pool = Pool::create(&path, &opts()).unwrap();
    let root = pool.root::<u64>().unwrap();
    let obj = pool
        .transaction(|tx| {
            let o = tx.alloc_zeroed_bytes(4096)?.offset();
            tx.add_range(o, 4096)?;
            store(&pool, o, &[5; 4096]);
            tx.write(root, &o)?;
            Ok::<_, Error>(o)
        })
        .unwrap();
    pool.crash_for_test();
    let pool = Pool::open(&path, "direct").unwrap();
    assert_eq!(read(&pool, obj, 4096), vec![5u8; 4096]);
    assert_eq!(
        pool.read(PPtr::<u64>::from_offset(
            pool.root::<u64>().unwrap().offset()
        )),
        obj
    );
}

/// Several threads, each with its own transaction and undo: one commits, one aborts, one is
/// caught by the crash; after recovery only the committed stores remain.
#[test]
fn concurrent_transactions_keep_their_own_undo() {
    let (_d, path) = tmp_pool("threads.pool");
    let (pool, obj) = pool_with_object(&path, 3 * 64, 1);
    let (committed, aborted, open) = (obj, obj + 64, obj + 128);
    let (in_open, go_crash) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    std::thread::scope(|s| {
        let p = &pool;
        let (in_open, go_crash) = (&in_open, &go_crash);
        s.spawn(move || {
            let _ = p.transaction(|tx| {
                tx.add_range(open, 64)?;
                store(p, open, &[4; 64]);
                in_open.wait();
                go_crash.wait();
                Err::<(), _>(Error::Aborted("crash".into()))
            });
        });
        in_open.wait();
        p.transaction(|tx| {
            tx.add_range(committed, 64)?;
            store(p, committed, &[2; 64]);
            Ok::<_, Error>(())
        })
        .unwrap();
        let _ = p.transaction(|tx| {
            tx.add_range(aborted, 64)?;
            store(p, aborted, &[3; 64]);
            Err::<(), _>(Error::Aborted("no".into()))
        });
        p.clone().crash_for_test();
        go_crash.wait();
    });
    drop(pool);
    let pool = Pool::open(&path, "direct").unwrap();
    assert_eq!(read(&pool, committed, 64), vec![2u8; 64]);
    assert_eq!(read(&pool, aborted, 64), vec![1u8; 64]);
    assert_eq!(read(&pool, open, 64), vec![1u8; 64]);
}

#[test]
fn ranges_outside_the_heap_are_refused() {
    let (_d, path) = tmp_pool("bad.pool");
    let (pool, _) = pool_with_object(&path, 64, 1);
    let r = pool.transaction(|tx| tx.add_range(8, 8));
    assert!(matches!(r, Err(Error::InvalidPointer { .. })), "{r:?}");
    let r = pool.transaction(|tx| tx.add_range(u64::MAX - 4, 8));
    assert!(matches!(r, Err(Error::InvalidPointer { .. })), "{r:?}");
}
