//! Transaction-scoped views: a tree created and filled in one transaction, reads that see
//! the transaction's writes, aborts that leave nothing, exclusion with handles.

use super::*;
use std::ops::Bound::{Included, Unbounded};

#[test]
fn views_work_inside_the_callers_transaction() {
    let dir = tmp();
    let pool = new_pool(&dir, "view.pool");
    let root = pool.root::<PPtr<PTreeMap>>().unwrap();
    let id = pool
        .transaction(|tx| {
            let id = PTreeMap::create_in_with(tx, 256)?;
            let mut v = PTreeMap::view(&pool, tx, id)?;
            assert!(v.is_empty(tx)?);
            for i in 0..2000u32 {
                v.insert(tx, format!("f{i:05}").as_bytes(), &i.to_le_bytes())?;
            }
            // Reads see this transaction's writes.
            assert_eq!(v.len(tx)?, 2000);
            assert_eq!(v.get(tx, b"f00007")?, Some(7u32.to_le_bytes().to_vec()));
            assert_eq!(v.remove(tx, b"f00007")?, Some(7u32.to_le_bytes().to_vec()));
            assert!(!v.contains_key(tx, b"f00007")?);
            assert_eq!(v.rank(tx, b"f00010")?, (9, true));
            assert_eq!(v.entry_at_rank(tx, 9)?.unwrap().0, b"f00010");
            assert_eq!(
                v.count_range(tx, Included(&b"f00100"[..]), Unbounded)?,
                1900
            );
            assert_eq!(v.lower_rank(tx, Included(&b"f00100"[..]))?, 99);
            assert_eq!(v.upper_rank(tx, Unbounded)?, 1999);
            let r = v.range(tx, Included(&b"f01990"[..]), Unbounded, true, 2, 3)?;
            assert_eq!(
                r.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
                vec![b"f01997".to_vec(), b"f01996".to_vec(), b"f01995".to_vec()]
            );
            assert_eq!(v.range_by_rank(tx, 0, 1, true)?.len(), 2);
            assert_eq!(v.first(tx)?.unwrap().0, b"f00000");
            assert_eq!(v.pop_first(tx)?.unwrap().0, b"f00000");
            assert_eq!(v.last(tx)?.unwrap().0, b"f01999");
            assert_eq!(v.pop_last(tx)?.unwrap().0, b"f01999");
            assert_eq!(v.remove_range_by_rank(tx, 0, 9)?, 10);
            assert_eq!(v.remove_range(tx, Included(&b"f01900"[..]), Unbounded)?, 99);
            assert_eq!(v.len(tx)?, 1888);
            tx.write(root, &id)?;
            Ok::<_, Error>(id)
        })
        .unwrap();
    {
        let m = PTreeMap::open(&pool, id).unwrap();
        assert_eq!(m.len().unwrap(), 1888);
        assert_ok(&m.check());
        // Claimed by the handle: no view meanwhile.
        let e = pool
            .transaction(|tx| PTreeMap::view(&pool, tx, id).map(|_| ()))
            .unwrap_err();
        assert!(matches!(e, Error::CollectionInUse { .. }), "{e}");
    }
    let before = {
        let m = PTreeMap::open(&pool, id).unwrap();
        contents(&m)
    };
    // A failed transaction leaves nothing of what its view did: not the entries, not the
    // nodes its splits made, not the merges.
    let objects = pool.objects().unwrap().len();
    let r: Result<(), Error> = pool.transaction(|tx| {
        let mut v = PTreeMap::view(&pool, tx, id)?;
        for i in 0..500u32 {
            v.insert(tx, format!("g{i:05}").as_bytes(), &[1; 30])?;
        }
        v.remove_range_by_rank(tx, 0, 1000)?;
        assert!(PTreeMap::view(&pool, tx, id).is_err(), "a second view");
        Err(Error::Aborted("no".into()))
    });
    assert!(r.is_err());
    assert_eq!(pool.objects().unwrap().len(), objects);
    let m = PTreeMap::open(&pool, id).unwrap();
    assert_eq!(contents(&m), before);
    assert_ok(&m.check());
    assert_no_leak(&pool, id);
}

