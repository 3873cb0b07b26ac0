//! `clear`: it frees everything, works with small and the smallest log slots, and a crash
//! inside it is finished at the next open.

use super::*;

#[test]
fn clear_frees_everything_and_the_map_stays_usable() {
    let dir = tmp();
    let pool = new_pool(&dir, "g.pool");
    let baseline = pool.objects().unwrap().len();
    let id = create_bytes(&pool, 9);
    let mut m = PBytesMap::open(&pool, id).unwrap();
    let after_create = pool.objects().unwrap().len();
    assert!(after_create > baseline);
    for i in 0..6000u32 {
        let k = format!("key:{i}");
        let v = vec![i as u8; (i % 300) as usize];
        assert!(!m.insert(k.as_bytes(), &v).unwrap());
    }
    assert!(m.insert(b"key:7", b"seven").unwrap());
    assert_eq!(m.get(b"key:7").unwrap().as_deref(), Some(&b"seven"[..]));
    assert_eq!(m.get(b"key:8").unwrap(), Some(vec![8u8; 8]));
    assert_eq!(m.get(b"nope").unwrap(), None);
    assert!(m.remove(b"key:9").unwrap());
    assert!(!m.remove(b"key:9").unwrap());
    assert_eq!(m.len().unwrap(), 5999);
    assert_eq!(m.iter().unwrap().count(), 5999);
    let c = m.check();
    assert_ok(&c);
    assert!(c.segments > 1);
    m.clear().unwrap();
    assert_eq!(m.len().unwrap(), 0);
    assert_eq!(m.iter().unwrap().count(), 0);
    assert_eq!(
        pool.objects().unwrap().len(),
        after_create,
        "clear frees the entries, segments and directory"
    );
    m.insert(b"again", b"yes").unwrap();
    assert_eq!(m.get(b"again").unwrap(), Some(b"yes".to_vec()));
    assert_ok(&m.check());
    // Empty keys and values are fine.
    m.insert(b"", b"").unwrap();
    assert_eq!(m.get(b"").unwrap(), Some(vec![]));
}

/// With small log slots, clearing a byte map (its entries are freed a log's worth at a time)
/// and growing a map (splits) still work.
#[test]
fn small_log_slots_clear_and_split() {
    let dir = tmp();
    let pool = Pool::create(
        dir.path().join("small-log2.pool"),
        &PoolOptions::new("test.hashmap")
            .size(64 << 20)
            .log_slot_size(4096),
    )
    .unwrap();
    let baseline = pool.objects().unwrap().len();
    let root = pool.root::<[u64; 2]>().unwrap();
    let (bid, fid) = pool
        .transaction(|tx| {
            let b = PBytesMap::create_in_with_seed(tx, 1)?;
            let f = U32Map::create_in_with_seed(tx, 2)?;
            tx.write(root, &[b.offset(), f.offset()])?;
            Ok::<_, Error>((b, f))
        })
        .unwrap();
    let mut b = PBytesMap::open(&pool, bid).unwrap();
    let after_create = pool.objects().unwrap().len();
    for k in 0..3000u32 {
        b.insert(format!("k{k}").as_bytes(), b"value").unwrap();
    }
    b.clear().unwrap();
    assert_eq!(pool.objects().unwrap().len(), after_create);
    let mut f = U32Map::open(&pool, fid).unwrap();
    for k in 0..20_000u32 {
        f.insert(k.wrapping_mul(0x9E37_79B9), k).unwrap();
    }
    assert_ok(&f.check());
    assert!(f.check().segments > 8);
    assert!(baseline < after_create);
}

/// With the smallest log slots a pool allows (256 bytes), `clear` of a byte map still makes
/// progress every transaction (it once found no room for its reserve and looped forever).
#[test]
fn clear_with_the_smallest_log_slots_finishes() {
    let dir = tmp();
    let path = dir.path().join("tiny-log.pool");
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    // In a thread, so a regression fails the test instead of hanging it.
    std::thread::spawn(move || {
        let pool = Pool::create(
            &path,
            &PoolOptions::new("test.hashmap")
                .size(64 << 20)
                .log_slot_size(256),
        )
        .unwrap();
        let id = create_bytes(&pool, 3);
        let mut b = PBytesMap::open(&pool, id).unwrap();
        let after_create = pool.objects().unwrap().len();
        for k in 0..200u32 {
            b.insert(format!("key{k}").as_bytes(), b"v").unwrap();
        }
        b.clear().unwrap();
        assert_eq!(b.len().unwrap(), 0);
        assert_eq!(pool.objects().unwrap().len(), after_create, "entries freed");
        b.insert(b"again", b"1").unwrap();
        assert_eq!(b.get(b"again").unwrap().as_deref(), Some(&b"1"[..]));
        done_tx.send(()).unwrap();
    });
    done_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("clear with 256-byte log slots did not finish within 60 s");
}

/// A crash inside `clear`, after the new empty table is committed and before the old objects
/// are freed: the header keeps the detached directory, so nothing leaks (`pool check` with the
/// map's objects as reachable is clean), and the next open frees the rest.
#[test]
fn clear_interrupted_by_a_crash_is_finished_at_open() {
    let dir = tmp();
    let path = dir.path().join("clear-crash.pool");
    let pool = new_pool(&dir, "clear-crash.pool");
    let id = create_bytes(&pool, 21);
    let mut m = PBytesMap::open(&pool, id).unwrap();
    let empty = pool.objects().unwrap().len();
    for k in 0..3000u32 {
        m.insert(format!("key{k}").as_bytes(), &[7u8; 40]).unwrap();
    }
    // The transaction that installs the empty table commits, then the process "dies" before
    // applying it or freeing anything.
    pool.fail_next_apply_for_test();
    assert!(
        m.clear().is_err(),
        "the pool is poisoned after the simulated death"
    );
    drop(m);
    pool.crash_for_test();

    let pool = Pool::open(&path, "test.hashmap").unwrap();
    let owned = daisy::map_objects(&pool, id.offset()).unwrap();
    assert!(
        owned.len() > 3000,
        "the detached entries are still owned by the map"
    );
    let root = pool.root::<PPtr<PBytesMap>>().unwrap();
    let reach: Vec<u64> = owned.into_iter().chain([root.offset()]).collect();
    let rep = pool.check(Some(&reach));
    assert!(rep.ok(), "{rep:?}");
    let all = daisy::check_all(&pool).unwrap();
    assert!(all[0].problems.is_empty(), "{:?}", all[0].problems);
    assert_eq!(all[0].entries, 0, "the committed clear emptied the map");

    let m = PBytesMap::open(&pool, id).unwrap();
    assert_eq!(m.len().unwrap(), 0);
    assert_eq!(
        pool.objects().unwrap().len(),
        empty,
        "open finished freeing"
    );
    assert_ok(&m.check());
}
