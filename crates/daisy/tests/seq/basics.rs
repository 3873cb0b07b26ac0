//! The operations on a small sequence, and what is refused.

use super::*;

#[test]
fn pushes_pops_indexes_ranges_and_positions() {
    let dir = tmp();
    let pool = new_pool(&dir, "b.pool");
    let id = create(&pool, PSeq::DEFAULT_CHUNK_BYTES);
    let mut s = PSeq::open(&pool, id).unwrap();
    assert!(s.is_empty().unwrap());
    assert_eq!(s.pop_front().unwrap(), None);
    assert_eq!(s.pop_back().unwrap(), None);
    assert_eq!(s.get(0).unwrap(), None);
    assert_eq!(s.push_back(b"b").unwrap(), 1);
    assert_eq!(s.push_back(b"c").unwrap(), 2);
    assert_eq!(s.push_front(b"a").unwrap(), 3);
    // LPUSH x y z puts z first.
    assert_eq!(s.push_front_many(&[b"y", b"x"]).unwrap(), 5);
    assert_eq!(s.push_back_many(&[b"", b"d"]).unwrap(), 7);
    let all: Vec<&[u8]> = vec![b"x", b"y", b"a", b"b", b"c", b"", b"d"];
    assert_eq!(s.range(0, -1).unwrap(), all);
    assert_eq!(
        s.range_rev(0, -1).unwrap(),
        all.iter().rev().copied().collect::<Vec<_>>()
    );
    assert_eq!(s.range(1, 2).unwrap(), vec![b"y".to_vec(), b"a".to_vec()]);
    assert_eq!(s.range(-2, 100).unwrap(), vec![b"".to_vec(), b"d".to_vec()]);
    assert!(s.range(5, 2).unwrap().is_empty());
    assert!(s.range(7, 9).unwrap().is_empty());
    assert_eq!(s.get(0).unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(s.get(-1).unwrap().as_deref(), Some(&b"d"[..]));
    assert_eq!(s.get(-7).unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(s.get(-8).unwrap(), None);
    assert_eq!(s.get(7).unwrap(), None);
    let fwd: Vec<Vec<u8>> = s.iter(2, false).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(fwd, all[2..].to_vec());
    let back: Vec<Vec<u8>> = s.iter(-3, true).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(
        back,
        vec![
            b"c".to_vec(),
            b"b".to_vec(),
            b"a".to_vec(),
            b"y".to_vec(),
            b"x".to_vec()
        ]
    );
    assert_eq!(s.iter(9, false).unwrap().count(), 0);

    // LPOS.
    s.push_back_many(&[b"a", b"q", b"a"]).unwrap(); // x y a b c "" d a q a
    assert_eq!(s.position(b"a", 1, 1, 0).unwrap(), vec![2]);
    assert_eq!(s.position(b"a", 2, 0, 0).unwrap(), vec![7, 9]);
    assert_eq!(s.position(b"a", -1, 2, 0).unwrap(), vec![9, 7]);
    assert_eq!(s.position(b"a", 1, 0, 3).unwrap(), vec![2]);
    assert_eq!(s.position(b"zz", 1, 0, 0).unwrap(), Vec::<u64>::new());
    assert!(matches!(
        s.position(b"a", 0, 0, 0),
        Err(Error::Unsupported(_))
    ));

    assert_eq!(s.pop_front().unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(s.pop_back().unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(
        s.pop_front_n(2).unwrap(),
        vec![b"y".to_vec(), b"a".to_vec()]
    );
    assert_eq!(s.pop_back_n(2).unwrap(), vec![b"q".to_vec(), b"a".to_vec()]);
    assert_eq!(
        s.range(0, -1).unwrap(),
        vec![b"b".to_vec(), b"c".to_vec(), b"".to_vec(), b"d".to_vec()]
    );
    s.set(2, b"empty no more").unwrap();
    assert_eq!(s.insert_before(0, b"0").unwrap(), 5);
    assert_eq!(s.insert_after(-1, b"z").unwrap(), 6);
    assert_eq!(s.insert_at(3, b"mid").unwrap(), 7);
    assert_eq!(s.remove_at(1).unwrap(), b"b");
    assert_eq!(
        s.range(0, -1).unwrap(),
        vec![
            b"0".to_vec(),
            b"c".to_vec(),
            b"mid".to_vec(),
            b"empty no more".to_vec(),
            b"d".to_vec(),
            b"z".to_vec()
        ]
    );
    assert_eq!(s.pop_back_n(100).unwrap().len(), 6);
    assert!(s.is_empty().unwrap());
    assert_ok(&s.check());
}

/// Out-of-range indexes are errors a server maps to Redis's reply; nothing changes.
#[test]
fn out_of_range_indexes_are_errors() {
    let dir = tmp();
    let pool = new_pool(&dir, "r.pool");
    let id = create(&pool, 256);
    let mut s = PSeq::open(&pool, id).unwrap();
    s.push_back_many(&[b"a", b"b"]).unwrap();
    for i in [2i64, 3, -3, i64::MIN, i64::MAX] {
        let e = s.set(i, b"x").unwrap_err();
        assert!(
            matches!(e, Error::IndexOutOfRange { index, len: 2 } if index == i),
            "{e}"
        );
        assert!(e.to_string().contains("index out of range"), "{e}");
        assert!(matches!(s.remove_at(i), Err(Error::IndexOutOfRange { .. })));
        assert!(matches!(
            s.insert_after(i, b"x"),
            Err(Error::IndexOutOfRange { .. })
        ));
    }
    assert!(matches!(
        s.insert_at(3, b"x"),
        Err(Error::IndexOutOfRange { .. })
    ));
    assert_eq!(s.range(0, -1).unwrap(), vec![b"a".to_vec(), b"b".to_vec()]);
    // An empty sequence: every index is out of range.
    s.clear().unwrap();
    assert!(matches!(
        s.set(0, b"x"),
        Err(Error::IndexOutOfRange { index: 0, len: 0 })
    ));
    assert_eq!(s.insert_at(0, b"first").unwrap(), 1);
}

/// Handles are exclusive; what is not a sequence, or is in another pool, is refused; chunk
/// sizes outside the allowed classes are refused; `check_all` finds sequences.
#[test]
fn handles_and_bad_input_are_refused() {
    let dir = tmp();
    let pool = new_pool(&dir, "h.pool");
    let id = create(&pool, 512);
    let s = PSeq::open(&pool, id).unwrap();
    assert!(matches!(
        PSeq::open(&pool, id),
        Err(Error::CollectionInUse { .. })
    ));
    let e = pool
        .transaction(|tx| PSeq::view(&pool, tx, id).map(|_| ()))
        .unwrap_err();
    assert!(matches!(e, Error::CollectionInUse { .. }), "{e}");
    drop(s);
    // Not a sequence: the root object, a byte map's header, an offset outside the heap.
    let root = pool.root::<PPtr<PSeq>>().unwrap();
    assert!(matches!(
        PSeq::open(&pool, root.cast()),
        Err(Error::NotACollection { .. })
    ));
    let map = pool.transaction(daisy::PBytesMap::create_in).unwrap();
    assert!(matches!(
        PSeq::open(&pool, map.cast()),
        Err(Error::NotACollection { .. })
    ));
    assert!(matches!(
        PSeq::open(&pool, PPtr::from_offset(u64::MAX - 7)),
        Err(Error::NotACollection { .. })
    ));
    for cb in [0u32, 64, 100, 4000, 65536, u32::MAX] {
        let r = pool.transaction(|tx| PSeq::create_in_with(tx, cb));
        assert!(matches!(r, Err(Error::Unsupported(_))), "chunk size {cb}");
    }
    // Another pool's transaction.
    let other = new_pool(&dir, "other.pool");
    let mut s = PSeq::open(&pool, id).unwrap();
    let e = other
        .transaction(|tx| s.push_back_tx(tx, b"x"))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidPointer { .. }), "{e}");
    let e = other
        .transaction(|tx| PSeq::view(&pool, tx, id).map(|_| ()))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidPointer { .. }), "{e}");
    s.push_back_many(&[b"one", b"two"]).unwrap();
    let all = daisy::check_all(&pool).unwrap();
    let c = all
        .iter()
        .find(|c| c.header == id.offset())
        .expect("found by check_all");
    assert_eq!((c.kind, c.entries, c.segments), ("sequence", 2, 1));
    assert_ok(c);
    assert_eq!(
        daisy::seq_items(&pool, id.offset()).unwrap(),
        vec![b"one".to_vec(), b"two".to_vec()]
    );
}