/// xorshift64: the scenario's random choices, reproducible from the printed seed.
fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// One view used for many operations per transaction, across transactions, some of which
/// abort: every read through it matches a model (the view's DRAM node cache must follow
/// every write of its transaction, and forget an aborted one), and the tree ends sound.
#[test]
fn a_view_reused_across_transactions_and_aborts_matches_a_model() {
    for (seed, node_size) in [(0x5eed_0001u64, 256u32), (0x5eed_0002, 1024), (77, 512)] {
        println!("seed {seed:#x}, nodes of {node_size} bytes");
        let dir = tmp();
        let pool = new_pool(&dir, "reuse.pool");
        let id = create(&pool, node_size);
        let mut v = pool
            .transaction(|tx| PTreeMap::view(&pool, tx, id))
            .unwrap();
        let mut model = Model::new();
        let mut s = seed;
        let key = |s: &mut u64| -> Vec<u8> {
            let n = next(s) % 3000;
            match next(s) % 8 {
                // Long keys live outside the node (outline entries).
                0 => format!("long-key-{n:06}-{}", "x".repeat((n % 40) as usize)).into_bytes(),
                _ => zkey((n % 700) as f64, format!("m{n}").as_bytes()),
            }
        };
        for round in 0..60 {
            let abort = round % 7 == 3;
            let mut m = model.clone();
            let r: Result<(), Error> = pool.transaction(|tx| {
                for _ in 0..200 {
                    match next(&mut s) % 10 {
                        0..=3 => {
                            let k = key(&mut s);
                            let val = vec![next(&mut s) as u8; (next(&mut s) % 60) as usize];
                            let had = v.insert(tx, &k, &val)?;
                            assert_eq!(had, m.insert(k, val).is_some());
                        }
                        4 => {
                            let k = key(&mut s);
                            assert_eq!(v.remove(tx, &k)?, m.remove(&k));
                        }
                        5 | 6 => {
                            let from = match m
                                .keys()
                                .nth((next(&mut s) % (m.len() as u64 + 1)) as usize)
                            {
                                Some(k) => k.clone(),
                                None => key(&mut s),
                            };
                            let to = key(&mut s);
                            let val = vec![7u8; (next(&mut s) % 20) as usize];
                            let moved = v.move_key(tx, &from, &to, &val)?;
                            assert_eq!(moved, m.remove(&from).is_some());
                            if moved {
                                m.insert(to, val);
                            }
                        }
                        7 => {
                            let want = m.pop_first();
                            assert_eq!(v.pop_first(tx)?, want);
                        }
                        8 => {
                            let want = m.pop_last();
                            assert_eq!(v.pop_last(tx)?, want);
                        }
                        _ => {
                            let a = next(&mut s) % (m.len() as u64 + 1);
                            let b = a + next(&mut s) % 40;
                            let keys: Vec<Vec<u8>> = m
                                .keys()
                                .skip(a as usize)
                                .take((b - a + 1) as usize)
                                .cloned()
                                .collect();
                            for k in &keys {
                                m.remove(k);
                            }
                            assert_eq!(v.remove_range_by_rank(tx, a, b)?, keys.len() as u64);
                        }
                    }
                    // Reads through the cached nodes.
                    let len = m.len() as u64;
                    assert_eq!(v.len(tx)?, len);
                    if len > 0 {
                        let r = next(&mut s) % len;
                        let (k, val) = m.iter().nth(r as usize).unwrap();
                        assert_eq!(v.entry_at_rank(tx, r)?, Some((k.clone(), val.clone())));
                        assert_eq!(v.rank(tx, k)?, (r, true));
                        assert_eq!(v.get(tx, k)?.as_ref(), Some(val));
                    }
                }
                assert_eq!(v.range_by_rank(tx, 0, u64::MAX, false)?, model_vec(&m));
                if abort {
                    return Err(Error::Aborted("scenario".into()));
                }
                Ok(())
            });
            assert_eq!(r.is_err(), abort, "seed {seed:#x} round {round}: {r:?}");
            if !abort {
                model = m;
            }
        }
        let all = pool
            .transaction(|tx| v.range_by_rank(tx, 0, u64::MAX, false))
            .unwrap();
        assert_eq!(all, model_vec(&model), "seed {seed:#x}");
        drop(v);
        let t = PTreeMap::open(&pool, id).unwrap();
        assert_eq!(contents(&t), model_vec(&model));
        assert_ok(&t.check());
    }
}
