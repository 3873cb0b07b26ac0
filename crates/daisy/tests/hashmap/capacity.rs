//! Pre-sized tables (`with_capacity`, `reserve`) and batches that fill an empty map in place:
//! no split, no copy, and what a failed or crashed fill leaves (an empty map).

use super::*;

/// The header's `flags` word (bit 1: a batch is filling the map in place).
fn flags(pool: &Pool, off: u64) -> u32 {
    let mut b = [0u8; 4];
    pool.read_bytes(off + 36, &mut b);
    u32::from_le_bytes(b)
}

fn create_sized(pool: &Pool, seed: u64, capacity: u64) -> PPtr<U32Map> {
    let root = pool.root::<PPtr<U32Map>>().unwrap();
    pool.transaction(|tx| {
        let id = U32Map::create_in_with_seed_and_capacity(tx, seed, capacity)?;
        tx.write(root, &id)?;
        Ok::<_, Error>(id)
    })
    .unwrap()
}

fn key(i: u32) -> u32 {
    i.wrapping_mul(0x9E37_79B9) ^ 0x1234
}

/// Every object of the map and the root: what `pool.check` must find reachable.
fn reach(pool: &Pool, m: &MapCheck) -> Vec<u64> {
    let mut r = m.objects.clone();
    r.push(pool.root::<PPtr<U32Map>>().unwrap().offset());
    r
}

/// A table sized for N entries takes N inserts in one batch without a split and without a
/// copy: the segments afterwards are the very objects the creation allocated.
#[test]
fn sized_table_is_filled_in_place_by_a_batch() {
    let dir = tmp();
    let pool = new_pool(&dir, "c.pool");
    let n = 100_000u32;
    let id = create_sized(&pool, 7, n as u64);
    let mut m = U32Map::open(&pool, id).unwrap();
    let before = m.check();
    assert_ok(&before);
    // 2n slots of 8 bytes, 2048 to a segment, rounded up to a power of two: 128 segments.
    assert_eq!((before.segments, before.depth), (128, 7));
    m.batch(|b| {
        for i in 0..n {
            assert_eq!(b.insert(key(i), i)?, None);
        }
        assert_eq!(b.insert(key(5), 99)?, Some(5), "an update during the fill");
        assert_eq!(b.remove(&key(6))?, Some(6), "a removal during the fill");
        Ok(())
    })
    .unwrap();
    let after = m.check();
    assert_ok(&after);
    assert_eq!(after.entries, n as u64 - 1);
    let mut segs_before = before.objects.clone();
    let mut segs_after = after.objects.clone();
    segs_before.sort_unstable();
    segs_after.sort_unstable();
    assert_eq!(segs_before, segs_after, "no segment was split or copied");
    assert_eq!(flags(&pool, id.offset()), 0, "the fill's end is committed");
    drop(m);
    let path = dir.path().join("c.pool");
    pool.crash_for_test();
    let pool = Pool::open(&path, "test.hashmap").unwrap();
    let m = U32Map::open(&pool, id).unwrap();
    assert_eq!(m.len().unwrap(), n as u64 - 1);
    assert_eq!(m.get(&key(5)).unwrap(), Some(99));
    assert_eq!(m.get(&key(6)).unwrap(), None);
    assert_eq!(m.get(&key(n - 1)).unwrap(), Some(n - 1));
    let c = m.check();
    assert_ok(&c);
    let rep = pool.check(Some(&reach(&pool, &c)));
    assert!(rep.ok(), "{rep:?}");
}

