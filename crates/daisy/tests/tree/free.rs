//! Freeing: `clear` (detach, then free in bounded transactions; a crash in between is
//! finished by the next open) and `free_step` (a tree of any size in transactions that each
//! fit a small log slot, resumable after a crash).

use super::*;
use std::collections::HashSet;

fn fill(m: &mut PTreeMap, n: u32) {
    for i in 0..n {
        let v = if i % 10 == 0 {
            vec![i as u8; 500]
        } else {
            vec![]
        };
        let key = if i % 7 == 0 {
            let mut k = vec![b'x'; 300];
            k.extend_from_slice(format!("{i:06}").as_bytes());
            k
        } else {
            format!("key:{i:06}").into_bytes()
        };
        m.insert(&key, &v).unwrap();
    }
}

/// `clear` frees every node and item object, and the tree is usable afterwards.
#[test]
fn clear_frees_everything_and_the_tree_is_reusable() {
    let dir = tmp();
    let pool = new_pool(&dir, "clear.pool");
    let baseline = pool.objects().unwrap().len();
    let id = create(&pool, 256);
    let mut m = PTreeMap::open(&pool, id).unwrap();
    fill(&mut m, 3000);
    assert!(pool.objects().unwrap().len() > baseline + 300);
    let counter = pool.root::<PPtr<PTreeMap>>().unwrap();
    m.clear_with(|tx| {
        // Runs in the transaction that empties the tree.
        assert_eq!(tx.read(counter)?, id);
        Ok(())
    })
    .unwrap();
    assert_eq!(m.len().unwrap(), 0);
    assert_eq!(m.iter().unwrap().count(), 0);
    // The root object, the tree's header: nothing else.
    assert_eq!(pool.objects().unwrap().len(), baseline + 2);
    fill(&mut m, 500);
    assert_eq!(m.len().unwrap(), 500);
    assert_ok(&m.check());
    assert_no_leak(&pool, id);
}

/// A crash after `clear` detached the nodes but before it freed them: the detached nodes
/// are owned by the header (checks pass, nothing leaks), a view works meanwhile, and the
/// next `open` frees them.
#[test]
fn a_clear_interrupted_by_a_crash_is_finished_by_open() {
    let dir = tmp();
    let path = dir.path().join("ci.pool");
    let pool = new_pool(&dir, "ci.pool");
    let baseline = pool.objects().unwrap().len();
    let id = create(&pool, 256);
    {
        let mut m = PTreeMap::open(&pool, id).unwrap();
        fill(&mut m, 2000);
        // The commit after the next one (the detach; the garbage step before it writes
        // nothing) stops after its commit fence, as if the process died there.
        pool.fail_next_apply_for_test();
        assert!(m.clear().is_err());
    }
    pool.crash_for_test();
    let pool = Pool::open(&path, "test.tree").unwrap();
    let checks = daisy::check_all(&pool).unwrap();
    let c = checks.iter().find(|c| c.header == id.offset()).unwrap();
    assert_ok(c);
    assert_eq!(c.entries, 0, "detached");
    assert!(c.objects.len() > 100, "the detached nodes are still owned");
    assert_no_leak(&pool, id);
    pool.transaction(|tx| {
        let mut v = PTreeMap::view(&pool, tx, id)?;
        assert_eq!(v.len(tx)?, 0);
        v.insert(tx, b"during", b"")?;
        Ok::<_, Error>(())
    })
    .unwrap();
    let m = PTreeMap::open(&pool, id).unwrap();
    assert_eq!(contents(&m), vec![(b"during".to_vec(), vec![])]);
    assert_eq!(
        pool.objects().unwrap().len(),
        baseline + 3,
        "root, header, one leaf"
    );
    assert_ok(&m.check());
}

/// `free_step` frees a tree of any size in bounded steps, each in its own transaction (a
/// pool with 4 KiB log slots), with everything the pool holds accounted for after every
/// step; a crash between steps resumes; the tree is refused while being freed.
#[test]
fn free_step_frees_a_big_tree_in_bounded_transactions() {
    let dir = tmp();
    let path = dir.path().join("fs.pool");
    let pool = Pool::create(
        &path,
        &PoolOptions::new("test.tree")
            .size(64 << 20)
            .log_slot_size(4096),
    )
    .unwrap();
    let baseline = pool.objects().unwrap().len();
    let id = create(&pool, 256);
    {
        let mut m = PTreeMap::open(&pool, id).unwrap();
        fill(&mut m, 5000);
        let e = pool
            .transaction(|tx| PTreeMap::free_step(&pool, tx, id, 10).map(|_| ()))
            .unwrap_err();
        assert!(
            matches!(e, Error::CollectionInUse { .. }),
            "a handle is open: {e}"
        );
    }
    let root = pool.root::<PPtr<PTreeMap>>().unwrap();
    pool.transaction(|tx| tx.write(root, &PPtr::null()))
        .unwrap();
    let mut pool = pool;
    let (mut steps, mut crashed) = (0, false);
    loop {
        let done = pool
            .transaction(|tx| PTreeMap::free_step(&pool, tx, id, 64))
            .unwrap();
        steps += 1;
        let objs: HashSet<u64> = pool.objects().unwrap().iter().map(|o| o.off).collect();
        if done {
            assert_eq!(objs.len(), baseline + 1, "only the root is left");
            break;
        }
        let owned = daisy::tree_objects(&pool, id.offset()).unwrap();
        assert_eq!(objs.len(), baseline + 1 + owned.len(), "after step {steps}");
        assert!(owned.iter().all(|o| objs.contains(o)));
        for c in daisy::check_all(&pool).unwrap() {
            assert_ok(&c);
        }
        if steps == 10 && !crashed {
            crashed = true;
            pool.crash_for_test();
            pool = Pool::open(&path, "test.tree").unwrap();
            let e = PTreeMap::open(&pool, id).unwrap_err();
            assert!(
                matches!(e, Error::NotACollection { .. }),
                "being freed: {e}"
            );
        }
    }
    assert!(steps > 20, "{steps} steps: bounded work per step");
    assert!(crashed);
}
