//! Library integration tests: pools, transactions, allocator, recovery, bad input.

use bytemuck::{Pod, Zeroable};
use daisy::{Error, PPtr, Pool, PoolOptions};
use std::path::PathBuf;

#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct Root {
    counter: u64,
    head: PPtr<Node>,
    slots: [u64; 16],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable, PartialEq)]
struct Node {
    value: u64,
    next: PPtr<Node>,
}

const MIB: u64 = 1 << 20;

fn tmp_pool(name: &str) -> (tempfile::TempDir, PathBuf) {
    // tmpfs when available, as users run it; any directory works (msync mode elsewhere).
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let p = base.path().join(name);
    (base, p)
}

fn small(layout: &str) -> PoolOptions {
    PoolOptions::new(layout)
        .size(8 * MIB)
        .max_size(64 * MIB)
        .lanes(8)
}

fn list_values(pool: &Pool, root: PPtr<Root>) -> Vec<u64> {
    let mut out = vec![];
    let mut p = pool.read(root).head;
    while !p.is_null() {
        let n = pool.read(p);
        out.push(n.value);
        p = n.next;
    }
    out
}

fn push(pool: &Pool, root: PPtr<Root>, v: u64) {
    pool.transaction(|tx| {
        let r = tx.read(root)?;
        let n = tx.alloc(&Node {
            value: v,
            next: r.head,
        })?;
        tx.update(root, |r| {
            r.head = n;
            r.counter += 1;
        })
    })
    .unwrap();
}

#[test]
fn create_write_reopen() {
    let (_d, path) = tmp_pool("a.pool");
    {
        let pool = Pool::create(&path, &small("test")).unwrap();
        let root = pool.root::<Root>().unwrap();
        for v in 0..100 {
            push(&pool, root, v);
        }
        pool.close().unwrap();
    }
    let pool = Pool::open(&path, "test").unwrap();
    let root = pool.root::<Root>().unwrap();
    assert_eq!(pool.read(root).counter, 100);
    assert_eq!(list_values(&pool, root), (0..100).rev().collect::<Vec<_>>());
    let info = pool.info();
    assert_eq!(info.objects, 101, "100 nodes + root");
    let reach: Vec<u64> = reachable(&pool, root);
    let rep = pool.check(Some(&reach));
    assert!(rep.ok(), "{:?}", rep.problems);
}

fn reachable(pool: &Pool, root: PPtr<Root>) -> Vec<u64> {
    let mut v = vec![root.offset()];
    let mut p = pool.read(root).head;
    while !p.is_null() {
        v.push(p.offset());
        p = pool.read(p).next;
    }
    v
}

#[test]
fn error_in_transaction_rolls_back() {
    let (_d, path) = tmp_pool("b.pool");
    let pool = Pool::create(&path, &small("test")).unwrap();
    let root = pool.root::<Root>().unwrap();
    push(&pool, root, 1);
    let before = pool.info().objects;
    let r: Result<(), Error> = pool.transaction(|tx| {
        let n = tx.alloc(&Node {
            value: 9,
            next: PPtr::null(),
        })?;
        tx.update(root, |r| {
            r.head = n;
            r.counter = 77;
        })?;
        Err(Error::Aborted("user said no".into()))
    });
    assert!(matches!(r, Err(Error::Aborted(_))));
    assert_eq!(pool.read(root).counter, 1);
    assert_eq!(list_values(&pool, root), vec![1]);
    assert_eq!(
        pool.info().objects,
        before,
        "aborted allocation must not leak"
    );
}

#[test]
fn panic_in_transaction_rolls_back() {
    let (_d, path) = tmp_pool("c.pool");
    let pool = Pool::create(&path, &small("test")).unwrap();
    let root = pool.root::<Root>().unwrap();
    push(&pool, root, 1);
    let p2 = pool.clone();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = p2.transaction(|tx| {
            tx.update(root, |r| r.counter = 1000)?;
            let _ = tx.alloc(&Node {
                value: 5,
                next: PPtr::null(),
            })?;
            if tx.read(root)?.counter == 1000 {
                panic!("boom");
            }
            Ok::<_, Error>(())
        });
    }));
    assert!(res.is_err());
    assert_eq!(pool.read(root).counter, 1);
    // The lane is usable again.
    push(&pool, root, 2);
    assert_eq!(list_values(&pool, root), vec![2, 1]);
    assert_eq!(pool.info().objects, 3);
}

