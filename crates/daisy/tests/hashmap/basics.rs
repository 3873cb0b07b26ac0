//! Map basics: insert, get, remove, iteration and reopening; handles that are refused; a
//! failed transaction; another map format version; byte-map entries, scans and random keys.

use super::*;

#[test]
fn insert_get_remove_iter_and_reopen() {
    let dir = tmp();
    let pool = new_pool(&dir, "a.pool");
    let id = create_u32(&pool, 1);
    let mut m = U32Map::open(&pool, id).unwrap();
    let mut model = HashMap::new();
    // Enough keys for many splits and two directory doublings at least.
    for i in 0..20_000u32 {
        let k = i.wrapping_mul(2_654_435_761);
        assert_eq!(m.insert(k, i).unwrap(), model.insert(k, i));
    }
    assert_eq!(
        m.insert(u32::MAX, 5).unwrap(),
        None,
        "the reserved key is a normal key"
    );
    model.insert(u32::MAX, 5);
    assert_eq!(m.insert(u32::MAX, 6).unwrap(), Some(5));
    model.insert(u32::MAX, 6);
    for i in (0..20_000u32).step_by(3) {
        let k = i.wrapping_mul(2_654_435_761);
        assert_eq!(m.remove(&k).unwrap(), model.remove(&k));
    }
    assert_eq!(m.remove(&12345).unwrap(), model.remove(&12345));
    assert_eq!(m.len().unwrap(), model.len() as u64);
    for (k, v) in &model {
        assert_eq!(m.get(k).unwrap(), Some(*v));
    }
    assert_eq!(contents(&m), model);
    let c = m.check();
    assert_ok(&c);
    assert!(
        c.segments > 8,
        "20,000 keys must have split the first segment"
    );
    drop(m);
    drop(pool);
    let pool = Pool::open(dir.path().join("a.pool"), "test.hashmap").unwrap();
    let id = pool.read(pool.root::<PPtr<U32Map>>().unwrap());
    let m = U32Map::open(&pool, id).unwrap();
    assert_eq!(contents(&m), model);
    let all = daisy::check_all(&pool).unwrap();
    assert_eq!(all.len(), 1);
    assert_ok(&all[0]);
    assert_eq!(all[0].entries, model.len() as u64);
}

#[test]
fn bad_handles_are_refused() {
    let dir = tmp();
    let pool = new_pool(&dir, "b.pool");
    let id = create_u32(&pool, 2);
    let m = U32Map::open(&pool, id).unwrap();
    assert!(matches!(
        U32Map::open(&pool, id),
        Err(Error::CollectionInUse { .. })
    ));
    drop(m);
    // Wrong types, wrong offsets.
    let e = PHashMap::<u64, u64>::open(&pool, id.offset().into_ptr()).unwrap_err();
    assert!(matches!(e, Error::NotACollection { .. }), "{e}");
    assert!(e.to_string().contains("4-byte keys"), "{e}");
    let e = PBytesMap::open(&pool, id.offset().into_ptr()).unwrap_err();
    assert!(matches!(e, Error::NotACollection { .. }), "{e}");
    let root = pool.root::<PPtr<U32Map>>().unwrap();
    let e = U32Map::open(&pool, root.offset().into_ptr()).unwrap_err();
    assert!(matches!(e, Error::NotACollection { .. }), "{e}");
    let e = U32Map::open(&pool, PPtr::from_offset(u64::MAX - 7)).unwrap_err();
    assert!(matches!(e, Error::NotACollection { .. }), "{e}");
    // A transaction of another pool.
    let other = new_pool(&dir, "c.pool");
    let mut m = U32Map::open(&pool, id).unwrap();
    let e = other.transaction(|tx| m.insert_tx(tx, 1, 1)).unwrap_err();
    assert!(e.to_string().contains("another pool"), "{e}");
    // Entries too large for a fixed map.
    let e = other
        .transaction(PHashMap::<[u64; 5], [u64; 5]>::create_in)
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e}");
}

trait IntoPtr {
    fn into_ptr<T>(self) -> PPtr<T>;
}
impl IntoPtr for u64 {
    fn into_ptr<T>(self) -> PPtr<T> {
        PPtr::from_offset(self)
    }
}

