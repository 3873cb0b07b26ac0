//! Property tests: random operations (transactions, batches, clears, crashes) against std's
//! HashMap as the model.

use super::*;
use proptest::prelude::*;

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
    /// `reserve` for that many entries.
    Reserve(u32),
    /// A batch that reserves room first, then fails (or the process dies) before its commit:
    /// nothing of it stays (a batch into an empty map fills its segments in place).
    FailedBatch(u32, Vec<(bool, u32, u32)>, bool),
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
        1 => (0u32..20_000).prop_map(MapOp::Reserve),
        2 => (0u32..20_000, prop::collection::vec(kv(), 1..40), any::<bool>())
            .prop_map(|(r, o, c)| MapOp::FailedBatch(r, o, c)),
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
                MapOp::Reserve(n) => {
                    m.reserve(n as u64).unwrap();
                }
                MapOp::FailedBatch(n, list, crash) => {
                    let mut staged = model.clone();
                    let r: Result<(), Error> = m.batch(|b| {
                        b.reserve(n as u64)?;
                        for &(ins, k, v) in &list {
                            if ins {
                                assert_eq!(b.insert(k, v)?, staged.insert(k, v));
                            } else {
                                assert_eq!(b.remove(&k)?, staged.remove(&k));
                            }
                        }
                        if crash {
                            pool.clone().crash_for_test();
                        }
                        Err(Error::Aborted("prop".into()))
                    });
                    prop_assert!(r.is_err());
                    if crash {
                        drop(m);
                        pool.crash_for_test();
                        pool = Pool::open(&path, "test.hashmap").unwrap();
                        m = U32Map::open(&pool, id).unwrap();
                    }
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