#[test]
fn read_your_writes_and_free() {
    let (_d, path) = tmp_pool("d.pool");
    let pool = Pool::create(&path, &small("test")).unwrap();
    let root = pool.root::<Root>().unwrap();
    pool.transaction(|tx| {
        tx.update(root, |r| r.slots[3] = 42)?;
        assert_eq!(tx.read(root)?.slots[3], 42);
        // Partial overlap: write one u64 inside the struct, read the whole struct.
        tx.write(root.byte_add::<u64>(16 + 8 * 5), &7)?;
        let r = tx.read(root)?;
        assert_eq!((r.slots[3], r.slots[5]), (42, 7));
        Ok::<_, Error>(())
    })
    .unwrap();
    for v in 0..10 {
        push(&pool, root, v);
    }
    // Pop everything, freeing nodes.
    pool.transaction(|tx| {
        let mut p = tx.read(root)?.head;
        while !p.is_null() {
            let next = tx.read(p)?.next;
            tx.free(p)?;
            p = next;
        }
        tx.update(root, |r| r.head = PPtr::null())
    })
    .unwrap();
    assert_eq!(pool.info().objects, 1);
    // Double free is refused with a clear error.
    let n = pool
        .transaction(|tx| {
            tx.alloc(&Node {
                value: 1,
                next: PPtr::null(),
            })
        })
        .unwrap();
    pool.transaction(|tx| tx.free(n)).unwrap();
    let e = pool.transaction(|tx| tx.free(n)).unwrap_err();
    assert!(matches!(e, Error::InvalidPointer { .. }), "{e}");
    // Alloc and free inside one transaction leaves nothing behind.
    pool.transaction(|tx| {
        let a = tx.alloc(&Node {
            value: 1,
            next: PPtr::null(),
        })?;
        let big = tx.alloc_zeroed_bytes(3 * MIB)?;
        tx.free(a)?;
        tx.free(big)
    })
    .unwrap();
    assert_eq!(pool.info().objects, 1);
}

#[test]
fn committed_but_unapplied_transaction_is_replayed() {
    let (_d, path) = tmp_pool("e.pool");
    let pool = Pool::create(&path, &small("test")).unwrap();
    let root = pool.root::<Root>().unwrap();
    push(&pool, root, 1);
    pool.fail_next_apply_for_test();
    push(&pool, root, 2);
    // In memory the second push was never applied.
    assert_eq!(pool.read(root).counter, 1);
    pool.crash_for_test();
    let pool = Pool::open(&path, "test").unwrap();
    // The unapplied record, and possibly its predecessor (applied, not yet fenced: replaying
    // it again is idempotent).
    assert!(pool.recovery_report().records_replayed >= 1);
    let root = pool.root::<Root>().unwrap();
    assert_eq!(pool.read(root).counter, 2);
    assert_eq!(list_values(&pool, root), vec![2, 1]);
    let reach = reachable(&pool, root);
    let rep = pool.check(Some(&reach));
    assert!(rep.ok(), "{:?}", rep.problems);
}

/// A transaction that writes one aligned word commits in place (no record) once no record
/// is left to replay; before that it is logged. Either way, recovery never replays an older
/// record over the word: here a logged transaction writes it, one-word transactions follow,
/// and after a crash the last value is there.
#[test]
fn one_word_transactions_are_never_undone_by_replay() {
    let (_d, path) = tmp_pool("w.pool");
    let pool = Pool::create(&path, &small("test")).unwrap();
    let root = pool.root::<Root>().unwrap();
    let w0 = PPtr::<u64>::from_offset(root.offset() + 16);
    let w1 = PPtr::<u64>::from_offset(root.offset() + 24);
    for round in 0..3u64 {
        // Two words: logged, and not yet covered by the watermark when it returns.
        pool.transaction(|tx| {
            tx.write(w0, &(round * 100))?;
            tx.write(w1, &round)
        })
        .unwrap();
        for i in 1..=20 {
            pool.transaction(|tx| tx.write(w0, &(round * 100 + i)))
                .unwrap();
            assert_eq!(pool.read(w0), round * 100 + i);
        }
    }
    // And a word written by a thread whose lane is idle is not replayed over either.
    let p2 = pool.clone();
    std::thread::spawn(move || {
        p2.transaction(|tx| {
            tx.write(w0, &7)?;
            tx.write(w1, &7)
        })
        .unwrap()
    })
    .join()
    .unwrap();
    for i in 1..=3 {
        pool.transaction(|tx| tx.write(w0, &(1000 + i))).unwrap();
    }
    pool.crash_for_test();
    let pool = Pool::open(&path, "test").unwrap();
    assert_eq!(
        pool.read(w0),
        1003,
        "an older record was replayed over the word"
    );
    assert_eq!(pool.read(w1), 7);
    let rep = pool.check(None);
    assert!(rep.ok(), "{:?}", rep.problems);
}

