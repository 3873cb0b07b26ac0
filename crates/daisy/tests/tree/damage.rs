//! Damaged trees: `check` reports each kind of damage (and `check_all`, which `daisy pool
//! check` runs, finds the tree and reports it too); operations on damaged nodes return
//! errors or wrong answers, never a panic or an absurd allocation.

use super::*;
use std::ops::Bound::{Included, Unbounded};

/// A tree of depth three with 256-byte nodes: (pool, id, leaves, internal nodes).
fn damaged_fixture(dir: &tempfile::TempDir) -> (Pool, PPtr<PTreeMap>, Vec<u64>, Vec<u64>) {
    let pool = new_pool(dir, "d.pool");
    let id = create(&pool, 256);
    let mut m = PTreeMap::open(&pool, id).unwrap();
    for i in 0..800u32 {
        let v = if i % 9 == 0 { vec![3; 200] } else { vec![] };
        m.insert(format!("key{:05}", i * 11 % 809).as_bytes(), &v)
            .unwrap();
    }
    let c = m.check();
    assert_ok(&c);
    assert!(c.depth >= 3);
    let (mut leaves, mut inner) = (vec![], vec![]);
    for o in daisy::tree_objects(&pool, id.offset())
        .unwrap()
        .into_iter()
        .skip(1)
    {
        let mut h = [0u8; 8];
        pool.read_bytes(o, &mut h);
        if h[6..8] != *b"Tn" {
            continue; // an item object
        }
        if h[0] == 0 {
            leaves.push(o);
        } else {
            inner.push(o);
        }
    }
    (pool, id, leaves, inner)
}

fn write(pool: &Pool, off: u64, bytes: &[u8]) {
    pool.transaction(|tx| tx.write_bytes(off, bytes)).unwrap();
}

fn read(pool: &Pool, off: u64, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    pool.read_bytes(off, &mut b);
    b
}

fn expect_problem(pool: &Pool, id: PPtr<PTreeMap>, what: &str) {
    let m = PTreeMap::open(pool, id).unwrap();
    let c = m.check();
    assert!(
        c.problems.iter().any(|p| p.contains(what)),
        "wanted {what:?}: {:?}",
        c.problems
    );
    let all = daisy::check_all(pool).unwrap();
    let t = all
        .iter()
        .find(|c| c.header == id.offset())
        .expect("check_all finds the tree");
    assert!(!t.problems.is_empty());
    assert_eq!(t.kind, "ordered map");
}

/// Each kind of damage is reported: keys out of order, a wrong subtree count, a node at
/// the wrong level, a shared node, a wrong length, an underfull node, a bad header.
#[test]
fn check_reports_each_kind_of_damage() {
    let dir = tmp();
    let (pool, id, leaves, inner) = damaged_fixture(&dir);
    let leaf = leaves[leaves.len() / 2];
    let node = inner[inner.len() - 1];
    let fix = |off: u64, saved: &[u8]| write(&pool, off, saved);

    // Two index bytes of a leaf swapped: keys out of order.
    let saved = read(&pool, leaf, 256);
    let mut b = saved.clone();
    b.swap(8, 9);
    write(&pool, leaf, &b);
    expect_problem(&pool, id, "not above");
    fix(leaf, &saved);

    // A count word off by one.
    let saved = read(&pool, node, 256);
    let at = saved[8] as u64 * 8 + 8;
    let c = u64::from_le_bytes(saved[at as usize..at as usize + 8].try_into().unwrap());
    write(&pool, node + at, &(c + 1).to_le_bytes());
    expect_problem(&pool, id, "counts");
    fix(node, &saved);

    // A leaf claiming level 1.
    let saved = read(&pool, leaf, 8);
    write(&pool, leaf, &[1]);
    expect_problem(&pool, id, "level");
    fix(leaf, &saved);

    // An internal node's two children made the same node (shared).
    let saved = read(&pool, node, 256);
    let (a, b) = (saved[8] as usize * 8, saved[9] as usize * 8);
    write(&pool, node + b as u64, &saved[a..a + 8]);
    expect_problem(&pool, id, "reached twice");
    fix(node, &saved);

    // The header's length.
    let saved = read(&pool, id.offset(), 64);
    write(&pool, id.offset() + 32, &12345u64.to_le_bytes());
    expect_problem(&pool, id, "header len");
    fix(id.offset(), &saved);

    // A leaf emptied to one entry: under the minimum fill (and counts disagree).
    let saved = read(&pool, leaf, 256);
    write(&pool, leaf + 1, &[1]);
    expect_problem(&pool, id, "minimum fill");
    fix(leaf, &saved);

    // The header's checksum: the tree is no longer recognised (open refuses it).
    let saved = read(&pool, id.offset(), 64);
    write(&pool, id.offset() + 12, &2048u32.to_le_bytes());
    let e = PTreeMap::open(&pool, id).unwrap_err();
    assert!(matches!(e, Error::NotACollection { .. }), "{e}");
    fix(id.offset(), &saved);

    let m = PTreeMap::open(&pool, id).unwrap();
    assert_ok(&m.check());
}

