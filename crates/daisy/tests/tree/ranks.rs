//! Ranks, selection, bound ranks, ranges with offsets and limits in both directions, ranges
//! by rank and range removal, at their edges; sorted-set keys ordered as their scores.

use super::*;
use std::ops::Bound::{self, Excluded, Included, Unbounded};

fn k(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// An empty tree, a one-entry tree, and bounds below, above, equal and crossing.
#[test]
fn ranks_and_ranges_at_their_edges() {
    let dir = tmp();
    let pool = new_pool(&dir, "edge.pool");
    let id = create(&pool, 256);
    let mut m = PTreeMap::open(&pool, id).unwrap();
    // Empty.
    assert_eq!(m.rank(b"x").unwrap(), (0, false));
    assert_eq!(m.entry_at_rank(0).unwrap(), None);
    assert_eq!(m.count_range(Unbounded, Unbounded).unwrap(), 0);
    assert!(m
        .range(Unbounded, Unbounded, false, 0, u64::MAX)
        .unwrap()
        .is_empty());
    assert!(m.range_by_rank(0, 10, true).unwrap().is_empty());
    assert_eq!(m.remove_range_by_rank(0, 10).unwrap(), 0);
    assert_eq!(m.remove_range(Unbounded, Unbounded).unwrap(), 0);
    assert_eq!(m.iter().unwrap().count(), 0);
    // One entry.
    m.insert(&k(5), b"five").unwrap();
    assert_eq!(m.rank(&k(5)).unwrap(), (0, true));
    assert_eq!(m.rank(&k(6)).unwrap(), (1, false));
    assert_eq!(m.rank(&k(4)).unwrap(), (0, false));
    assert_eq!(m.entry_at_rank(1).unwrap(), None);
    assert_eq!(m.lower_rank(Excluded(&k(5))).unwrap(), 1);
    assert_eq!(m.upper_rank(Excluded(&k(5))).unwrap(), 0);
    assert_eq!(m.count_range(Included(&k(5)), Included(&k(5))).unwrap(), 1);
    assert_eq!(m.count_range(Excluded(&k(5)), Included(&k(5))).unwrap(), 0);
    assert_eq!(
        m.count_range(Included(&k(6)), Included(&k(4))).unwrap(),
        0,
        "crossing"
    );
    // A thousand entries, keys k00000, k00002, ... (even numbers).
    for i in 0..1000u32 {
        m.insert(&k(2 * i), &i.to_le_bytes()).unwrap();
    }
    m.remove(&k(5)).unwrap();
    assert_ok(&m.check());
    let all: Vec<_> = contents(&m);
    assert_eq!(all.len(), 1000);
    assert_eq!(m.rank(&k(1998)).unwrap(), (999, true));
    assert_eq!(m.rank(&k(1999)).unwrap(), (1000, false));
    assert_eq!(m.rank(b"").unwrap(), (0, false));
    assert_eq!(m.rank(b"l").unwrap(), (1000, false));
    for r in [0u64, 1, 499, 998, 999] {
        assert_eq!(m.entry_at_rank(r).unwrap().as_ref(), Some(&all[r as usize]));
    }
    // Bounds between keys, on keys, outside all keys.
    let b = |x: &[u8], kind: u8| -> Bound<Vec<u8>> {
        match kind {
            0 => Unbounded,
            1 => Included(x.to_vec()),
            _ => Excluded(x.to_vec()),
        }
    };
    fn r(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
        b.as_ref().map(|v| v.as_slice())
    }
    for (lo, hi, want) in [
        (b(&k(100), 1), b(&k(200), 1), 51u64),
        (b(&k(100), 2), b(&k(200), 2), 49),
        (b(&k(101), 1), b(&k(199), 1), 49),
        (b(&k(0), 0), b(&k(10), 2), 5),
        (b(&k(1990), 2), b(&k(0), 0), 4),
        (b(b"a", 1), b(b"z", 1), 1000),
        (b(&k(300), 1), b(&k(100), 1), 0),
        (b(&k(300), 2), b(&k(300), 1), 0),
    ] {
        assert_eq!(
            m.count_range(r(&lo), r(&hi)).unwrap(),
            want,
            "{lo:?}..{hi:?}"
        );
        let got = m.range(r(&lo), r(&hi), false, 0, u64::MAX).unwrap();
        assert_eq!(got.len() as u64, want);
        let rev = m.range(r(&lo), r(&hi), true, 0, u64::MAX).unwrap();
        assert!(rev.iter().rev().eq(got.iter()));
    }
    // Offsets and limits: ZRANGEBYSCORE ... LIMIT.
    let lo = k(100);
    let win = m.range(Included(&lo), Unbounded, false, 10, 3).unwrap();
    assert_eq!(win, all[60..63].to_vec());
    let win = m.range(Unbounded, Excluded(&lo), true, 10, 3).unwrap();
    assert_eq!(win, vec![all[39].clone(), all[38].clone(), all[37].clone()]);
    assert!(m
        .range(Unbounded, Unbounded, false, 1000, 5)
        .unwrap()
        .is_empty());
    assert!(m
        .range(Unbounded, Unbounded, false, 0, 0)
        .unwrap()
        .is_empty());
    assert_eq!(
        m.range(Unbounded, Unbounded, true, 998, 5).unwrap(),
        vec![all[1].clone(), all[0].clone()]
    );
    // By rank: ZRANGE start stop [REV].
    assert_eq!(m.range_by_rank(0, 0, false).unwrap(), vec![all[0].clone()]);
    assert_eq!(m.range_by_rank(0, 0, true).unwrap(), vec![all[999].clone()]);
    assert_eq!(
        m.range_by_rank(995, 5000, false).unwrap(),
        all[995..].to_vec()
    );
    assert_eq!(
        m.range_by_rank(2, 4, true).unwrap(),
        vec![all[997].clone(), all[996].clone(), all[995].clone()]
    );
    assert!(m.range_by_rank(5, 4, false).unwrap().is_empty());
    assert!(m.range_by_rank(1000, 2000, false).unwrap().is_empty());
    // Lazy iteration in both directions, bounded.
    let it: Vec<_> = m
        .iter_range(Included(&k(1900)), Unbounded, true)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    assert_eq!(it, all[950..].iter().rev().cloned().collect::<Vec<_>>());
    // Range removal at the ends and in the middle.
    assert_eq!(m.remove_range_by_rank(0, 0).unwrap(), 1);
    assert_eq!(m.remove_range_by_rank(998, 5000).unwrap(), 1);
    assert_eq!(
        m.remove_range(Excluded(&k(100)), Excluded(&k(110)))
            .unwrap(),
        4
    );
    assert_eq!(m.remove_range(Included(&k(3000)), Unbounded).unwrap(), 0);
    assert_eq!(m.len().unwrap(), 994);
    let c = m.check();
    assert_ok(&c);
    let mut want = all[1..999].to_vec();
    want.retain(|(x, _)| !(x.as_slice() > k(100).as_slice() && x.as_slice() < k(110).as_slice()));
    assert_eq!(contents(&m), want);
}

/// Sorted-set keys (an 8-byte order-preserving score, then the member) sort as their scores
/// do, negative, zero, fractions and infinities included; a score range is a key range.
#[test]
fn sorted_set_keys_order_by_score_then_member() {
    let dir = tmp();
    let pool = new_pool(&dir, "z.pool");
    let id = create(&pool, 512);
    let mut m = PTreeMap::open(&pool, id).unwrap();
    let scores = [
        f64::NEG_INFINITY,
        -1e300,
        -2.5,
        -1.0,
        -0.0,
        0.0,
        1e-300,
        0.5,
        1.0,
        2.0,
        1e300,
        f64::INFINITY,
    ];
    for (i, s) in scores.iter().enumerate() {
        for member in [&b"b"[..], b"a", b"ab", b""] {
            m.insert(&zkey(*s, member), &[i as u8]).unwrap();
        }
    }
    // -0.0 and 0.0 differ in their bits; the encoding keeps them apart (as distinct keys).
    let got: Vec<(f64, Vec<u8>)> = m
        .iter()
        .unwrap()
        .map(|e| {
            let (k, _) = e.unwrap();
            let b = u64::from_be_bytes(k[..8].try_into().unwrap());
            let b = if b >> 63 == 1 { b & !(1 << 63) } else { !b };
            (f64::from_bits(b), k[8..].to_vec())
        })
        .collect();
    let mut want: Vec<(f64, Vec<u8>)> = scores
        .iter()
        .flat_map(|s| {
            [b"".to_vec(), b"a".to_vec(), b"ab".to_vec(), b"b".to_vec()].map(|mb| (*s, mb))
        })
        .collect();
    want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.0.to_bits(), w.0.to_bits());
        assert_eq!(g.1, w.1);
    }
    // ZCOUNT z -1 1: scores in [-1, 1] (the empty member is the lowest key of a score).
    let lo = zkey(-1.0, b"");
    let hi = zkey(1.0f64.next_up(), b"");
    assert_eq!(m.count_range(Included(&lo), Excluded(&hi)).unwrap(), 6 * 4);
    // ZCOUNT z (-1 1: excluding the score -1 means starting after every key of score -1.
    let lo = zkey((-1.0f64).next_up(), b"");
    assert_eq!(m.count_range(Included(&lo), Excluded(&hi)).unwrap(), 5 * 4);
}