#[test]
fn operations_in_a_failed_transaction_leave_nothing() {
    let dir = tmp();
    // Log slots large enough for thousands of inserts in one transaction.
    let pool = Pool::create(
        dir.path().join("d.pool"),
        &PoolOptions::new("test.hashmap")
            .size(256 << 20)
            .log_slot_size(256 << 10),
    )
    .unwrap();
    let id = create_u32(&pool, 3);
    let mut m = U32Map::open(&pool, id).unwrap();
    for i in 0..100 {
        m.insert(i, i).unwrap();
    }
    let before = contents(&m);
    let objects_before = pool.objects().unwrap().len();
    let r: Result<(), Error> = pool.transaction(|tx| {
        for i in 0..5000 {
            m.insert_tx(tx, 1000 + i, i)?; // splits inside the transaction too
            assert_eq!(m.get_tx(tx, &(1000 + i))?, Some(i));
        }
        m.remove_tx(tx, &5)?;
        assert_eq!(m.get_tx(tx, &5)?, None);
        Err(Error::Aborted("test".into()))
    });
    assert!(r.is_err());
    assert_eq!(contents(&m), before);
    assert_eq!(pool.objects().unwrap().len(), objects_before);
    assert_ok(&m.check());
    // The same work committed is all there.
    let segments = m.check().segments;
    pool.transaction(|tx| {
        for i in 0..5000 {
            m.insert_tx(tx, 10_000 + i, i)?;
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(m.len().unwrap(), 5100);
    assert!(
        m.check().segments > segments,
        "the transaction split a segment"
    );
    assert_ok(&m.check());
}

/// A map written by another map format version is refused with a clear message (its header
/// checksum is valid: this is not damage, it is a format this build does not read). Format 1,
/// the previous one, is read and upgraded to 2 by the first handle that opens it.
#[test]
fn other_map_format_version_is_refused() {
    let dir = tmp();
    let pool = new_pool(&dir, "v.pool");
    let id = create_u32(&pool, 12);
    let set_format = |v: u32| {
        let mut hdr = [0u8; 32];
        pool.read_bytes(id.offset(), &mut hdr);
        hdr[12..16].copy_from_slice(&v.to_le_bytes());
        let crc = daisy::internals::crc32c_append(0, &hdr);
        pool.transaction(|tx| {
            tx.write_bytes(id.offset() + 12, &v.to_le_bytes())?;
            tx.write_bytes(id.offset() + 32, &crc.to_le_bytes())
        })
        .unwrap();
    };
    let format = || {
        let mut b = [0u8; 4];
        pool.read_bytes(id.offset() + 12, &mut b);
        u32::from_le_bytes(b)
    };
    {
        let mut m = U32Map::open(&pool, id).unwrap();
        for k in 0..500 {
            m.insert(k, k + 1).unwrap();
        }
    }
    set_format(3);
    let e = U32Map::open(&pool, id).unwrap_err();
    assert!(
        e.to_string()
            .contains("map format version 3 (this build reads 1 and 2)"),
        "{e}"
    );
    let all = daisy::check_all(&pool).unwrap();
    assert!(
        all[0].problems.iter().any(|p| p.contains("format version")),
        "{:?}",
        all[0].problems
    );
    set_format(1);
    assert!(daisy::check_all(&pool).unwrap()[0].problems.is_empty());
    let m = U32Map::open(&pool, id).unwrap();
    assert_eq!(format(), 2, "opening upgrades the header");
    assert_eq!(m.len().unwrap(), 500);
    assert_eq!(m.get(&7).unwrap(), Some(8));
    assert_ok(&m.check());
}

/// Byte maps: entries read in place, cursor scans that see every key exactly once while the
/// table grows underneath (splits and directory doublings between calls), random keys, and
/// `clear_with` changing the caller's word atomically with the clear.
#[test]
fn bytes_map_entries_scan_random_and_clear_with() {
    let dir = tmp();
    let pool = new_pool(&dir, "scan.pool");
    let root = pool.root::<[u64; 2]>().unwrap();
    let id = pool
        .transaction(|tx| {
            let id = PBytesMap::create_in_with_seed(tx, 9)?;
            tx.write(root, &[id.offset(), 0])?;
            Ok::<_, Error>(id)
        })
        .unwrap();
    let mut m = PBytesMap::open(&pool, id).unwrap();
    let key = |i: u32| format!("key:{i:06}").into_bytes();
    for i in 0..3000u32 {
        m.insert(&key(i), &i.to_le_bytes().repeat(1 + i as usize % 5))
            .unwrap();
    }
    // In-place reads of a value, whole and in part.
    let e = m.entry(&key(7)).unwrap().unwrap();
    assert_eq!((e.key_len(), e.value_len()), (10, 4 * 3));
    let mut part = [0u8; 4];
    m.read_value(&e, 8, &mut part).unwrap();
    assert_eq!(part, 7u32.to_le_bytes());
    assert!(
        m.read_value(&e, 9, &mut part).is_err(),
        "past the value's end"
    );
    assert!(m.entry(b"absent").unwrap().is_none());

    // A scan with inserts between the calls: the 3000 old keys come back exactly once.
    let mut seen = HashMap::<Vec<u8>, u32>::new();
    let (mut cursor, mut calls, mut next_new) = (0u64, 0, 100_000u32);
    loop {
        let mut out = Vec::new();
        cursor = m.scan(cursor, 10, &mut out).unwrap();
        calls += 1;
        for (k, e) in out {
            assert_eq!(m.entry(&k).unwrap(), Some(e));
            *seen.entry(k).or_default() += 1;
        }
        for _ in 0..20 {
            m.insert(&key(next_new), b"new").unwrap();
            next_new += 1;
        }
        if cursor == 0 {
            break;
        }
    }
    assert!(
        calls > 50,
        "COUNT 10 over 3000 keys took only {calls} calls"
    );
    for i in 0..3000 {
        assert_eq!(
            seen.get(&key(i)),
            Some(&1),
            "key {i} seen {:?} times",
            seen.get(&key(i))
        );
    }
    assert!(seen.values().all(|&n| n == 1), "a key came back twice");
    assert_ok(&m.check());

    // Random keys are keys of the map, and not always the same one.
    let picks: std::collections::HashSet<Vec<u8>> = pool
        .transaction(|tx| {
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            let mut rng = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            (0..50u64)
                .map(|_| m.random_key_tx(tx, &mut rng))
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap()
        .into_iter()
        .map(|k| k.unwrap())
        .collect();
    assert!(
        picks.len() > 20,
        "only {} distinct random keys",
        picks.len()
    );
    assert!(picks.iter().all(|k| m.contains_key(k).unwrap()));

    m.clear_with(|tx| tx.write(root, &[id.offset(), 77]))
        .unwrap();
    assert_eq!(pool.read(root)[1], 77);
    assert_eq!(m.len().unwrap(), 0);
    let mut out = Vec::new();
    assert_eq!(m.scan(0, 10, &mut out).unwrap(), 0);
    assert!(out.is_empty());
    assert!(pool
        .transaction(|tx| m.random_key_tx(tx, &mut || 5))
        .unwrap()
        .is_none());
}
