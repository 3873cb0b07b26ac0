//! Transactions larger than a log slot: their redo record continues in an overflow extent
//! taken from the pool at commit (docs/FORMAT.md section 2.3, "Overflow records"). They commit
//! with the same contract as any other (all or nothing, one commit point), recovery replays
//! them from the extent, a torn one is dropped, and a pool without room says how much it has.

use daisy::internals::{Header, LogHeader, OverflowDesc, LOG_HEADER_SIZE, LOG_OVERFLOW_MAGIC};
use daisy::{Error, PPtr, Pool, PoolOptions};
use std::os::unix::fs::FileExt;

const MIB: u64 = 1 << 20;

fn tmp_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

/// The byte a transaction numbered `gen` writes at offset `i` of the big object.
fn pattern(gen: u64, i: u64) -> u8 {
    (gen.wrapping_mul(131) ^ (i / 8).wrapping_mul(0x9E37_79B9) ^ (i >> 17)) as u8
}

/// A pool whose root names one zeroed object of `len` bytes; returns its offset.
fn pool_with_object(pool: &Pool, len: u64) -> u64 {
    let root = pool.root::<u64>().unwrap();
    pool.transaction(|tx| {
        let b = tx.alloc_zeroed_bytes(len)?;
        tx.write(root, &b.offset())?;
        Ok::<_, Error>(b.offset())
    })
    .unwrap()
}

/// Rewrite the whole object (logged: it is not new) with generation `gen`, in 1 MiB writes.
fn rewrite(tx: &mut daisy::Tx, obj: u64, len: u64, gen: u64) -> daisy::Result<()> {
    let piece = MIB.min(len);
    let mut buf = vec![0u8; piece as usize];
    for at in (0..len).step_by(piece as usize) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = pattern(gen, at + i as u64);
        }
        tx.write_bytes(obj + at, &buf)?;
    }
    Ok(())
}

fn assert_generation(pool: &Pool, obj: u64, len: u64, gen: u64) {
    let mut buf = vec![0u8; len as usize];
    pool.read_bytes(obj, &mut buf);
    if let Some(i) = (0..len).find(|&i| buf[i as usize] != pattern(gen, i)) {
        panic!("byte {i} of the object is not generation {gen}'s");
    }
}

/// Where the pool file's overflow records are: (slot offset, descriptor, seq), newest first.
fn overflow_records(path: &std::path::Path) -> Vec<(u64, OverflowDesc, u64)> {
    let f = std::fs::File::open(path).unwrap();
    let mut hb = vec![0u8; std::mem::size_of::<Header>()];
    f.read_exact_at(&mut hb, 0).unwrap();
    let h: Header = daisy::bytemuck::pod_read_unaligned(&hb);
    let mut out = Vec::new();
    for lane in 0..h.lane_count as u64 {
        for slot in 0..h.slots_per_lane as u64 {
            let off = h.lanes_off + (lane * h.slots_per_lane as u64 + slot) * h.slot_size as u64;
            let mut b = [0u8; 64];
            f.read_exact_at(&mut b, off).unwrap();
            let lh: LogHeader = daisy::bytemuck::pod_read_unaligned(&b[..LOG_HEADER_SIZE]);
            if lh.magic == LOG_OVERFLOW_MAGIC {
                let d: OverflowDesc = daisy::bytemuck::pod_read_unaligned(&b[LOG_HEADER_SIZE..]);
                out.push((off, d, lh.seq));
            }
        }
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.2));
    out
}

/// The target: 64 MiB of changes in one transaction, on a pool created with the
/// defaults (16 KiB log slots), commits; it is there after a close and after a crash right
/// after its commit point (replayed from its overflow extent); the extent is given back.
#[test]
fn a_64_mib_transaction_commits_on_a_default_pool_and_survives_a_crash() {
    let d = tmp_dir();
    let path = d.path().join("big.pool");
    let len = 64 * MIB;
    let obj;
    {
        let pool = Pool::create(&path, &PoolOptions::new("big")).unwrap();
        obj = pool_with_object(&pool, len);
        pool.transaction(|tx| rewrite(tx, obj, len, 1)).unwrap();
        assert_generation(&pool, obj, len, 1);
        let (used_before, _) = pool.usage().unwrap();
        pool.transaction(|tx| rewrite(tx, obj, len, 2)).unwrap();
        pool.drain().unwrap();
        let (used_after, _) = pool.usage().unwrap();
        assert_eq!(
            used_before, used_after,
            "the overflow extent is not an object"
        );
        assert!(pool.check(None).ok(), "{:?}", pool.check(None).problems);
        pool.close().unwrap();
    }
    {
        let pool = Pool::open(&path, "big").unwrap();
        assert_generation(&pool, obj, len, 2);
        // The next commit stops at its commit point: nothing applied in place.
        pool.fail_next_apply_for_test();
        pool.transaction(|tx| rewrite(tx, obj, len, 3)).unwrap();
        assert!(!overflow_records(&path).is_empty());
    }
    let pool = Pool::open(&path, "big").unwrap();
    let rep = pool.recovery_report().clone();
    assert!(rep.records_replayed >= 1, "{rep:?}");
    assert!(
        rep.log_bytes_read >= len,
        "the payload was read from its extent: {rep:?}"
    );
    assert_generation(&pool, obj, len, 3);
    assert!(pool.check(None).ok(), "{:?}", pool.check(None).problems);
}

