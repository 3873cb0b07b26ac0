//! Property tests: random operation sequences (inserts, removals, pops, range removals,
//! transactions that commit or abort, clears, crashes) against std's BTreeMap as the model,
//! with ranks and ranges compared along the way and `check` after each sequence.

use super::*;
use proptest::prelude::*;
use std::ops::Bound;

#[derive(Clone, Debug)]
enum Op {
    Insert(u32, u16),
    Remove(u32),
    /// `move_key(from, to, value)`: the entry of `from` replaced by one for `to`.
    Move(u32, u32, u16),
    Get(u32),
    PopFirst,
    PopLast,
    /// Ranks start..=end.
    RemoveRanks(u16, u16),
    /// Keys between two bounds (kinds 0 unbounded, 1 included, 2 excluded).
    RemoveRange(u32, u8, u32, u8),
    Rank(u32),
    Range(u32, u8, u32, u8, bool, u8, u8),
    RangeByRank(u16, u16, bool),
    /// Several inserts and removals in one transaction, committed or aborted.
    Tx(Vec<(bool, u32, u16)>, bool),
    Clear,
    Crash,
}

/// Key number `k` as bytes: mostly short keys sharing prefixes, some long (outline), a few
/// that are prefixes of others.
fn key_bytes(k: u32) -> Vec<u8> {
    match k % 16 {
        0 => {
            // Long keys that share a 40-byte prefix: long separators.
            let mut v = vec![b'L'; 40];
            v.extend_from_slice(format!("{k:08}").as_bytes());
            v
        }
        1 => format!("{}", k / 16).into_bytes(), // prefixes of longer keys
        2 => vec![b'z'; 20 + (k as usize % 300)],
        _ => format!("key:{k:06}").into_bytes(),
    }
}

fn value_bytes(k: u32, v: u16) -> Vec<u8> {
    match v % 8 {
        0..=4 => Vec::new(),
        5 => vec![(k ^ v as u32) as u8; (v % 40) as usize],
        6 => vec![v as u8; 100 + (v % 500) as usize],
        _ => v.to_le_bytes().to_vec(),
    }
}

fn bound(k: u32, kind: u8) -> Bound<Vec<u8>> {
    match kind % 3 {
        0 => Bound::Unbounded,
        1 => Bound::Included(key_bytes(k)),
        _ => Bound::Excluded(key_bytes(k)),
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
    }
}

/// The model's entries between two bounds (empty when the bounds cross, as the tree says).
fn model_range(m: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter()
        .filter(|(k, _)| match lo {
            Bound::Unbounded => true,
            Bound::Included(l) => *k >= l,
            Bound::Excluded(l) => *k > l,
        })
        .filter(|(k, _)| match hi {
            Bound::Unbounded => true,
            Bound::Included(h) => *k <= h,
            Bound::Excluded(h) => *k < h,
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn key() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..600, 1 => 0u32..5000]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (key(), any::<u16>()).prop_map(|(k, v)| Op::Insert(k, v)),
        8 => key().prop_map(Op::Remove),
        8 => (key(), key(), any::<u16>()).prop_map(|(a, b, v)| Op::Move(a, b, v)),
        3 => key().prop_map(Op::Get),
        2 => Just(Op::PopFirst),
        2 => Just(Op::PopLast),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Op::RemoveRanks(a % 400, a % 400 + b % 120)),
        2 => (key(), any::<u8>(), key(), any::<u8>()).prop_map(|(a, x, b, y)| Op::RemoveRange(a, x, b, y)),
        3 => key().prop_map(Op::Rank),
        3 => (key(), any::<u8>(), key(), any::<u8>(), any::<bool>(), any::<u8>(), any::<u8>())
            .prop_map(|(a, x, b, y, r, o, l)| Op::Range(a, x, b, y, r, o, l)),
        2 => (any::<u16>(), any::<u16>(), any::<bool>()).prop_map(|(a, b, r)| Op::RangeByRank(a % 500, b % 500, r)),
        3 => (prop::collection::vec((any::<bool>(), key(), any::<u16>()), 1..60), prop::bool::weighted(0.3))
            .prop_map(|(o, a)| Op::Tx(o, a)),
        1 => Just(Op::Clear),
        1 => Just(Op::Crash),
    ]
}