/// Lane A commits X=1 and goes idle; lane B later commits X=2 and cycles through its log
/// slots. Recovery must never replay A's old record over B's newer value.
#[test]
fn old_record_of_idle_lane_is_not_replayed_over_newer_data() {
    let (_d, path) = tmp_pool("f.pool");
    let pool = Pool::create(&path, &small("test")).unwrap();
    let root = pool.root::<Root>().unwrap();
    let (tx_a, rx_a) = std::sync::mpsc::channel::<()>();
    let (tx_done, rx_done) = std::sync::mpsc::channel::<()>();
    let pa = pool.clone();
    let a = std::thread::spawn(move || {
        pa.transaction(|tx| tx.update(root, |r| r.slots[0] = 1))
            .unwrap();
        tx_done.send(()).unwrap();
        rx_a.recv().unwrap(); // stay alive (and idle) while B works
    });
    rx_done.recv().unwrap();
    let pb = pool.clone();
    std::thread::spawn(move || {
        pb.transaction(|tx| tx.update(root, |r| r.slots[0] = 2))
            .unwrap();
        for i in 0..20 {
            pb.transaction(|tx| tx.update(root, |r| r.slots[1] = i))
                .unwrap();
        }
    })
    .join()
    .unwrap();
    assert_eq!(pool.read(root).slots[0], 2);
    pool.crash_for_test();
    tx_a.send(()).unwrap();
    a.join().unwrap();
    let pool = Pool::open(&path, "test").unwrap();
    let root = pool.root::<Root>().unwrap();
    assert_eq!(
        pool.read(root).slots[0],
        2,
        "stale record replayed over newer data"
    );
    assert_eq!(pool.read(root).slots[1], 19);
}

#[test]
fn many_threads_commit_concurrently() {
    let (_d, path) = tmp_pool("g.pool");
    let pool = Pool::create(&path, &small("test")).unwrap();
    let root = pool.root::<Root>().unwrap();
    let threads = 4;
    let per = 500u64;
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let p = pool.clone();
            std::thread::spawn(move || {
                let mut mine: Vec<PPtr<Node>> = vec![];
                for i in 0..per {
                    // Each thread owns one slot: update only that field, not the whole root.
                    let slot = root.byte_add::<u64>(16 + 8 * t as u64);
                    p.transaction(|tx| {
                        tx.update(slot, |v| *v += 1)?;
                        let n = tx.alloc(&Node {
                            value: i,
                            next: PPtr::null(),
                        })?;
                        mine.push(n);
                        if mine.len() > 8 {
                            tx.free(mine.remove(0))?;
                        }
                        Ok::<_, Error>(())
                    })
                    .unwrap();
                }
                mine.len() as u64
            })
        })
        .collect();
    let live: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    let r = pool.read(root);
    for t in 0..threads {
        assert_eq!(r.slots[t], per);
    }
    assert_eq!(pool.info().objects, live + 1);
    pool.crash_for_test();
    let pool = Pool::open(&path, "test").unwrap();
    let r = pool.read(pool.root::<Root>().unwrap());
    for t in 0..threads {
        assert_eq!(r.slots[t], per);
    }
    assert_eq!(pool.info().objects, live + 1);
    assert!(pool.check(None).ok());
}

#[test]
fn pool_grows_and_pointers_stay_valid() {
    let (_d, path) = tmp_pool("h.pool");
    let pool = Pool::create(&path, &small("test")).unwrap();
    let size0 = pool.size();
    let root = pool.root::<Root>().unwrap();
    let first = pool
        .transaction(|tx| {
            tx.alloc(&Node {
                value: 7,
                next: PPtr::null(),
            })
        })
        .unwrap();
    let mut bigs = vec![];
    for i in 0..12u64 {
        let b = pool
            .transaction(|tx| {
                let b = tx.alloc_zeroed_bytes(2 * MIB)?;
                tx.write(b.cast::<u64>(), &i)?;
                Ok::<_, Error>(b)
            })
            .unwrap();
        bigs.push(b);
    }
    assert!(pool.size() > size0, "pool did not grow");
    assert_eq!(pool.read(first).value, 7);
    for (i, b) in bigs.iter().enumerate() {
        assert_eq!(pool.read(b.cast::<u64>()), i as u64);
    }
    let _ = root;
    pool.close().unwrap();
    let pool = Pool::open(&path, "test").unwrap();
    assert!(pool.size() > size0);
    for (i, b) in bigs.iter().enumerate() {
        assert_eq!(pool.read(b.cast::<u64>()), i as u64);
    }
}