/// Random bytes written over the tree's nodes and objects (seeded; the seed is printed):
/// check and every operation return, with errors or problems, never a panic.
#[test]
fn random_damage_never_panics() {
    use rand::{Rng, SeedableRng};
    let dir = tmp();
    let (pool, id, leaves, inner) = damaged_fixture(&dir);
    let path = pool.path().to_path_buf();
    let objects = daisy::tree_objects(&pool, id.offset()).unwrap();
    drop(pool);
    let clean = std::fs::read(&path).unwrap();
    let seed: u64 = std::env::var("DAISY_TREE_DAMAGE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261125);
    eprintln!("seed {seed}");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let targets: Vec<u64> = leaves
        .iter()
        .chain(&inner)
        .copied()
        .chain(objects)
        .collect();
    let mut problems = 0;
    for round in 0..120 {
        std::fs::write(&path, &clean).unwrap();
        let pool = Pool::open(&path, "test.tree").unwrap();
        for _ in 0..rng.gen_range(1..4) {
            let obj = targets[rng.gen_range(0..targets.len())];
            let at = obj + rng.gen_range(0..256u64);
            let v: u8 = match rng.gen_range(0..4) {
                0 => 0,
                1 => 0xFF,
                2 => rng.gen(),
                _ => read(&pool, at, 1)[0] ^ (1 << rng.gen_range(0..8)),
            };
            write(&pool, at, &[v]);
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let all = daisy::check_all(&pool).unwrap();
            let bad = all.iter().any(|c| !c.problems.is_empty());
            let Ok(mut m) = PTreeMap::open(&pool, id) else {
                return true;
            };
            let _ = m.check();
            let _ = m.get(b"key00400");
            let _ = m.rank(b"key00123");
            let _ = m.entry_at_rank(500);
            let _ = m.range(Included(&b"key00100"[..]), Unbounded, true, 5, 50);
            let _ = m.range_by_rank(0, 1000, false);
            if let Ok(it) = m.iter() {
                for e in it.take(2000) {
                    if e.is_err() {
                        break;
                    }
                }
            }
            let _ = m.insert(b"key00401", &[1; 40]);
            let _ = m.remove(b"key00300");
            let _ = m.remove_range_by_rank(10, 60);
            let _ = m.pop_first();
            let _ = daisy::tree_objects(&pool, id.offset());
            let _ = daisy::tree_entries(&pool, id.offset());
            bad
        }));
        match r {
            Ok(bad) => problems += bad as u32,
            Err(_) => panic!("round {round} (seed {seed}) panicked"),
        }
    }
    eprintln!("{problems} of 120 damaged images reported by check_all");
    assert!(problems > 30, "check found too little: {problems}");
}