fn run(ops: Vec<Op>, node_size: u32) -> Result<(), TestCaseError> {
    let dir = tmp();
    let path = dir.path().join("p.pool");
    let mut pool = new_pool(&dir, "p.pool");
    let id = create(&pool, node_size);
    let mut m = PTreeMap::open(&pool, id).unwrap();
    let mut model = Model::new();
    for op in ops {
        let desc = format!("{op:?}");
        match op {
            Op::Insert(k, v) => {
                let (k, v) = (key_bytes(k), value_bytes(k, v));
                prop_assert_eq!(m.insert(&k, &v).unwrap(), model.insert(k, v).is_some());
            }
            Op::Remove(k) => {
                let k = key_bytes(k);
                prop_assert_eq!(m.remove(&k).unwrap(), model.remove(&k));
            }
            Op::Move(a, b, v) => {
                let (from, to, v) = (key_bytes(a), key_bytes(b), value_bytes(b, v));
                let had = model.remove(&from).is_some();
                if had {
                    model.insert(to.clone(), v.clone());
                }
                prop_assert_eq!(m.move_key(&from, &to, &v).unwrap(), had);
            }
            Op::Get(k) => {
                let k = key_bytes(k);
                prop_assert_eq!(m.get(&k).unwrap(), model.get(&k).cloned());
                prop_assert_eq!(m.contains_key(&k).unwrap(), model.contains_key(&k));
            }
            Op::PopFirst => prop_assert_eq!(m.pop_first().unwrap(), model.pop_first()),
            Op::PopLast => prop_assert_eq!(m.pop_last().unwrap(), model.pop_last()),
            Op::RemoveRanks(a, b) => {
                let want: Vec<Vec<u8>> = model
                    .keys()
                    .skip(a as usize)
                    .take((b - a) as usize + 1)
                    .cloned()
                    .collect();
                prop_assert_eq!(
                    m.remove_range_by_rank(a as u64, b as u64).unwrap(),
                    want.len() as u64
                );
                for k in want {
                    model.remove(&k);
                }
            }
            Op::RemoveRange(a, x, b, y) => {
                let (lo, hi) = (bound(a, x), bound(b, y));
                let want = model_range(&model, &lo, &hi);
                prop_assert_eq!(
                    m.remove_range(as_ref(&lo), as_ref(&hi)).unwrap(),
                    want.len() as u64
                );
                for (k, _) in want {
                    model.remove(&k);
                }
            }
            Op::Rank(k) => {
                let k = key_bytes(k);
                let below = model.range::<Vec<u8>, _>(..k.clone()).count() as u64;
                prop_assert_eq!(m.rank(&k).unwrap(), (below, model.contains_key(&k)));
                let at = model
                    .iter()
                    .nth(below as usize)
                    .map(|(k, v)| (k.clone(), v.clone()));
                prop_assert_eq!(m.entry_at_rank(below).unwrap(), at);
            }
            Op::Range(a, x, b, y, rev, off, lim) => {
                let (lo, hi) = (bound(a, x), bound(b, y));
                let mut want = model_range(&model, &lo, &hi);
                prop_assert_eq!(
                    m.count_range(as_ref(&lo), as_ref(&hi)).unwrap(),
                    want.len() as u64,
                    "{:?} {:?} {:?} lower {} upper {}",
                    desc,
                    lo,
                    hi,
                    m.lower_rank(as_ref(&lo)).unwrap(),
                    m.upper_rank(as_ref(&hi)).unwrap()
                );
                if rev {
                    want.reverse();
                }
                let limit = if lim == 255 {
                    u64::MAX
                } else {
                    lim as u64 % 50
                };
                let want: Vec<_> = want
                    .into_iter()
                    .skip(off as usize % 40)
                    .take(limit.min(1 << 20) as usize)
                    .collect();
                let got = m
                    .range(as_ref(&lo), as_ref(&hi), rev, off as u64 % 40, limit)
                    .unwrap();
                prop_assert_eq!(&got, &want);
                let lazy: Vec<_> = m
                    .iter_range(as_ref(&lo), as_ref(&hi), rev)
                    .unwrap()
                    .skip(off as usize % 40)
                    .take(limit.min(1 << 20) as usize)
                    .map(|e| e.unwrap())
                    .collect();
                prop_assert_eq!(lazy, want);
            }
            Op::RangeByRank(a, b, rev) => {
                let mut all = model_vec(&model);
                if rev {
                    all.reverse();
                }
                let want: Vec<_> = if a > b {
                    vec![]
                } else {
                    all.into_iter()
                        .skip(a as usize)
                        .take((b - a) as usize + 1)
                        .collect()
                };
                prop_assert_eq!(m.range_by_rank(a as u64, b as u64, rev).unwrap(), want);
            }
            Op::Tx(list, abort) => {
                let mut staged = model.clone();
                let r: Result<(), Error> = pool.transaction(|tx| {
                    for &(ins, k, v) in &list {
                        let kb = key_bytes(k);
                        if ins {
                            let vb = value_bytes(k, v);
                            assert_eq!(
                                m.insert_tx(tx, &kb, &vb)?,
                                staged.insert(kb.clone(), vb.clone()).is_some()
                            );
                            assert_eq!(m.get_tx(tx, &kb)?, Some(vb));
                        } else {
                            assert_eq!(m.remove_tx(tx, &kb)?, staged.remove(&kb));
                        }
                        assert_eq!(m.len_tx(tx)?, staged.len() as u64);
                    }
                    if abort {
                        Err(Error::Aborted("prop".into()))
                    } else {
                        Ok(())
                    }
                });
                prop_assert_eq!(r.is_ok(), !abort);
                if !abort {
                    model = staged;
                }
            }
            Op::Clear => {
                m.clear().unwrap();
                model.clear();
            }
            Op::Crash => {
                drop(m);
                pool.crash_for_test();
                pool = Pool::open(&path, "test.tree").unwrap();
                m = PTreeMap::open(&pool, id).unwrap();
            }
        }
        prop_assert_eq!(m.len().unwrap(), model.len() as u64);
        if std::env::var("TREE_CHECK_EACH").is_ok() {
            let c = m.check();
            prop_assert!(c.problems.is_empty(), "after {}: {:?}", desc, c.problems);
        }
    }
    prop_assert_eq!(contents(&m), model_vec(&model));
    let c = m.check();
    prop_assert!(c.problems.is_empty(), "{:?}", c.problems);
    prop_assert_eq!(c.entries, model.len() as u64);
    let mut reach = c.objects.clone();
    reach.push(pool.root::<PPtr<PTreeMap>>().unwrap().offset());
    let report = pool.check(Some(&reach));
    prop_assert!(report.ok(), "{:?}", report);
    Ok(())
}

