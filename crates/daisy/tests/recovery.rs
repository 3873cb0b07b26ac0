//! Recovery after a crash: what it reads and replays is bounded by a constant, whatever the log
//! geometry and the size of the transactions before the crash; and what it does not read is
//! still validated by `pool check`.

use daisy::{Pool, PoolOptions};

const MIB: u64 = 1 << 20;

fn tmp_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

/// Transactions like a server's group commits (each writes one word on each of `lines`
/// distinct cache lines of a 16 MiB object), `n` of them, then a crash (nothing retired at
/// close), then the open's recovery report.
fn crash_after_big_transactions(slots: u32, lines: u64, n: u64) -> daisy::RecoveryReport {
    let d = tmp_dir();
    let path = d.path().join("big.pool");
    {
        let pool = Pool::create(
            &path,
            &PoolOptions::new("rec")
                .size(160 * MIB)
                .lanes(2)
                .log_slot_size(1 << 20)
                .log_slots_per_lane(slots),
        )
        .unwrap();
        let root = pool.root::<u64>().unwrap();
        let big = pool
            .transaction(|tx| {
                let b = tx.alloc_zeroed_bytes(16 * MIB)?;
                tx.write(root, &b.offset())?;
                Ok::<_, daisy::Error>(b.offset())
            })
            .unwrap();
        pool.drain().unwrap();
        for t in 0..n {
            pool.transaction(|tx| {
                for l in 0..lines {
                    // Spread over the object, a different line each time.
                    let line = (l * 7919 + t * 104_729) % (16 * MIB / 64);
                    tx.write_bytes(big + line * 64, &(t + 1).to_le_bytes())?;
                }
                Ok::<_, daisy::Error>(())
            })
            .unwrap();
        }
        pool.crash_for_test();
    }
    let pool = Pool::open(&path, "rec").unwrap();
    assert!(pool.check(None).ok(), "{:?}", pool.check(None).problems);
    pool.recovery_report().clone()
}

/// 40 transactions of 2,000 lines each: recovery replays the two newest records (their
/// lines), as many with 32 log slots per lane (whose deferral would let 30 commits wait) as
/// with 8, and reads only a few records' payloads.
#[test]
fn a_crash_under_big_transactions_leaves_little_to_replay() {
    let lines = 2000;
    for slots in [8, 32] {
        let r = crash_after_big_transactions(slots, lines, 40);
        eprintln!("{slots} slots per lane: {r:?}");
        assert!(r.records_replayed >= 1, "{r:?}");
        assert!(r.records_replayed <= 2, "{slots} slots: {r:?}");
        assert!(r.replayed_lines <= 2 * lines + 1024, "{slots} slots: {r:?}");
        // Headers of every slot, plus a few records of about 16 bytes per line written.
        let headers = 2 * slots as u64 * 32;
        assert!(r.log_bytes_read <= headers + 4 * 16 * lines + 4096, "{r:?}");
    }
}

/// Small transactions (a few lines each) keep the full deferral: records replayed are bounded
/// by the log slots, and their lines are few.
#[test]
fn a_crash_under_small_transactions_replays_few_lines() {
    let r = crash_after_big_transactions(32, 3, 200);
    eprintln!("{r:?}");
    assert!(r.replayed_lines <= 1024, "{r:?}");
}

/// After a clean close every record is retired: open reads the slot headers and the lane's
/// newest record (whose claim tells what is retired), and damage
/// in an old record's payload is not seen by open (nothing of it would be used) but is
/// reported by `pool check`, which validates every slot.
#[test]
fn pool_check_reports_damage_in_a_record_recovery_did_not_read() {
    let d = tmp_dir();
    let path = d.path().join("old.pool");
    {
        let pool = Pool::create(
            &path,
            &PoolOptions::new("rec")
                .size(8 * MIB)
                .lanes(1)
                .log_slots_per_lane(8),
        )
        .unwrap();
        let root = pool.root::<[u64; 8]>().unwrap();
        for v in 0..20u64 {
            pool.transaction(|tx| tx.write(root, &[v; 8])).unwrap();
        }
        pool.close().unwrap();
    }
    let pool = Pool::open(&path, "rec").unwrap();
    let r = pool.recovery_report().clone();
    assert_eq!(r.records_valid, 1, "{r:?}");
    assert_eq!(r.records_retired, 7, "{r:?}");
    assert!(r.log_bytes_read <= 8 * 32 + 128, "{r:?}");
    drop(pool);
    // Damage a payload byte of the record in slot 3 (lanes start at 8192, 16 KiB slots).
    let mut bytes = std::fs::read(&path).unwrap();
    let off = 8192 + 3 * 16 * 1024 + 40;
    bytes[off] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let pool = Pool::open(&path, "rec").unwrap();
    let root = pool.root::<[u64; 8]>().unwrap();
    assert_eq!(pool.read(root), [19; 8]);
    let c = pool.check(None);
    assert!(
        c.problems
            .iter()
            .any(|p| p.contains("log lane 0 slot 3") && p.contains("checksum")),
        "{:?}",
        c.problems
    );
}

/// `open_or_create` creates only when there is no file: a pool is opened with its data, and a
/// file of another program or a pool of another layout is refused, never overwritten.
#[test]
fn open_or_create_creates_only_a_missing_pool() {
    let d = tmp_dir();
    let path = d.path().join("oc.pool");
    let opts = PoolOptions::new("oc").size(8 * MIB);
    {
        let pool = Pool::open_or_create(&path, &opts).unwrap();
        let root = pool.root::<u64>().unwrap();
        pool.transaction(|tx| tx.write(root, &7)).unwrap();
    }
    let pool = Pool::open_or_create(&path, &opts).unwrap();
    assert_eq!(pool.read(pool.root::<u64>().unwrap()), 7);
    drop(pool);
    let other = Pool::open_or_create(&path, &PoolOptions::new("other").size(8 * MIB));
    assert!(
        matches!(other, Err(daisy::Error::WrongLayout { .. })),
        "{other:?}"
    );
    let text = d.path().join("notes.txt");
    std::fs::write(&text, b"not a pool").unwrap();
    let r = Pool::open_or_create(&text, &opts);
    assert!(
        matches!(r, Err(daisy::Error::NotAPool { .. })),
        "{:?}",
        r.err()
    );
    assert_eq!(std::fs::read(&text).unwrap(), b"not a pool");
}
