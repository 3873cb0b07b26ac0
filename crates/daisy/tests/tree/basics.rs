//! Inserts, lookups, removals, pops and reopening; handles refused; failed transactions;
//! oversized items.

use super::*;

/// A sorted set's worth of entries: insert, replace, look up, pop from both ends, reopen.
#[test]
fn insert_get_remove_pop_and_reopen() {
    let dir = tmp();
    let path = dir.path().join("b.pool");
    let pool = new_pool(&dir, "b.pool");
    let id = create(&pool, PTreeMap::DEFAULT_NODE_SIZE);
    let mut model = Model::new();
    {
        let mut m = PTreeMap::open(&pool, id).unwrap();
        assert!(m.is_empty().unwrap());
        assert_eq!(m.first().unwrap(), None);
        assert_eq!(m.pop_last().unwrap(), None);
        for i in 0..3000u32 {
            let k = zkey(
                (i * 7919 % 3001) as f64 - 1500.5,
                format!("member:{i}").as_bytes(),
            );
            let v = if i % 3 == 0 {
                vec![]
            } else {
                i.to_le_bytes().to_vec()
            };
            assert!(!m.insert(&k, &v).unwrap());
            model.insert(k, v);
        }
        // Replacing keeps the length and returns true; a longer value changes the entry size.
        let (k0, _) = model
            .iter()
            .nth(17)
            .map(|(k, v)| (k.clone(), v.clone()))
            .unwrap();
        assert!(m.insert(&k0, b"a longer value than before").unwrap());
        model.insert(k0.clone(), b"a longer value than before".to_vec());
        assert_eq!(m.len().unwrap(), 3000);
        assert_eq!(
            m.get(&k0).unwrap().as_deref(),
            Some(&b"a longer value than before"[..])
        );
        assert!(m.contains_key(&k0).unwrap());
        assert!(!m.contains_key(b"absent").unwrap());
        assert_eq!(m.get(b"absent").unwrap(), None);
        assert_eq!(m.remove(b"absent").unwrap(), None);
        // Removals return the value.
        for (k, v) in model.clone().iter().step_by(5) {
            assert_eq!(m.remove(k).unwrap().as_ref(), Some(v));
            model.remove(k);
        }
        assert_eq!(
            m.first().unwrap(),
            model.first_key_value().map(|(k, v)| (k.clone(), v.clone()))
        );
        assert_eq!(
            m.last().unwrap(),
            model.last_key_value().map(|(k, v)| (k.clone(), v.clone()))
        );
        for _ in 0..50 {
            assert_eq!(m.pop_first().unwrap(), model.pop_first());
            assert_eq!(m.pop_last().unwrap(), model.pop_last());
        }
        assert_eq!(contents(&m), model_vec(&model));
        assert_ok(&m.check());
    }
    pool.close().unwrap();
    let pool = Pool::open(&path, "test.tree").unwrap();
    let m = PTreeMap::open(&pool, id).unwrap();
    assert_eq!(m.len().unwrap(), model.len() as u64);
    assert_eq!(contents(&m), model_vec(&model));
    let c = m.check();
    assert_ok(&c);
    assert_eq!(c.entries, model.len() as u64);
    assert_no_leak(&pool, id);
}

/// Handles are exclusive; a tree is refused where there is none, across pools, with an
/// unknown node size; a key or value over the limit is refused before anything is read.
#[test]
fn handles_and_bad_input_are_refused() {
    let dir = tmp();
    let pool = new_pool(&dir, "h.pool");
    let other = new_pool(&dir, "o.pool");
    let id = create(&pool, 512);
    let m = PTreeMap::open(&pool, id).unwrap();
    assert_eq!(m.node_size(), 512);
    let e = PTreeMap::open(&pool, id).unwrap_err();
    assert!(matches!(e, Error::CollectionInUse { .. }), "{e}");
    drop(m);
    // Not a tree: the root object (a pointer), a byte map's header, an offset outside.
    let root = pool.root::<PPtr<PTreeMap>>().unwrap();
    let e = PTreeMap::open(&pool, root.cast()).unwrap_err();
    assert!(matches!(e, Error::NotACollection { .. }), "{e}");
    let bm = pool.transaction(daisy::PBytesMap::create_in).unwrap();
    let e = PTreeMap::open(&pool, PPtr::from_offset(bm.offset())).unwrap_err();
    assert!(matches!(e, Error::NotACollection { .. }), "{e}");
    let e = PTreeMap::open(&pool, PPtr::from_offset(1 << 40)).unwrap_err();
    assert!(matches!(e, Error::NotACollection { .. }), "{e}");
    // Unknown node sizes.
    for bad in [0u32, 100, 300, 4096] {
        let e = pool
            .transaction(|tx| PTreeMap::create_in_with(tx, bad).map(|_| ()))
            .unwrap_err();
        assert!(matches!(e, Error::Unsupported(_)), "{bad}: {e}");
    }
    // A transaction of another pool.
    let mut m = PTreeMap::open(&pool, id).unwrap();
    let e = other
        .transaction(|tx| m.insert_tx(tx, b"k", b"v").map(|_| ()))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidPointer { .. }), "{e}");
    let e = other
        .transaction(|tx| PTreeMap::view(&pool, tx, id).map(|_| ()))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidPointer { .. }), "{e}");
    // Oversized: one byte over the limit (calloc'd, never touched).
    let huge = vec![0u8; PTreeMap::MAX_ITEM_LEN + 1];
    let e = m.insert(&huge, b"").unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e}");
    let e = m.insert(b"k", &huge).unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e}");
    drop(huge);
    assert!(m.is_empty().unwrap());
    assert_ok(&m.check());
}

/// An operation inside a transaction that fails leaves nothing: not the entries, not the
/// nodes its splits allocated.
#[test]
fn a_failed_transaction_leaves_nothing() {
    let dir = tmp();
    let pool = new_pool(&dir, "f.pool");
    let id = create(&pool, 256);
    let mut m = PTreeMap::open(&pool, id).unwrap();
    for i in 0..300u32 {
        m.insert(format!("k{i:05}").as_bytes(), b"v").unwrap();
    }
    let before = contents(&m);
    let objects = pool.objects().unwrap().len();
    let r: Result<(), Error> = pool.transaction(|tx| {
        for i in 300..380u32 {
            m.insert_tx(tx, format!("k{i:05}").as_bytes(), &[7; 20])?;
        }
        for i in 0..60u32 {
            m.remove_tx(tx, format!("k{i:05}").as_bytes())?;
        }
        assert_eq!(m.len_tx(tx)?, 320);
        Err(Error::Aborted("changed my mind".into()))
    });
    assert!(matches!(r, Err(Error::Aborted(_))), "{r:?}");
    assert_eq!(contents(&m), before);
    assert_eq!(pool.objects().unwrap().len(), objects);
    assert_ok(&m.check());
    assert_no_leak(&pool, id);
}