#[test]
fn full_pool_aborts_cleanly() {
    let (_d, path) = tmp_pool("i.pool");
    let pool = Pool::create(
        &path,
        &PoolOptions::new("test")
            .size(8 * MIB)
            .max_size(8 * MIB)
            .lanes(8),
    )
    .unwrap();
    let root = pool.root::<Root>().unwrap();
    push(&pool, root, 1);
    let objects = pool.info().objects;
    let e = pool
        .transaction(|tx| {
            tx.update(root, |r| r.counter = 999)?;
            tx.alloc_zeroed_bytes(64 * MIB)
        })
        .unwrap_err();
    assert!(matches!(e, Error::PoolFull { .. }), "{e}");
    assert!(e.to_string().contains("i.pool"));
    assert_eq!(pool.read(root).counter, 1);
    assert_eq!(pool.info().objects, objects);
    // Fill with small objects until full: the failing transaction leaves no trace.
    let mut n = 0u64;
    loop {
        match pool.transaction(|tx| {
            let r = tx.read(root)?;
            let node = tx.alloc(&Node {
                value: n,
                next: r.head,
            })?;
            tx.update(root, |r| {
                r.head = node;
                r.counter += 1
            })
        }) {
            Ok(()) => n += 1,
            Err(Error::PoolFull { .. }) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(n < 1_000_000);
    }
    assert_eq!(pool.read(root).counter, n + 1);
    let reach = reachable(&pool, root);
    let rep = pool.check(Some(&reach));
    assert!(rep.ok(), "{:?}", rep.problems);
}

#[test]
fn bad_input_is_refused_and_unchanged() {
    let (d, path) = tmp_pool("j.pool");
    {
        let pool = Pool::create(&path, &small("test")).unwrap();
        let root = pool.root::<Root>().unwrap();
        push(&pool, root, 5);
    }
    let original = std::fs::read(&path).unwrap();
    let check_unchanged = |p: &std::path::Path, expect: &[u8]| {
        assert_eq!(std::fs::read(p).unwrap(), expect, "file changed");
    };
    // Wrong layout.
    let e = Pool::open(&path, "other").err().unwrap();
    assert!(matches!(e, Error::WrongLayout { .. }), "{e}");
    check_unchanged(&path, &original);
    // Already open.
    let held = Pool::open(&path, "test").unwrap();
    let e = Pool::open(&path, "test").err().unwrap();
    assert!(matches!(e, Error::AlreadyOpen { .. }), "{e}");
    drop(held);
    let original = std::fs::read(&path).unwrap();
    // Not a pool.
    let junk = d.path().join("junk");
    std::fs::write(&junk, b"hello, this is not a pool at all").unwrap();
    assert!(matches!(
        Pool::open(&junk, "test"),
        Err(Error::NotAPool { .. })
    ));
    let empty = d.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        Pool::open(&empty, "test"),
        Err(Error::NotAPool { .. })
    ));
    // Truncated.
    let t = d.path().join("trunc");
    std::fs::write(&t, &original[..original.len() / 2]).unwrap();
    let e = Pool::open(&t, "test").err().unwrap();
    assert!(matches!(e, Error::Truncated { .. }), "{e}");
    assert!(e.to_string().contains("trunc"));
    std::fs::write(&t, &original[..100]).unwrap();
    assert!(matches!(
        Pool::open(&t, "test"),
        Err(Error::Truncated { .. })
    ));
    // Corrupt header.
    let c = d.path().join("corrupt");
    let mut bad = original.clone();
    bad[40] ^= 0x55; // inside the layout name
    std::fs::write(&c, &bad).unwrap();
    let e = Pool::open(&c, "test").err().unwrap();
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    check_unchanged(&c, &bad);
    // Other format version.
    let v = d.path().join("version");
    let mut bad = original.clone();
    bad[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&v, &bad).unwrap();
    let e = Pool::open(&v, "test").err().unwrap();
    assert!(
        matches!(e, Error::UnsupportedVersion { found: 99, .. }),
        "{e}"
    );
    // Directory.
    assert!(matches!(
        Pool::open(d.path(), "test"),
        Err(Error::IsADirectory { .. })
    ));
    assert!(matches!(
        Pool::create(d.path(), &small("t")),
        Err(Error::IsADirectory { .. })
    ));
    // Exists.
    assert!(matches!(
        Pool::create(&path, &small("t")),
        Err(Error::AlreadyExists { .. })
    ));
    // Too small / unrepresentable sizes.
    let z = d.path().join("z");
    assert!(matches!(
        Pool::create(&z, &PoolOptions::new("t").size(4096)),
        Err(Error::InvalidOption(_))
    ));
    assert!(matches!(
        Pool::create(&z, &PoolOptions::new("t").size(8 * MIB).max_size(u64::MAX)),
        Err(Error::InvalidOption(_))
    ));
    assert!(!z.exists());
    // Missing directory.
    let e = Pool::create(d.path().join("no/such/dir/p"), &small("t"))
        .err()
        .unwrap();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    // The original still opens and holds its data.
    check_unchanged(&path, &original);
    let pool = Pool::open(&path, "test").unwrap();
    let root = pool.root::<Root>().unwrap();
    assert_eq!(list_values(&pool, root), vec![5]);
    // Root of a different size is refused.
    assert!(matches!(
        pool.root::<u64>(),
        Err(Error::RootTypeMismatch { .. })
    ));
}

