//! Batches: inserts and the prefix an error keeps, a failed internal commit, and a split
//! that fails half-way.

use super::*;

#[test]
fn batch_inserts_and_prefix_on_error() {
    let dir = tmp();
    let pool = new_pool(&dir, "f.pool");
    let id = create_u32(&pool, 5);
    let mut m = U32Map::open(&pool, id).unwrap();
    // Odd keys here, even keys in the failing batch below: the sets are disjoint.
    for i in 0..1000u32 {
        m.insert(2 * i + 1, i).unwrap();
    }
    let mut model: HashMap<u32, u32> = contents(&m);
    m.batch(|b| {
        for i in 0..200_000u32 {
            let k = i.wrapping_mul(0x85EB_CA6B) | 1;
            assert_eq!(b.insert(k, i)?, model.insert(k, i));
            if i % 5 == 0 {
                let r = (i / 2).wrapping_mul(0x85EB_CA6B) | 1;
                assert_eq!(b.remove(&r)?, model.remove(&r));
            }
        }
        let k = 0x85EB_CA6B | 1;
        assert_eq!(b.get(&k)?, model.get(&k).copied());
        assert_eq!(b.len(), model.len() as u64);
        Ok(())
    })
    .unwrap();
    assert_eq!(m.len().unwrap(), model.len() as u64);
    assert_eq!(contents(&m), model);
    assert_ok(&m.check());

    // An error inside a batch keeps a prefix of its operations (here: everything before the
    // last sync, and possibly more, in order).
    let r: daisy::Result<()> = m.batch(|b| {
        for i in 0..50_000u32 {
            b.insert(2 * i, i)?;
            if i == 20_000 {
                b.sync()?;
            }
        }
        Err(Error::Aborted("test".into()))
    });
    assert!(r.is_err());
    let got = contents(&m);
    let kept: Vec<u32> = (0..50_000u32)
        .filter(|i| got.contains_key(&(2 * i)))
        .collect();
    assert!(kept.len() > 20_000, "everything before the sync is kept");
    let gap = kept.iter().enumerate().find(|(i, &k)| *i as u32 != k);
    assert!(
        gap.is_none(),
        "not a prefix: first gap at {gap:?} of {}",
        kept.len()
    );
    assert_eq!(m.len().unwrap(), got.len() as u64);
    assert_eq!(got.len(), model.len() + kept.len());
    assert_ok(&m.check());
}

/// A batch whose internal commit fails stops there: every later call returns an error, and the
/// map holds what the batch committed before (here nothing), never a half-written directory.
#[test]
fn batch_stops_after_a_failed_commit() {
    let dir = tmp();
    let pool = Pool::create(
        dir.path().join("small-log.pool"),
        &PoolOptions::new("test.hashmap")
            .size(8 << 20)
            .max_size(8 << 20)
            .lanes(2)
            .log_slot_size(4096),
    )
    .unwrap();
    let root = pool.root::<[u64; 1024]>().unwrap();
    let id = pool
        .transaction(|tx| {
            let id = U32Map::create_in_with_seed(tx, 8)?;
            tx.write(root.cast::<u64>(), &id.offset())?;
            Ok::<_, Error>(id)
        })
        .unwrap();
    let mut m = U32Map::open(&pool, id).unwrap();
    for k in 0..100 {
        m.insert(k, k).unwrap();
    }
    let before = contents(&m);
    let r = m.batch(|b| {
        for k in 1000..1010 {
            b.insert(k, k)?;
        }
        // The caller's own writes make the batch's redo record larger than the pool could
        // hold (a record that outgrows its slot continues in a free extent at commit).
        for _ in 0..1200 {
            b.tx()?.write_bytes(root.offset(), &[1u8; 8192])?;
        }
        // The commit fails, and the batch is over.
        let e = b.sync().unwrap_err();
        assert!(matches!(e, Error::TxTooLargeForPool { .. }), "{e}");
        let e = b.insert(2000, 1).unwrap_err();
        assert!(e.to_string().contains("failed earlier"), "{e}");
        assert!(b.get(&5).is_err());
        Err::<(), _>(e)
    });
    assert!(r.is_err());
    assert_eq!(
        contents(&m),
        before,
        "nothing of the failed batch is visible"
    );
    assert_ok(&m.check());
    let reach: Vec<u64> = m
        .check()
        .objects
        .into_iter()
        .chain([root.offset()])
        .collect();
    let rep = pool.check(Some(&reach));
    assert!(rep.ok(), "{rep:?}");
}

/// A batch operation that fails half-way (a split gets its first new segment, then the pool
/// is full) leaves nothing behind: the caller may carry on and commit, and no object is
/// allocated but unreachable afterwards.
#[test]
fn batch_split_failing_half_way_leaks_nothing() {
    let dir = tmp();
    let pool = Pool::create(
        dir.path().join("full-split.pool"),
        &PoolOptions::new("test.hashmap")
            .size(8 << 20)
            .max_size(8 << 20),
    )
    .unwrap();
    let root = pool.root::<u64>().unwrap();
    let id = pool
        .transaction(|tx| {
            let id = U32Map::create_in_with_seed(tx, 21)?;
            tx.write(root, &id.offset())?;
            Ok::<_, Error>(id)
        })
        .unwrap();
    let mut m = U32Map::open(&pool, id).unwrap();
    // One entry, so that the batch copies the segment (a batch into an empty map fills it in
    // place instead: `batch_fill_*` below).
    m.insert(u32::MAX - 1, 0).unwrap();
    // Fill the pool with segment-sized objects, then give two back: a batch's first write
    // copies the (single) segment into one, and its first split gets only one of two.
    let mut fillers = Vec::new();
    loop {
        match pool.transaction(|tx| tx.alloc_bytes(&[7u8; 16 << 10])) {
            Ok(p) => fillers.push(p.offset()),
            Err(Error::PoolFull { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    for _ in 0..2 {
        let f = fillers.pop().unwrap();
        pool.transaction(|tx| tx.free(PPtr::<u8>::from_offset(f)))
            .unwrap();
    }
    // Freed blocks are reused once the durable watermark passes their transaction: let a few
    // more commits go by.
    for _ in 0..32 {
        pool.transaction(|tx| tx.write(root, &id.offset())).unwrap();
    }
    let mut failed = None;
    m.batch(|b| {
        for k in 0..100_000u32 {
            if let Err(e) = b.insert(k, k) {
                failed = Some((k, e));
                break;
            }
        }
        // Carry on after the error: what succeeded is committed.
        b.sync()
    })
    .unwrap();
    let (k, e) = failed.expect("the pool never filled up");
    assert!(
        k > 0,
        "the failure must come from a split, not the first copy"
    );
    assert!(matches!(e, Error::PoolFull { .. }), "{e}");
    assert_eq!(m.len().unwrap(), k as u64 + 1);
    assert_ok(&m.check());
    let reach: Vec<u64> = m
        .check()
        .objects
        .into_iter()
        .chain(fillers)
        .chain([root.offset()])
        .collect();
    let rep = pool.check(Some(&reach));
    assert!(rep.ok(), "{rep:?}");
}
