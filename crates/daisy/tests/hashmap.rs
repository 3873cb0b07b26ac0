//! Persistent hash maps: behaviour, bad input, crashes, and property tests against std's
//! HashMap as the model.

use daisy::MapCheck;
use daisy::{Error, PBytesMap, PHashMap, PPtr, Pool, PoolOptions};
use proptest::prelude::*;
use std::collections::HashMap;

type U32Map = PHashMap<u32, u32>;

fn new_pool(dir: &tempfile::TempDir, name: &str) -> Pool {
    Pool::create(
        dir.path().join(name),
        &PoolOptions::new("test.hashmap")
            .size(64 << 20)
            .max_size(1 << 30),
    )
    .unwrap()
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("daisy-hashmap-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

fn create_u32(pool: &Pool, seed: u64) -> PPtr<U32Map> {
    let root = pool.root::<PPtr<U32Map>>().unwrap();
    pool.transaction(|tx| {
        let id = U32Map::create_in_with_seed(tx, seed)?;
        tx.write(root, &id)?;
        Ok::<_, Error>(id)
    })
    .unwrap()
}

fn create_bytes(pool: &Pool, seed: u64) -> PPtr<PBytesMap> {
    let root = pool.root::<PPtr<PBytesMap>>().unwrap();
    pool.transaction(|tx| {
        let id = PBytesMap::create_in_with_seed(tx, seed)?;
        tx.write(root, &id)?;
        Ok::<_, Error>(id)
    })
    .unwrap()
}

fn assert_ok(c: &MapCheck) {
    assert!(c.problems.is_empty(), "map check found: {:?}", c.problems);
}

fn contents(m: &U32Map) -> HashMap<u32, u32> {
    m.iter().unwrap().map(|e| e.unwrap()).collect()
}

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

#[test]
fn committed_operations_survive_a_crash() {
    let dir = tmp();
    let path = dir.path().join("e.pool");
    let pool = new_pool(&dir, "e.pool");
    let id = create_u32(&pool, 4);
    let mut m = U32Map::open(&pool, id).unwrap();
    let mut model = HashMap::new();
    for i in 0..30_000u32 {
        let k = i.wrapping_mul(0x9E37_79B9) ^ 0x55;
        m.insert(k, !i).unwrap();
        model.insert(k, !i);
        if i % 7 == 0 {
            let r = i / 2;
            let k = r.wrapping_mul(0x9E37_79B9) ^ 0x55;
            assert_eq!(m.remove(&k).unwrap(), model.remove(&k));
        }
    }
    drop(m);
    pool.crash_for_test();
    let pool = Pool::open(&path, "test.hashmap").unwrap();
    let m = U32Map::open(&pool, id).unwrap();
    assert_eq!(contents(&m), model);
    assert_ok(&m.check());
}

/// The map holds exactly `model` (a short message when not: these maps are large).
fn assert_holds(m: &U32Map, model: &HashMap<u32, u32>) {
    let got = contents(m);
    let wrong: Vec<_> = model
        .iter()
        .filter(|(k, v)| got.get(k) != Some(v))
        .map(|(k, v)| (*k, *v, got.get(k).copied()))
        .collect();
    let extra = got.keys().filter(|k| !model.contains_key(k)).count();
    assert!(
        wrong.is_empty() && extra == 0,
        "{} entries missing or wrong (key, want, got), first: {:?}; {extra} unexpected",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

/// The header's `flags` word (bit 0: `len` may lag in-place writes).
fn map_flags(pool: &Pool, id: PPtr<U32Map>) -> u32 {
    let mut b = [0u8; 4];
    pool.read_bytes(id.offset() + 36, &mut b);
    u32::from_le_bytes(b)
}

/// 8-byte entries are written in place (one atomic store, no log): they survive a crash,
/// recovery never replays an older transaction over them, and a crash leaves `len` to be
/// counted again.
#[test]
fn in_place_writes_survive_a_crash_and_len_is_recounted() {
    let dir = tmp();
    let path = dir.path().join("p.pool");
    let pool = new_pool(&dir, "p.pool");
    let id = create_u32(&pool, 21);
    let mut m = U32Map::open(&pool, id).unwrap();
    let key = |i: u32| i.wrapping_mul(0x9E37_79B9) ^ 0x77;
    let mut model = HashMap::new();
    for i in 0..20_000u32 {
        assert_eq!(m.insert(key(i), i).unwrap(), None);
        model.insert(key(i), i);
    }
    for i in (1..20_000u32).step_by(7) {
        assert_eq!(m.remove(&key(i)).unwrap(), model.remove(&key(i)));
    }
    assert_eq!(map_flags(&pool, id), 1, "in-place writes mark len stale");
    // Last, remove a key from a full bucket: a transaction (two fences: its commit and the
    // flush of its applied lines) that moves entries back; re-inserting the key then stores in
    // place into a slot that transaction's record wrote. Nothing newer covers that record, so
    // without the barrier before in-place writes, recovery would replay it over the key.
    daisy::counters::enable(true);
    let mut moved_back = false;
    for i in (0..20_000u32).filter(|i| i % 7 != 1) {
        daisy::counters::take();
        assert_eq!(m.remove(&key(i)).unwrap(), Some(i));
        let fences = daisy::counters::take().fences;
        assert_eq!(m.insert(key(i), !i).unwrap(), None);
        model.insert(key(i), !i);
        if fences >= 2 {
            moved_back = true;
            break;
        }
    }
    assert!(moved_back, "no remove needed a transaction");
    assert_eq!(m.len().unwrap(), model.len() as u64);
    pool.crash_for_test();
    // The handle cannot make `len` exact on the poisoned pool: the flag stays, as after a crash.
    drop(m);

    let pool = Pool::open(&path, "test.hashmap").unwrap();
    assert_eq!(map_flags(&pool, id), 1);
    let mut m = U32Map::open(&pool, id).unwrap();
    assert_holds(&m, &model);
    assert_ok(&m.check());
    assert_eq!(m.len().unwrap(), model.len() as u64, "counted at first use");
    assert_eq!(m.insert(key(1), 9).unwrap(), None);
    model.insert(key(1), 9);
    assert_eq!(m.len().unwrap(), model.len() as u64);
    drop(m);
    assert_eq!(
        map_flags(&pool, id),
        0,
        "dropping the handle makes len exact"
    );
    let m = U32Map::open(&pool, id).unwrap();
    assert_eq!(m.len().unwrap(), model.len() as u64);
    assert_holds(&m, &model);
    assert_ok(&m.check());
}

/// A map operation made while the thread holds an open transaction that wrote the same map
/// stays logged: an in-place write then, and the barrier it would consume, could let recovery
/// replay the outer transaction (committed later) over a newer in-place value.
#[test]
fn map_operations_inside_an_open_transaction_stay_safe() {
    let dir = tmp();
    let path = dir.path().join("n.pool");
    let pool = new_pool(&dir, "n.pool");
    let id = create_u32(&pool, 23);
    let mut m = U32Map::open(&pool, id).unwrap();
    assert_eq!(m.insert(100, 1).unwrap(), None);
    pool.transaction(|tx| {
        m.insert_tx(tx, 1, 10)?;
        // Nested in the open transaction: its own transaction on another lane.
        m.insert(2, 20)?;
        Ok::<_, Error>(())
    })
    .unwrap();
    // In place now, into the slot the outer transaction's record wrote: the barrier before it
    // must retire that record.
    assert_eq!(m.insert(1, 11).unwrap(), Some(10));
    let mut model: HashMap<u32, u32> = [(100, 1), (1, 11), (2, 20)].into_iter().collect();
    // (`len` is not asserted here: a nested transaction and the one around it each add to
    // the length they read, so nesting writes to one map loses a count; the crash below makes
    // the next handle count the entries.)
    pool.crash_for_test();
    drop(m);
    let pool = Pool::open(&path, "test.hashmap").unwrap();
    let m = U32Map::open(&pool, id).unwrap();
    assert_holds(&m, &model);
    assert_eq!(m.len().unwrap(), 3);
    assert_ok(&m.check());
    // The length stays exact when a handle is dropped inside a transaction that changes the
    // map after the handle's in-place write: the handle leaves `len` to be counted then.
    drop(m);
    pool.transaction(|tx| {
        let mut m = U32Map::open(&pool, id)?;
        assert_eq!(m.insert(5, 50)?, None);
        m.insert_tx(tx, 6, 60)?;
        Ok::<_, Error>(())
    })
    .unwrap();
    model.insert(5, 50);
    model.insert(6, 60);
    let m = U32Map::open(&pool, id).unwrap();
    assert_holds(&m, &model);
    assert_eq!(m.len().unwrap(), 5);
    assert_ok(&m.check());
    drop(m);
    let m = U32Map::open(&pool, id).unwrap();
    assert_eq!(m.len().unwrap(), 5);
    assert_ok(&m.check());
}

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

#[derive(Clone, Debug)]
enum MapOp {
    Insert(u32, u32),
    Remove(u32),
    Get(u32),
    /// Several operations in one transaction, committed or aborted.
    Tx(Vec<(bool, u32, u32)>, bool),
    /// Operations as a batch.
    Batch(Vec<(bool, u32, u32)>),
    Clear,
    Crash,
}

fn key() -> impl Strategy<Value = u32> {
    // Dense small keys collide in buckets; u32::MAX is the reserved pattern.
    prop_oneof![8 => 0u32..3000, 1 => Just(u32::MAX), 1 => any::<u32>()]
}

fn map_op() -> impl Strategy<Value = MapOp> {
    let kv = || (any::<bool>(), key(), any::<u32>());
    prop_oneof![
        20 => (key(), any::<u32>()).prop_map(|(k, v)| MapOp::Insert(k, v)),
        6 => key().prop_map(MapOp::Remove),
        3 => key().prop_map(MapOp::Get),
        2 => (prop::collection::vec(kv(), 1..40), prop::bool::weighted(0.3))
            .prop_map(|(o, a)| MapOp::Tx(o, a)),
        2 => prop::collection::vec(kv(), 1..3000).prop_map(MapOp::Batch),
        1 => Just(MapOp::Clear),
        1 => Just(MapOp::Crash),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn fixed_map_matches_std_hashmap(ops in prop::collection::vec(map_op(), 1..120), seed in any::<u64>()) {
        let dir = tmp();
        let path = dir.path().join("p.pool");
        let mut pool = new_pool(&dir, "p.pool");
        let id = create_u32(&pool, seed);
        let mut m = U32Map::open(&pool, id).unwrap();
        let mut model: HashMap<u32, u32> = HashMap::new();
        for op in ops {
            match op {
                MapOp::Insert(k, v) => prop_assert_eq!(m.insert(k, v).unwrap(), model.insert(k, v)),
                MapOp::Remove(k) => prop_assert_eq!(m.remove(&k).unwrap(), model.remove(&k)),
                MapOp::Get(k) => prop_assert_eq!(m.get(&k).unwrap(), model.get(&k).copied()),
                MapOp::Tx(list, abort) => {
                    let mut staged = model.clone();
                    let r: Result<(), Error> = pool.transaction(|tx| {
                        for &(ins, k, v) in &list {
                            if ins {
                                assert_eq!(m.insert_tx(tx, k, v)?, staged.insert(k, v));
                            } else {
                                assert_eq!(m.remove_tx(tx, &k)?, staged.remove(&k));
                            }
                        }
                        if abort { Err(Error::Aborted("prop".into())) } else { Ok(()) }
                    });
                    prop_assert_eq!(r.is_ok(), !abort);
                    if !abort {
                        model = staged;
                    }
                }
                MapOp::Batch(list) => {
                    m.batch(|b| {
                        for &(ins, k, v) in &list {
                            if ins {
                                assert_eq!(b.insert(k, v)?, model.insert(k, v));
                            } else {
                                assert_eq!(b.remove(&k)?, model.remove(&k));
                            }
                        }
                        Ok(())
                    }).unwrap();
                }
                MapOp::Clear => {
                    m.clear().unwrap();
                    model.clear();
                }
                MapOp::Crash => {
                    drop(m);
                    pool.crash_for_test();
                    pool = Pool::open(&path, "test.hashmap").unwrap();
                    m = U32Map::open(&pool, id).unwrap();
                }
            }
            prop_assert_eq!(m.len().unwrap(), model.len() as u64);
        }
        prop_assert_eq!(contents(&m), model.clone());
        let c = m.check();
        prop_assert!(c.problems.is_empty(), "{:?}", c.problems);
        let report = pool.check(Some(&c.objects.iter().copied().chain([pool.root::<PPtr<U32Map>>().unwrap().offset()]).collect::<Vec<_>>()));
        prop_assert!(report.ok(), "{:?}", report);
    }

    #[test]
    fn bytes_map_matches_std_hashmap(
        ops in prop::collection::vec((0u8..4, 0u16..400, 0usize..200, any::<u8>()), 1..400),
        seed in any::<u64>(),
    ) {
        let dir = tmp();
        let pool = new_pool(&dir, "q.pool");
        let id = create_bytes(&pool, seed);
        let mut m = PBytesMap::open(&pool, id).unwrap();
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for (op, k, vlen, byte) in ops {
            let key = format!("k{k}").into_bytes();
            match op {
                0 | 1 => {
                    let v = vec![byte; vlen];
                    prop_assert_eq!(m.insert(&key, &v).unwrap(), model.insert(key, v).is_some());
                }
                2 => prop_assert_eq!(m.remove(&key).unwrap(), model.remove(&key).is_some()),
                _ => prop_assert_eq!(m.get(&key).unwrap(), model.get(&key).cloned()),
            }
        }
        let got: HashMap<Vec<u8>, Vec<u8>> = m.iter().unwrap().map(|e| e.unwrap()).collect();
        prop_assert_eq!(got, model);
        let c = m.check();
        prop_assert!(c.problems.is_empty(), "{:?}", c.problems);
        let mut reach = c.objects.clone();
        reach.push(pool.root::<PPtr<PBytesMap>>().unwrap().offset());
        let report = pool.check(Some(&reach));
        prop_assert!(report.ok(), "{:?}", report);
    }
}

/// The checker can fail: a duplicated slot, a wrong length and a displaced entry are reported
/// (by the map's own check and by `check_all`, which `daisy pool check` runs).
#[test]
fn check_reports_damaged_maps() {
    let dir = tmp();
    let pool = new_pool(&dir, "k.pool");
    let id = create_u32(&pool, 11);
    let mut m = U32Map::open(&pool, id).unwrap();
    for k in 0..300u32 {
        m.insert(k, k).unwrap();
    }
    assert_ok(&m.check());
    // Dropping the handle makes `len` exact again (in-place inserts left it stale), so the
    // check compares it with the entries.
    drop(m);
    let m = U32Map::open(&pool, id).unwrap();
    let seg = pool
        .objects()
        .unwrap()
        .into_iter()
        .find(|o| o.size == 16384)
        .expect("one segment")
        .off;
    let mut img = vec![0u8; 16384];
    pool.read_bytes(seg, &mut img);
    let empty = |s: &[u8]| s[..4] == [0xFF; 4];
    // A bucket with a live slot and a free one: copy the live slot into the free one.
    let (live, free) = (0..256)
        .find_map(|b| {
            let slots: Vec<usize> = (0..8).map(|s| b * 64 + s * 8).collect();
            let live = slots.iter().copied().find(|&o| !empty(&img[o..o + 8]))?;
            let free = slots.iter().copied().find(|&o| empty(&img[o..o + 8]))?;
            Some((live, free))
        })
        .expect("a bucket with both");
    let entry = img[live..live + 8].to_vec();
    pool.transaction(|tx| tx.write_bytes(seg + free as u64, &entry))
        .unwrap();
    let c = m.check();
    assert!(
        c.problems.iter().any(|p| p.contains("stored twice")),
        "{:?}",
        c.problems
    );
    assert!(
        c.problems.iter().any(|p| p.contains("header len")),
        "{:?}",
        c.problems
    );
    let all = daisy::check_all(&pool).unwrap();
    assert!(!all[0].problems.is_empty());
    // Undo, then move an entry far from its home bucket.
    pool.transaction(|tx| tx.write_bytes(seg + free as u64, &[0xFF; 8]))
        .unwrap();
    assert_ok(&m.check());
    let far = (live + 128 * 64) % 16384;
    let far = (0..8)
        .map(|s| (far / 64) * 64 + s * 8)
        .find(|&o| empty(&img[o..o + 8]))
        .expect("a free slot half a segment away");
    pool.transaction(|tx| {
        tx.write_bytes(seg + far as u64, &entry)?;
        tx.write_bytes(seg + live as u64, &[0xFF; 8])
    })
    .unwrap();
    let c = m.check();
    assert!(
        c.problems.iter().any(|p| p.contains("from its home")),
        "{:?}",
        c.problems
    );
}

/// Damaged map objects (header fields, directory, segments, entries) give errors or check
/// problems, never a panic or an absurd allocation. Seeds are printed by the assertion.
#[test]
fn damaged_maps_give_errors_not_panics() {
    use rand::{Rng, SeedableRng};
    let dir = tmp();
    let path = dir.path().join("dmg.pool");
    let (fid, bid) = {
        let pool = new_pool(&dir, "dmg.pool");
        let root = pool.root::<[u64; 2]>().unwrap();
        let (fid, bid) = pool
            .transaction(|tx| {
                let f = U32Map::create_in_with_seed(tx, 3)?;
                let b = PBytesMap::create_in_with_seed(tx, 4)?;
                tx.write(root, &[f.offset(), b.offset()])?;
                Ok::<_, Error>((f, b))
            })
            .unwrap();
        let mut f = U32Map::open(&pool, fid).unwrap();
        f.batch(|b| {
            for k in 0..6000u32 {
                b.insert(k.wrapping_mul(0x9E37_79B9), k)?;
            }
            Ok(())
        })
        .unwrap();
        let mut b = PBytesMap::open(&pool, bid).unwrap();
        for k in 0..400u32 {
            b.insert(
                format!("key{k}").as_bytes(),
                &vec![k as u8; (k % 50) as usize],
            )
            .unwrap();
        }
        (fid, bid)
    };
    let clean = std::fs::read(&path).unwrap();
    let objects: Vec<u64> = {
        let pool = Pool::open(&path, "test.hashmap").unwrap();
        let mut o = daisy::map_objects(&pool, fid.offset()).unwrap();
        o.extend(daisy::map_objects(&pool, bid.offset()).unwrap());
        o
    };
    let bad = dir.path().join("bad.pool");
    for seed in 0..60u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut img = clean.clone();
        for _ in 0..rng.gen_range(1..4) {
            let obj = objects[rng.gen_range(0..objects.len())] as usize;
            // Mostly the first bytes of an object (header fields, directory words, lengths).
            let at = obj
                + if rng.gen_bool(0.5) {
                    rng.gen_range(0..96)
                } else {
                    rng.gen_range(0..16384)
                };
            let at = at.min(img.len() - 8);
            let v: u64 = match rng.gen_range(0..4) {
                0 => rng.gen(),
                1 => u64::MAX,
                2 => rng.gen_range(0..64),
                _ => 1 << rng.gen_range(0..63),
            };
            img[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        std::fs::write(&bad, &img).unwrap();
        let Ok(pool) = Pool::open(&bad, "test.hashmap") else {
            continue;
        };
        let _ = daisy::check_all(&pool);
        if let Ok(mut f) = U32Map::open(&pool, fid) {
            let _ = f.check();
            if let Ok(it) = f.iter() {
                let _ = it.take(100_000).count();
            }
            for k in 0..50u32 {
                let _ = f.get(&k.wrapping_mul(0x9E37_79B9));
                let _ = f.insert(k ^ 0x5555, k);
                let _ = f.remove(&k.wrapping_mul(0x9E37_79B9));
            }
            let _ = f.batch(|b| {
                for k in 0..300u32 {
                    b.insert(k ^ 0xAAAA, k)?;
                }
                Ok(())
            });
            let _ = f.clear();
        }
        if let Ok(mut b) = PBytesMap::open(&pool, bid) {
            let _ = b.check();
            if let Ok(it) = b.iter() {
                let _ = it.take(100_000).count();
            }
            for k in 0..50u32 {
                let key = format!("key{k}");
                let _ = b.get(key.as_bytes());
                let _ = b.insert(key.as_bytes(), b"v");
                let _ = b.remove(format!("key{}", k + 100).as_bytes());
            }
            let _ = b.clear();
        }
    }
}

/// A batch whose internal commit fails stops there: every later call returns an error, and the
/// map holds what the batch committed before (here nothing), never a half-written directory.
#[test]
fn batch_stops_after_a_failed_commit() {
    let dir = tmp();
    let pool = Pool::create(
        dir.path().join("small-log.pool"),
        &PoolOptions::new("test.hashmap")
            .size(64 << 20)
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
        // Fill the batch's redo record to the last few bytes with the caller's own writes.
        let mut size = 4096usize;
        while size > 0 {
            if b.tx()?.write_bytes(root.offset(), &vec![1u8; size]).is_ok() {
                break;
            }
            size -= 8;
        }
        assert!(size > 0);
        // The commit cannot add the map's length and directory now: it fails, and the batch is
        // over.
        let e = b.sync().unwrap_err();
        assert!(matches!(e, Error::TxTooLarge { .. }), "{e}");
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
    assert_eq!(m.len().unwrap(), k as u64);
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

/// `check` verifies that a byte map's entry pointers name allocated objects: a pointer into
/// the middle of a block, or to a block that was freed, is reported.
#[test]
fn byte_map_check_finds_entries_that_are_not_objects() {
    let dir = tmp();
    let pool = new_pool(&dir, "ptrs.pool");
    let id = create_bytes(&pool, 9);
    let mut b = PBytesMap::open(&pool, id).unwrap();
    for k in 0..20u32 {
        b.insert(format!("key{k}").as_bytes(), b"value").unwrap();
    }
    assert!(b.check().problems.is_empty());
    let seg = pool
        .objects()
        .unwrap()
        .into_iter()
        .find(|o| o.size == 16384)
        .expect("one segment")
        .off;
    let mut img = vec![0u8; 16384];
    pool.read_bytes(seg, &mut img);
    // Slots are (stored hash, entry pointer), 16 bytes.
    let at = (0..1024)
        .map(|i| i * 16)
        .find(|&a| img[a + 8..a + 16] != [0; 8])
        .expect("a used slot");
    let ptr = u64::from_le_bytes(img[at + 8..at + 16].try_into().unwrap());
    let freed = pool.transaction(|tx| tx.alloc_bytes(&[0u8; 40])).unwrap();
    pool.transaction(|tx| tx.free(freed)).unwrap();
    for (target, why) in [
        (ptr + 8, "not the start of a block"),
        (freed.offset(), "a free block"),
    ] {
        pool.transaction(|tx| tx.write_bytes(seg + at as u64 + 8, &target.to_le_bytes()))
            .unwrap();
        let c = b.check();
        assert!(
            c.problems.iter().any(|p| p.contains(why)),
            "{why}: {:?}",
            c.problems
        );
    }
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
            (0..50u64)
                .map(|r| m.random_key_tx(tx, r.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
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
        .transaction(|tx| m.random_key_tx(tx, 5))
        .unwrap()
        .is_none());
}