/// A batch into an empty map that fails before any commit leaves the map empty (its filled
/// segments emptied again, the flag cleared), and the map takes a new batch afterwards.
#[test]
fn failed_fill_leaves_the_map_empty() {
    let dir = tmp();
    let pool = new_pool(&dir, "f.pool");
    let id = create_sized(&pool, 8, 20_000);
    let mut m = U32Map::open(&pool, id).unwrap();
    let r: daisy::Result<()> = m.batch(|b| {
        for i in 0..20_000u32 {
            b.insert(key(i), i)?;
        }
        assert_eq!(b.len(), 20_000);
        Err(Error::Aborted("test".into()))
    });
    assert!(r.is_err());
    assert_eq!(flags(&pool, id.offset()), 0);
    assert_eq!(m.len().unwrap(), 0);
    assert!(contents(&m).is_empty());
    assert_ok(&m.check());
    m.batch(|b| {
        for i in 0..1000u32 {
            b.insert(key(i), !i)?;
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(m.len().unwrap(), 1000);
    assert_eq!(m.get(&key(999)).unwrap(), Some(!999));
    assert_ok(&m.check());
}

/// The process dies while a batch fills an empty map (every store it made reached the file,
/// the worst case): the flag is durable, and opening the map empties the segments again.
#[test]
fn crash_during_a_fill_opens_an_empty_map() {
    let dir = tmp();
    let path = dir.path().join("k.pool");
    let pool = new_pool(&dir, "k.pool");
    let id = create_sized(&pool, 9, 50_000);
    let mut m = U32Map::open(&pool, id).unwrap();
    let crash = pool.clone();
    let r: daisy::Result<()> = m.batch(|b| {
        for i in 0..50_000u32 {
            b.insert(key(i), i)?;
        }
        crash.crash_for_test();
        Err(Error::Aborted("crashed".into()))
    });
    assert!(r.is_err());
    drop(m);
    drop(pool);
    let pool = Pool::open(&path, "test.hashmap").unwrap();
    assert_eq!(
        flags(&pool, id.offset()),
        2,
        "the fill's flag survives the crash"
    );
    // The checker reads a map being filled as empty, and finds nothing wrong.
    let raw = pool.check(None);
    assert!(raw.ok(), "{raw:?}");
    let m = U32Map::open(&pool, id).unwrap();
    assert_eq!(flags(&pool, id.offset()), 0);
    assert_eq!(m.len().unwrap(), 0);
    assert!(contents(&m).is_empty(), "nothing of the uncommitted fill");
    let c = m.check();
    assert_ok(&c);
    assert_eq!(c.entries, 0);
    let rep = pool.check(Some(&reach(&pool, &c)));
    assert!(rep.ok(), "{rep:?}");
}

/// A sync inside a filling batch commits the fill so far; after it the batch copies segments
/// again, so a later error keeps exactly what the sync made durable.
#[test]
fn fill_then_sync_then_error_keeps_the_synced_prefix() {
    let dir = tmp();
    let pool = new_pool(&dir, "s.pool");
    let id = create_sized(&pool, 10, 10_000);
    let mut m = U32Map::open(&pool, id).unwrap();
    let r: daisy::Result<()> = m.batch(|b| {
        for i in 0..3000u32 {
            b.insert(key(i), i)?;
        }
        b.sync()?;
        for i in 3000..6000u32 {
            b.insert(key(i), i)?;
        }
        b.remove(&key(0))?;
        Err(Error::Aborted("test".into()))
    });
    assert!(r.is_err());
    let want: HashMap<u32, u32> = (0..3000u32).map(|i| (key(i), i)).collect();
    assert_eq!(contents(&m), want);
    assert_eq!(m.len().unwrap(), 3000);
    assert_eq!(flags(&pool, id.offset()), 0);
    assert_ok(&m.check());
}

/// `reserve` rebuilds a table holding entries (written in place and through the log) at the
/// size asked for, keeping every entry; a crash afterwards keeps the rebuilt table; asking for
/// less than the table has does nothing.
#[test]
fn reserve_rebuilds_a_populated_table() {
    let dir = tmp();
    let path = dir.path().join("r.pool");
    let pool = new_pool(&dir, "r.pool");
    let id = create_u32(&pool, 11);
    let mut m = U32Map::open(&pool, id).unwrap();
    let mut model = HashMap::new();
    for i in 0..5000u32 {
        m.insert(key(i), i).unwrap();
        model.insert(key(i), i);
    }
    m.insert(u32::MAX, 1).unwrap();
    model.insert(u32::MAX, 1);
    assert!(m.reserve(200_000).unwrap());
    let c = m.check();
    assert_ok(&c);
    assert!(c.segments >= 256 && c.depth >= 8, "{} segments", c.segments);
    assert_eq!(contents(&m), model);
    assert!(!m.reserve(1000).unwrap(), "already large enough");
    assert!(!m.reserve(200_000).unwrap(), "already large enough");
    // The sized table takes the rest without a split.
    let segs = c.segments;
    for i in 5000..150_000u32 {
        m.insert(key(i), i).unwrap();
        model.insert(key(i), i);
    }
    assert_eq!(m.check().segments, segs);
    drop(m);
    pool.crash_for_test();
    let pool = Pool::open(&path, "test.hashmap").unwrap();
    let m = U32Map::open(&pool, id).unwrap();
    assert_eq!(m.len().unwrap(), model.len() as u64);
    assert_eq!(contents(&m), model);
    let c = m.check();
    assert_ok(&c);
    let rep = pool.check(Some(&reach(&pool, &c)));
    assert!(rep.ok(), "{rep:?}");
}

/// `Batch::reserve` on a map that holds entries: the entries move into fresh segments that
/// the batch then writes in place; an error before the commit keeps the old table.
#[test]
fn batch_reserve_moves_entries_and_rolls_back_on_error() {
    let dir = tmp();
    let pool = new_pool(&dir, "b.pool");
    let id = create_u32(&pool, 12);
    let mut m = U32Map::open(&pool, id).unwrap();
    let mut model = HashMap::new();
    for i in 0..3000u32 {
        m.insert(key(i), i).unwrap();
        model.insert(key(i), i);
    }
    let old = m.check();
    let r: daisy::Result<()> = m.batch(|b| {
        b.reserve(100_000)?;
        for i in 3000..50_000u32 {
            b.insert(key(i), i)?;
        }
        Err(Error::Aborted("test".into()))
    });
    assert!(r.is_err());
    assert_eq!(contents(&m), model);
    assert_eq!(m.check().segments, old.segments, "the old table");
    m.batch(|b| {
        b.reserve(100_000)?;
        for i in 3000..100_000u32 {
            assert_eq!(b.insert(key(i), i)?, None);
            model.insert(key(i), i);
        }
        Ok(())
    })
    .unwrap();
    let c = m.check();
    assert_ok(&c);
    assert_eq!(c.segments, 128, "sized once, no split");
    assert_eq!(contents(&m), model);
    let rep = pool.check(Some(&reach(&pool, &c)));
    assert!(rep.ok(), "{rep:?}");
}

/// Byte-string maps take the same capacity hint: no split while filling, entries kept by
/// `reserve_tx`.
#[test]
fn bytes_map_with_capacity_and_reserve() {
    let dir = tmp();
    let pool = new_pool(&dir, "y.pool");
    let root = pool.root::<PPtr<PBytesMap>>().unwrap();
    let id = pool
        .transaction(|tx| {
            let id = PBytesMap::create_in_with_seed_and_capacity(tx, 3, 5000)?;
            tx.write(root, &id)?;
            Ok::<_, Error>(id)
        })
        .unwrap();
    let mut m = PBytesMap::open(&pool, id).unwrap();
    let segs = m.check().segments;
    // Two slots of 16 bytes... four slots to a 64-byte bucket: 10,000 slots, 10 segments,
    // rounded to 16.
    assert_eq!(segs, 16);
    for i in 0..5000u32 {
        m.insert(format!("key{i}").as_bytes(), &i.to_le_bytes())
            .unwrap();
    }
    assert_eq!(m.check().segments, segs, "no split");
    pool.transaction(|tx| m.reserve_tx(tx, 40_000).map(|r| assert!(r)))
        .unwrap();
    let c = m.check();
    assert_ok(&c);
    assert_eq!(c.segments, 128);
    assert_eq!(c.entries, 5000);
    for i in (0..5000u32).step_by(97) {
        assert_eq!(
            m.get(format!("key{i}").as_bytes()).unwrap(),
            Some(i.to_le_bytes().to_vec())
        );
    }
    let mut r = c.objects.clone();
    r.push(root.offset());
    let rep = pool.check(Some(&r));
    assert!(rep.ok(), "{rep:?}");
}

/// A capacity no table can have, or one the pool cannot hold, is an error, not a panic or a
/// partly built map.
#[test]
fn impossible_capacities_are_errors() {
    let dir = tmp();
    let pool = Pool::create(
        dir.path().join("small.pool"),
        &PoolOptions::new("test.hashmap")
            .size(8 << 20)
            .max_size(8 << 20),
    )
    .unwrap();
    for cap in [u64::MAX, 1 << 60, 10_000_000] {
        let r = pool.transaction(|tx| U32Map::create_in_with_capacity(tx, cap));
        assert!(matches!(r, Err(Error::Aborted(_))), "{cap}: {r:?}");
    }
    let id = create_u32(&pool, 1);
    let mut m = U32Map::open(&pool, id).unwrap();
    m.insert(1, 1).unwrap();
    assert!(m.reserve(10_000_000).is_err());
    assert_eq!(m.get(&1).unwrap(), Some(1));
    assert_ok(&m.check());
}

/// Puts are queued (their buckets prefetched) and applied in call order: interleaved with
/// gets, removes and inserts they give the same map as inserts, and the batch's end applies
/// the last ones.
#[test]
fn puts_apply_in_order_with_other_operations() {
    let dir = tmp();
    let pool = new_pool(&dir, "q.pool");
    let id = create_sized(&pool, 13, 30_000);
    let mut m = U32Map::open(&pool, id).unwrap();
    let mut model = HashMap::new();
    m.batch(|b| {
        for i in 0..40_000u32 {
            // Repeated keys: a later put overwrites an earlier one still in the queue.
            let k = key(i % 25_000);
            b.put(k, i)?;
            model.insert(k, i);
            if i % 997 == 0 {
                assert_eq!(b.get(&k)?, Some(i), "a get sees the puts before it");
                assert_eq!(b.len(), model.len() as u64, "all puts applied by the get");
            }
            if i % 1999 == 0 {
                let r = key(i / 3);
                assert_eq!(b.remove(&r)?, model.remove(&r));
            }
        }
        b.put(u32::MAX, 5)?;
        model.insert(u32::MAX, 5);
        b.put(key(1), 77)?;
        model.insert(key(1), 77);
        Ok(())
    })
    .unwrap();
    assert_eq!(m.len().unwrap(), model.len() as u64);
    assert_eq!(contents(&m), model);
    assert_ok(&m.check());
}

/// A put that fails when it is applied (the pool is full) is reported by a later call, and
/// the map keeps a prefix of the puts: those queued after the failed one are dropped. (The
/// batch's own commit may then fail too, for want of room: it keeps the prefix its syncs made
/// durable.)
#[test]
fn a_failing_put_keeps_a_prefix() {
    let dir = tmp();
    let pool = Pool::create(
        dir.path().join("full.pool"),
        &PoolOptions::new("test.hashmap")
            .size(8 << 20)
            .max_size(8 << 20),
    )
    .unwrap();
    let id = create_u32(&pool, 14);
    let mut m = U32Map::open(&pool, id).unwrap();
    let mut failed_at = None;
    let mut synced = 0;
    let r = m.batch(|b| {
        for i in 0..2_000_000u32 {
            if i % 20_000 == 0 {
                b.sync()?;
                synced = i;
            }
            if let Err(e) = b.put(i, i) {
                assert!(matches!(e, Error::PoolFull { .. }), "{e}");
                failed_at = Some(i);
                break;
            }
        }
        Ok(())
    });
    let at = failed_at.expect("the pool never filled up");
    let got = contents(&m);
    let n = got.len() as u32;
    assert!(
        n >= synced && n < at,
        "{n} kept, synced {synced}, failure seen at put {at}, {r:?}"
    );
    assert!(synced > 0);
    assert!((0..n).all(|i| got.get(&i) == Some(&i)), "not a prefix");
    assert_ok(&m.check());
}