/// Apply `fill` inserts, then `moves` as [`PTreeMap::move_key`] in one pool and as a
/// removal and an insert (one transaction) in another: the two trees must own the same objects, byte for byte
/// (the move is a shortcut, not a different tree).
fn run_moves(
    fill: Vec<(u32, u16)>,
    moves: Vec<(u32, u32, u16)>,
    node_size: u32,
) -> Result<(), TestCaseError> {
    let dir = tmp();
    let (pa, pb) = (new_pool(&dir, "a.pool"), new_pool(&dir, "b.pool"));
    let (ia, ib) = (create(&pa, node_size), create(&pb, node_size));
    let mut a = PTreeMap::open(&pa, ia).unwrap();
    let mut b = PTreeMap::open(&pb, ib).unwrap();
    for (k, v) in fill {
        a.insert(&key_bytes(k), &value_bytes(k, v)).unwrap();
        b.insert(&key_bytes(k), &value_bytes(k, v)).unwrap();
    }
    for (i, (from, to, v)) in moves.into_iter().enumerate() {
        let (from, to, v) = (key_bytes(from), key_bytes(to), value_bytes(to, v));
        let moved = a.move_key(&from, &to, &v).unwrap();
        // In one transaction, as the move: a block freed there is reused only after it.
        let removed = pb
            .transaction(|tx| {
                let removed = b.remove_tx(tx, &from)?.is_some();
                if removed {
                    b.insert_tx(tx, &to, &v)?;
                }
                Ok::<_, Error>(removed)
            })
            .unwrap();
        prop_assert_eq!(moved, removed, "move {}", i);
    }
    let (ca, cb) = (a.check(), b.check());
    prop_assert!(ca.problems.is_empty(), "{:?}", ca.problems);
    let mut objs = ca.objects.clone();
    objs.sort_unstable();
    let mut objs_b = cb.objects.clone();
    objs_b.sort_unstable();
    prop_assert_eq!(&objs, &objs_b);
    for off in objs {
        let bytes = |pool: &Pool| {
            pool.transaction(|tx| {
                let n = tx.usable_size(PPtr::<u8>::from_offset(off))?;
                let mut v = vec![0u8; n as usize];
                tx.read_bytes(off, &mut v)?;
                Ok::<_, Error>(v)
            })
            .unwrap()
        };
        prop_assert!(bytes(&pa) == bytes(&pb), "object {:#x} differs", off);
    }
    Ok(())
}

proptest! {
    // PROPTEST_CASES raises the count for a longer hunt; TREE_CHECK_EACH=1 checks the tree
    // after every operation (finds the first one that breaks an invariant).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(32),
        ..ProptestConfig::default()
    })]

    /// Small nodes: deep trees, frequent splits, merges and redistributions.
    #[test]
    fn tree_with_small_nodes_matches_std_btreemap(ops in prop::collection::vec(op(), 1..400)) {
        run(ops, 256)?;
    }

    /// The default node size.
    #[test]
    fn tree_with_default_nodes_matches_std_btreemap(ops in prop::collection::vec(op(), 1..300)) {
        run(ops, PTreeMap::DEFAULT_NODE_SIZE)?;
    }

    /// Moves leave the bytes a removal and an insert leave (small nodes: moves within a
    /// leaf, across leaves, with merges and splits; long keys: item objects freed and made).
    #[test]
    fn move_key_leaves_the_same_tree_as_remove_then_insert(
        fill in prop::collection::vec((key(), any::<u16>()), 0..300),
        moves in prop::collection::vec((key(), key(), any::<u16>()), 1..300),
        small in any::<bool>(),
    ) {
        run_moves(fill, moves, if small { 256 } else { PTreeMap::DEFAULT_NODE_SIZE })?;
    }
}