#[test]
fn corrupted_log_record_is_refused() {
    let (d, path) = tmp_pool("k.pool");
    let slots = {
        let pool = Pool::create(&path, &small("test")).unwrap();
        let root = pool.root::<Root>().unwrap();
        for v in 0..6 {
            push(&pool, root, v);
        }
        let i = pool.info();
        pool.crash_for_test();
        (i.lanes * i.log_slots_per_lane) as usize
    };
    let bytes = std::fs::read(&path).unwrap();
    // The lane area starts right after the state page (offset 8192). Every slot of every lane
    // is looked at: which lane this thread's transactions use depends on the other tests.
    let lanes_off = 8192usize;
    let slot = 16 * 1024;
    // Flip a payload byte of each record in turn: every record but a lane's newest must be
    // reported as corruption (the newest is indistinguishable from a torn in-flight write).
    let mut damaged = 0;
    for s in 0..slots {
        let off = lanes_off + s * slot;
        if bytes[off + 4..off + 8] == *b"DLOG" {
            let mut bad = bytes.clone();
            bad[off + 40] ^= 0xff;
            let p = d.path().join(format!("bad{s}"));
            std::fs::write(&p, &bad).unwrap();
            match Pool::open(&p, "test") {
                Err(Error::Corrupt { detail, .. }) => {
                    assert!(detail.contains("log"), "{detail}");
                    damaged += 1;
                    assert_eq!(std::fs::read(&p).unwrap(), bad);
                }
                Ok(_) => {} // the newest record: indistinguishable from a torn write
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert!(damaged >= 2, "only {damaged} corruptions detected");
}

/// A transaction with many new objects (past the size where its lookups switch to indexes):
/// writes into older new objects, frees of some of them (cancelled allocations) in between,
/// `usable_size` on unindexed ones, then commit. Every survivor holds what was written last,
/// and nothing leaks.
#[test]
fn many_new_objects_in_one_transaction() {
    let (_d, path) = tmp_pool("many.pool");
    let pool = Pool::create(&path, &small("test")).unwrap();
    let root = pool.root::<Root>().unwrap();
    let before = pool.info().objects;
    let kept = pool
        .transaction(|tx| {
            let mut nodes = Vec::new();
            for v in 0..300u64 {
                let n = tx.alloc(&Node {
                    value: v,
                    next: PPtr::null(),
                })?;
                nodes.push(n);
                if v % 7 == 3 {
                    // Rewrite an older new object: a lookup that misses the newest one.
                    let old = nodes[(v / 2) as usize];
                    let cur = tx.read(old)?;
                    tx.write(
                        old,
                        &Node {
                            value: cur.value + 1000,
                            ..cur
                        },
                    )?;
                }
                if v % 11 == 5 {
                    // Cancel an older allocation (its slot in the list becomes null).
                    let i = (v / 3) as usize;
                    if !nodes[i].is_null() {
                        tx.free(nodes[i])?;
                        nodes[i] = PPtr::null();
                    }
                }
                if v % 50 == 49 {
                    assert!(tx.usable_size(nodes[10])? >= 16 || nodes[10].is_null());
                }
            }
            // Link the survivors into the root's list.
            let mut head = PPtr::null();
            for &n in nodes.iter().rev().filter(|n| !n.is_null()) {
                tx.update(n, |x| x.next = head)?;
                head = n;
            }
            tx.update(root, |r| r.head = head)?;
            Ok::<_, Error>(nodes)
        })
        .unwrap();
    let survivors: Vec<PPtr<Node>> = kept.iter().copied().filter(|n| !n.is_null()).collect();
    assert!(survivors.len() > 250 && survivors.len() < 300);
    assert_eq!(pool.info().objects, before + survivors.len() as u64);
    let values = list_values(&pool, root);
    assert_eq!(values.len(), survivors.len());
    for (n, v) in survivors.iter().zip(&values) {
        assert_eq!(pool.read(*n).value, *v);
        assert!(*v < 300 || (*v >= 1000 && *v < 1300), "value {v}");
    }
    assert!(
        values.iter().any(|&v| v >= 1000),
        "some older objects were rewritten"
    );
    drop(pool);
    let pool = Pool::open(&path, "test").unwrap();
    assert_eq!(list_values(&pool, root), values);
    assert!(pool.check(None).problems.is_empty());
}

/// Read-your-writes in big transactions (hundreds of overlapping writes of every size, past
/// the size where reads go through the per-line index), against a byte-array model: every
/// read inside the transaction and the committed result must match it. Seeded; the seed is
/// printed so a failure replays.
#[test]
fn big_transaction_reads_its_overlapping_writes() {
    use rand::{Rng, SeedableRng};
    let (_d, path) = tmp_pool("ryw.pool");
    let pool = Pool::create(&path, &small("test")).unwrap();
    const AREA: usize = 2048;
    // An object committed before the test transactions, so their writes are logged (not
    // written in place as into new objects).
    let area = pool
        .transaction(|tx| tx.alloc_zeroed_bytes(AREA as u64))
        .unwrap()
        .offset();
    let mut model = vec![0u8; AREA];
    for seed in 0..10u64 {
        println!("seed {seed}");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let writes = [10, 40, 300][seed as usize % 3];
        // Seeds 6 and up write into the first 256 bytes only: many writes cover earlier ones
        // whole (the per-line index unlinks those), and reads see the survivors.
        let span = if seed >= 6 { 256 } else { AREA };
        pool.transaction(|tx| {
            for _ in 0..writes {
                let len = *[1usize, 3, 8, 8, 8, 13, 64, 100]
                    .get(rng.gen_range(0..8))
                    .unwrap();
                let at = rng.gen_range(0..=span - len);
                let data: Vec<u8> = (0..len).map(|_| rng.gen::<u8>()).collect();
                tx.write_bytes(area + at as u64, &data)?;
                model[at..at + len].copy_from_slice(&data);
                // A read of a random range, sometimes spanning several lines.
                let rlen = rng.gen_range(1..=200usize);
                let rat = rng.gen_range(0..=AREA - rlen);
                let mut got = vec![0u8; rlen];
                tx.read_bytes(area + rat as u64, &mut got)?;
                assert_eq!(
                    got,
                    model[rat..rat + rlen],
                    "seed {seed}: read {rat}+{rlen}"
                );
            }
            let mut all = vec![0u8; AREA];
            tx.read_bytes(area, &mut all)?;
            assert_eq!(all, model, "seed {seed}: whole area inside the transaction");
            Ok::<_, Error>(())
        })
        .unwrap();
        let mut committed = vec![0u8; AREA];
        pool.transaction(|tx| tx.read_bytes(area, &mut committed))
            .unwrap();
        assert_eq!(committed, model, "seed {seed}: committed area");
    }
    // Two words of one line written in turn thousands of times (a sequence's length and end
    // window in a group commit), with a byte between them written once at the start: every
    // read of the whole line must still see that byte, and the line's chain stays bounded
    // (a debug assertion in the index).
    pool.transaction(|tx| {
        tx.write_bytes(area + 20, &[0xAB])?;
        model[20] = 0xAB;
        for i in 0..3000u64 {
            let at = if i % 2 == 0 { 0 } else { 32 };
            tx.write_bytes(area + at, &i.to_le_bytes())?;
            model[at as usize..at as usize + 8].copy_from_slice(&i.to_le_bytes());
            let mut line = [0u8; 64];
            tx.read_bytes(area, &mut line)?;
            assert_eq!(line[..], model[..64], "alternating words, write {i}");
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    let mut committed = vec![0u8; AREA];
    pool.transaction(|tx| tx.read_bytes(area, &mut committed))
        .unwrap();
    assert_eq!(committed, model, "alternating words: committed area");
}

/// A transaction started inside another on the same thread takes a lane of its own; when
/// this thread already holds every lane, it is refused with an error instead of waiting for
/// itself forever. The outer transaction is unaffected.
#[test]
fn nested_transactions_never_wait_for_themselves() {
    let (_d, path) = tmp_pool("nested.pool");
    let pool = Pool::create(&path, &PoolOptions::new("test").size(8 << 20).lanes(2)).unwrap();
    let root = pool.root::<[u64; 2]>().unwrap();
    let r = pool.transaction(|outer| {
        outer.write(root.cast::<u64>(), &1)?;
        // A second lane is free: the nested transaction runs (and commits on its own).
        pool.transaction(|inner| inner.write(root.byte_add::<u64>(8), &2))?;
        // Two levels below `outer` need a third lane: the innermost is refused, and `mid`,
        // which passes the error on, rolls back.
        let e = pool
            .transaction(|mid| {
                mid.write(root.byte_add::<u64>(8), &3)?;
                pool.transaction(|inner| inner.write(root.byte_add::<u64>(8), &4))
            })
            .unwrap_err();
        assert!(matches!(e, Error::NestedTransaction { .. }), "{e}");
        assert!(e.to_string().contains("every log lane"), "{e}");
        Ok::<_, Error>(())
    });
    r.unwrap();
    assert_eq!(pool.read(root), [1, 2]);
}

/// Log slots per lane: picked by pool size unless given, range-checked, kept in the header;
/// with any count, committed transactions survive a crash (the deferral of write-backs is
/// `slots - 2` commits, so a small count and a large one both run here).
#[test]
fn log_slots_per_lane_are_chosen_checked_and_kept() {
    let (_d, path) = tmp_pool("slots.pool");
    let p = Pool::create(&path, &PoolOptions::new("t").size(8 * MIB).lanes(8)).unwrap();
    assert_eq!(p.info().log_slots_per_lane, 8, "a small pool keeps 8");
    p.close().unwrap();
    std::fs::remove_file(&path).unwrap();
    let p = Pool::create(&path, &PoolOptions::new("t").size(256 * MIB)).unwrap();
    assert_eq!(p.info().log_slots_per_lane, 32, "a roomy pool gets 32");
    p.close().unwrap();
    std::fs::remove_file(&path).unwrap();
    for bad in [0, 3, 65] {
        let Err(e) = Pool::create(&path, &small("t").log_slots_per_lane(bad)) else {
            panic!("{bad} slots per lane accepted");
        };
        assert!(e.to_string().contains("log slots per lane"), "{e}");
        assert!(!path.exists());
    }
    for slots in [4u32, 13, 32] {
        let _ = std::fs::remove_file(&path);
        let pool = Pool::create(&path, &small("t").log_slots_per_lane(slots)).unwrap();
        let root = pool.root::<[u64; 64]>().unwrap();
        for i in 1..=500u64 {
            pool.transaction(|tx| {
                tx.write(root.cast::<u64>(), &i)?; // a hot word, rewritten every commit
                tx.write(root.byte_add::<u64>(8 * (1 + i % 63)), &i)
            })
            .unwrap();
        }
        pool.crash_for_test();
        let pool = Pool::open(&path, "t").unwrap();
        assert_eq!(pool.info().log_slots_per_lane, slots);
        let v = pool.read(pool.root::<[u64; 64]>().unwrap());
        assert_eq!(v[0], 500, "slots {slots}");
        for (k, &x) in v.iter().enumerate().skip(1) {
            let last = (1..=500u64).rev().find(|i| 1 + i % 63 == k as u64).unwrap();
            assert_eq!(x, last, "slots {slots}, word {k}");
        }
        assert!(pool.check(None).ok());
    }
}

/// Freed memory is reused once the durable watermark passes the freeing transaction, which
/// lags by the lane's deferral; a full pool does not fail while this lane's frees wait: the
/// allocation makes them durable and retries.
#[test]
fn a_full_pool_reuses_memory_freed_just_before() {
    let (_d, path) = tmp_pool("refill.pool");
    let pool = Pool::create(&path, &small("t").size(8 * MIB).max_size(8 * MIB)).unwrap();
    let big = vec![7u8; 300 << 10]; // two chunks, a large object
    let mut objs = Vec::new();
    loop {
        match pool.transaction(|tx| tx.alloc_bytes(&big)) {
            Ok(p) => objs.push(p),
            Err(Error::PoolFull { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(objs.len() >= 4, "{} objects", objs.len());
    for round in 0..20 {
        let victim = objs.pop().unwrap();
        pool.transaction(|tx| tx.free(victim)).unwrap();
        let p = pool
            .transaction(|tx| tx.alloc_bytes(&big))
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        objs.push(p);
    }
    assert!(pool.check(None).ok());
}

/// Format version 3 added the 80 and 112 KiB run classes, version 4 the overflow records of
/// transactions larger than a log slot, version 5 the undo table of direct stores. Pools of
/// versions 2 to 4 (earlier builds') are read, keep their data, and are marked version 5 at
/// open (one atomic store of the version and checksum word), so older builds refuse them once
/// they may hold what those builds would misread; versions 1 and 6 are refused. A 100 KB
/// object now shares a chunk with another one instead of taking a whole 256 KiB chunk.
#[test]
fn version_2_pools_are_upgraded_and_large_values_share_chunks() {
    let (_d, path) = tmp_pool("v2");
    {
        let pool = Pool::create(&path, &small("test")).unwrap();
        let root = pool.root::<Root>().unwrap();
        push(&pool, root, 42);
    }
    // Write the header as the previous build did: version 2, its checksum.
    let header = |bytes: &[u8], version: u32| -> Vec<u8> {
        let mut b = bytes.to_vec();
        b[8..12].copy_from_slice(&version.to_le_bytes());
        b[12..16].fill(0);
        let len = std::mem::size_of::<daisy::internals::Header>();
        let crc = crc32c::crc32c(&b[..len]);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        b
    };
    let v3 = std::fs::read(&path).unwrap();
    assert_eq!(v3[8..12], 5u32.to_le_bytes());
    for refused in [1u32, 6] {
        let p = path.with_extension(format!("v{refused}"));
        std::fs::write(&p, header(&v3, refused)).unwrap();
        let e = Pool::open(&p, "test").err().unwrap();
        assert!(
            matches!(e, Error::UnsupportedVersion { found, .. } if found == refused),
            "{e}"
        );
        assert!(e.to_string().contains("versions 2 to 5"), "{e}");
    }
    // Versions 3 and 4 upgrade the same way.
    for old in [3u32, 4] {
        let p = path.with_extension(format!("v{old}"));
        std::fs::write(&p, header(&v3, old)).unwrap();
        assert_eq!(Pool::open(&p, "test").unwrap().info().format_version, 5);
        assert_eq!(std::fs::read(&p).unwrap()[8..12], 5u32.to_le_bytes());
    }
    std::fs::write(&path, header(&v3, 2)).unwrap();
    {
        let pool = Pool::open(&path, "test").unwrap();
        assert_eq!(pool.info().format_version, 5);
        let root = pool.root::<Root>().unwrap();
        assert_eq!(list_values(&pool, root), vec![42]);
        // Two 100 KB objects land in one 112 KiB-class run (one chunk), not two chunks.
        let (a, b) = pool
            .transaction(|tx| {
                let a = tx.alloc_zeroed_bytes(100_000)?;
                let b = tx.alloc_zeroed_bytes(100_000)?;
                Ok::<_, Error>((a, b))
            })
            .unwrap();
        let gap = a.offset().abs_diff(b.offset());
        assert!(
            gap < daisy::internals::CHUNK_SIZE,
            "100 KB objects {gap} bytes apart"
        );
    }
    // On the file: version 5 with a valid checksum (it opens again).
    let after = std::fs::read(&path).unwrap();
    assert_eq!(after[8..12], 5u32.to_le_bytes());
    assert_eq!(after[..16], header(&after, 5)[..16]);
    let pool = Pool::open(&path, "test").unwrap();
    let root = pool.root::<Root>().unwrap();
    assert_eq!(list_values(&pool, root), vec![42]);
}

/// `allocated_bytes` (a scan once, then each commit's balance) agrees with a full scan after
/// every transaction of a seeded mix of small and large allocations and frees, aborts
/// included, and `Tx::allocation_balance` predicts each commit's change.
#[test]
fn allocated_bytes_follows_commits_without_a_scan() {
    let seed = 20261128u64;
    println!("seed {seed}");
    let (_d, path) = tmp_pool("allocated");
    let pool = Pool::create(&path, &small("alloc-count")).unwrap();
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut live: Vec<PPtr<u8>> = Vec::new();
    assert_eq!(pool.allocated_bytes().unwrap(), pool.usage().unwrap().0);
    for round in 0..300 {
        let before = pool.allocated_bytes().unwrap();
        let abort = next() % 7 == 0;
        let mut predicted = 0;
        let r: Result<(), Error> = pool.transaction(|tx| {
            for _ in 0..(next() % 5) {
                // Mostly small blocks, sometimes a large (whole-chunk) object.
                let len = if next() % 10 == 0 {
                    300_000
                } else {
                    1 + next() % 2000
                };
                live.push(tx.alloc_zeroed_bytes(len)?);
            }
            while live.len() > 20 || (!live.is_empty() && next() % 3 == 0) {
                let i = (next() as usize) % live.len();
                tx.free(live.swap_remove(i))?;
            }
            predicted = tx.allocation_balance();
            if abort {
                return Err(Error::InvalidOption("abort".into()));
            }
            Ok(())
        });
        if abort {
            assert!(r.is_err());
            // The aborted transaction's objects never existed.
            let objects = pool.objects().unwrap();
            live.retain(|p| objects.iter().any(|o| o.off == p.offset()));
        } else {
            r.unwrap();
        }
        let (scanned, _) = pool.usage().unwrap();
        let counted = pool.allocated_bytes().unwrap();
        assert_eq!(counted, scanned, "round {round} (seed {seed})");
        if !abort {
            assert_eq!(counted as i64 - before as i64, predicted, "round {round}");
        }
    }
}