/// A range removal over thousands of entries and hundreds of leaves in one transaction:
/// one rebalance per leaf, the right count removed, every invariant kept.
#[test]
fn remove_range_by_rank_spans_many_leaves() {
    let dir = tmp();
    let pool = Pool::create(
        dir.path().join("rr.pool"),
        &PoolOptions::new("test.tree")
            .size(64 << 20)
            .lanes(2)
            .log_slot_size(1 << 20),
    )
    .unwrap();
    let id = create(&pool, 256);
    let mut m = PTreeMap::open(&pool, id).unwrap();
    let mut model = Model::new();
    for i in 0..6000u32 {
        let key = k(i * 13 % 6007);
        m.insert(&key, if i % 50 == 0 { &[9; 100] } else { b"" })
            .unwrap();
        model.insert(key, if i % 50 == 0 { vec![9; 100] } else { vec![] });
    }
    assert!(m.check().depth >= 4);
    drop(m);
    let logged = pool.transaction(|tx| {
        let before = tx.log_room();
        let mut v = PTreeMap::view(&pool, tx, id)?;
        assert_eq!(v.remove_range_by_rank(tx, 100, 4099)?, 4000);
        assert_eq!(v.len(tx)?, 2000);
        Ok::<_, Error>(before - tx.log_room())
    });
    let logged = logged.unwrap();
    let keys: Vec<Vec<u8>> = model.keys().skip(100).take(4000).cloned().collect();
    for key in keys {
        model.remove(&key);
    }
    let m = PTreeMap::open(&pool, id).unwrap();
    assert_ok(&m.check());
    assert_eq!(contents(&m), model_vec(&model));
    eprintln!("removing 4000 of 6000 entries logged {logged} bytes");
    assert!(
        logged < 4000 * 64,
        "{logged} bytes: not one rebalance per entry"
    );
    assert_no_leak(&pool, id);
}