/// Items up to the size limit are accepted; a push logs little (the item and a few words),
/// whatever the sequence's length.
#[test]
fn a_push_logs_the_item_and_a_few_words() {
    let dir = tmp();
    let pool = new_pool(&dir, "l.pool");
    let id = create(&pool, 4096);
    let mut s = PSeq::open(&pool, id).unwrap();
    for i in 0..5000u64 {
        s.push_back(&item(i, 20)).unwrap();
    }
    drop(s);
    for (what, back) in [("tail", true), ("head", false)] {
        let used = pool
            .transaction(|tx| {
                let mut v = PSeq::view(&pool, tx, id)?;
                let before = tx.log_room();
                // Several pushes and pops: one into a fresh chunk at least.
                let mut most = 0;
                for i in 0..300u64 {
                    let b = tx.log_room();
                    if back {
                        v.push_back(tx, &item(i, 20))?;
                    } else {
                        v.push_front(tx, &item(i, 20))?;
                    }
                    most = most.max(b - tx.log_room());
                }
                let b = tx.log_room();
                v.pop_back(tx)?;
                v.pop_front(tx)?;
                let pops = b - tx.log_room();
                Ok::<_, Error>((most, pops, before - tx.log_room()))
            })
            .unwrap();
        eprintln!(
            "{what}: most logged by one push {} bytes, two pops {}, all {}",
            used.0, used.1, used.2
        );
        // A push into a chunk logs the item (16-byte entry header, 22 bytes padded to 24)
        // and the window word; the header's len word is logged once per transaction.
        assert!(used.0 <= 120, "{what}: a push logged {} bytes", used.0);
        assert!(used.1 <= 64, "{what}: two pops logged {} bytes", used.1);
    }
}