/// A user's scenario: a list of 1,000 nodes, then one transaction that pushes 1,000 more and
/// renumbers every old one (logged writes into committed objects, the new nodes' allocation
/// bits and the links: more than one 16 KiB log slot holds).
#[test]
fn a_thousand_node_push_in_one_transaction() {
    #[repr(C)]
    #[derive(Clone, Copy, daisy::Pod, daisy::Zeroable)]
    #[bytemuck(crate = "daisy::bytemuck")]
    struct Node {
        value: u64,
        next: PPtr<Node>,
    }
    let d = tmp_dir();
    let path = d.path().join("list.pool");
    let pool = Pool::create(&path, &PoolOptions::new("list")).unwrap();
    let root = pool.root::<PPtr<Node>>().unwrap();
    let push = |tx: &mut daisy::Tx, v: u64| -> daisy::Result<()> {
        let head = tx.read(root)?;
        let n = tx.alloc(&Node {
            value: v,
            next: head,
        })?;
        tx.write(root, &n)
    };
    pool.transaction(|tx| (0..1000).try_for_each(|v| push(tx, v)))
        .unwrap();
    pool.transaction(|tx| {
        let mut p = tx.read(root)?;
        while !p.is_null() {
            let mut n = tx.read(p)?;
            n.value += 1_000_000;
            tx.write(p, &n)?;
            p = n.next;
        }
        (1000..2000).try_for_each(|v| push(tx, v))
    })
    .unwrap();
    assert!(
        !overflow_records(&path).is_empty(),
        "the record outgrew its slot"
    );
    drop(pool);
    let pool = Pool::open(&path, "list").unwrap();
    let mut p = pool.read(root);
    let mut seen = Vec::new();
    while !p.is_null() {
        let n = pool.read(p);
        seen.push(n.value);
        p = n.next;
    }
    let want: Vec<u64> = (1000..2000)
        .rev()
        .chain((0..1000).rev().map(|v| v + 1_000_000))
        .collect();
    assert_eq!(seen, want);
    assert!(pool.check(None).ok(), "{:?}", pool.check(None).problems);
}

/// A big transaction that returns an error leaves nothing: not its writes, not its extent.
#[test]
fn an_aborted_big_transaction_leaves_nothing() {
    let d = tmp_dir();
    let path = d.path().join("abort.pool");
    let pool = Pool::create(&path, &PoolOptions::new("abort").size(64 * MIB)).unwrap();
    let len = 4 * MIB;
    let obj = pool_with_object(&pool, len);
    pool.transaction(|tx| rewrite(tx, obj, len, 1)).unwrap();
    let usage = pool.usage().unwrap();
    let r: Result<(), Error> = pool.transaction(|tx| {
        rewrite(tx, obj, len, 2)?;
        Err(Error::Unsupported("the caller changed its mind".into()))
    });
    assert!(r.is_err());
    assert_generation(&pool, obj, len, 1);
    assert_eq!(pool.usage().unwrap(), usage);
    // The lane goes on with small and big transactions.
    pool.transaction(|tx| rewrite(tx, obj, len, 3)).unwrap();
    pool.transaction(|tx| tx.write_bytes(obj, &[7u8; 8]))
        .unwrap();
    drop(pool);
    let pool = Pool::open(&path, "abort").unwrap();
    let mut b = [0u8; 8];
    pool.read_bytes(obj, &mut b);
    assert_eq!(b, [7u8; 8]);
    let mut rest = vec![0u8; (len - 8) as usize];
    pool.read_bytes(obj + 8, &mut rest);
    assert!((8..len).all(|i| rest[(i - 8) as usize] == pattern(3, i)));
}

/// A transaction whose log needs more room than the pool has fails with an error naming the
/// pool's free space, changes nothing, and the pool goes on.
#[test]
fn a_transaction_too_large_for_the_pool_names_its_free_space() {
    let d = tmp_dir();
    let path = d.path().join("full.pool");
    let pool = Pool::create(
        &path,
        &PoolOptions::new("full")
            .size(8 * MIB)
            .max_size(8 * MIB)
            .lanes(2),
    )
    .unwrap();
    let len = 256 * 1024;
    let obj = pool_with_object(&pool, len);
    // Every word of the object written 40 times, interleaved so that no entry merges with an
    // earlier one: about 20 MiB of log.
    let r = pool.transaction(|tx| {
        for round in 0..40u64 {
            for w in (0..len).step_by(8) {
                tx.write_bytes(obj + w, &(round * len + w).to_le_bytes())?;
            }
        }
        Ok::<_, Error>(())
    });
    let e = r.unwrap_err();
    assert!(matches!(e, Error::TxTooLargeForPool { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("bytes free") && msg.contains("log slot"),
        "{msg}"
    );
    let mut b = vec![0u8; len as usize];
    pool.read_bytes(obj, &mut b);
    assert!(
        b.iter().all(|&x| x == 0),
        "nothing of the failed transaction is visible"
    );
    pool.transaction(|tx| tx.write_bytes(obj, &[1u8; 64]))
        .unwrap();
    assert!(pool.check(None).ok(), "{:?}", pool.check(None).problems);
}

/// A crash during a big commit's fence may persist the slot's part of the record and not
/// all of its extent: recovery finds the extent does not hold the payload, and since the
/// record is its lane's newest, drops it as torn (the transaction never committed).
#[test]
fn a_torn_overflow_record_is_dropped() {
    let d = tmp_dir();
    let path = d.path().join("torn.pool");
    let len = MIB;
    let obj;
    {
        let pool = Pool::create(&path, &PoolOptions::new("torn").size(64 * MIB)).unwrap();
        obj = pool_with_object(&pool, len);
        pool.transaction(|tx| rewrite(tx, obj, len, 1)).unwrap();
        pool.drain().unwrap();
        pool.fail_next_apply_for_test();
        pool.transaction(|tx| rewrite(tx, obj, len, 2)).unwrap();
    }
    let (_, desc, _) = overflow_records(&path)[0];
    // One line of the payload did not persist.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&[0xEE; 64], desc.off + 4096).unwrap();
    drop(f);
    let pool = Pool::open(&path, "torn").unwrap();
    let rep = pool.recovery_report().clone();
    assert_eq!(rep.records_torn, 1, "{rep:?}");
    assert_eq!(rep.records_replayed, 0, "{rep:?}");
    assert_generation(&pool, obj, len, 1);
    // `pool check` judges the torn record as recovery did: its slot is the lane's next, not
    // damage (it once reported the extent's checksum).
    assert!(pool.check(None).ok(), "{:?}", pool.check(None).problems);
    // The lane writes over the torn record's slot, and the pool goes on.
    pool.transaction(|tx| rewrite(tx, obj, len, 3)).unwrap();
    drop(pool);
    let pool = Pool::open(&path, "torn").unwrap();
    assert_generation(&pool, obj, len, 3);
    assert!(pool.check(None).ok(), "{:?}", pool.check(None).problems);
}

/// An overflow record that recovery must replay but that is not its lane's newest cannot be
/// torn: a damaged extent there is corruption, and the pool is refused unchanged.
#[test]
fn a_damaged_extent_of_an_older_record_refuses_the_pool() {
    let d = tmp_dir();
    let path = d.path().join("damaged.pool");
    let len = MIB;
    {
        let pool =
            Pool::create(&path, &PoolOptions::new("damaged").size(64 * MIB).lanes(1)).unwrap();
        let obj = pool_with_object(&pool, len);
        pool.drain().unwrap();
        pool.transaction(|tx| rewrite(tx, obj, len, 1)).unwrap();
        // A newer record on the same lane; the big one's lines are still deferred, so no
        // claim covers it.
        pool.transaction(|tx| tx.write_bytes(obj, &[9u8; 16]))
            .unwrap();
        pool.crash_for_test();
    }
    let (_, desc, _) = overflow_records(&path)[0];
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&[0xEE; 64], desc.off + 8192).unwrap();
    drop(f);
    let before = std::fs::read(&path).unwrap();
    let e = Pool::open(&path, "damaged").unwrap_err();
    assert!(
        e.to_string().contains("overflow") && e.to_string().contains("not the lane's newest"),
        "{e}"
    );
    assert!(
        std::fs::read(&path).unwrap() == before,
        "the refused pool is unchanged"
    );
}
