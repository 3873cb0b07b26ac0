//! Transaction-scoped views of byte maps (many small maps, as a server keeps one per key),
//! freeing a map in bounded steps (with a crash between steps), and uniform random picks.

use super::*;

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// A map created in a transaction is used through a view in the same transaction, commits
/// with it, and aborts with it; a view excludes an exclusive handle and a second view.
#[test]
fn views_work_inside_the_callers_transaction() {
    let dir = tmp();
    let pool = new_pool(&dir, "view.pool");
    let root = pool.root::<[u64; 2]>().unwrap();
    let id = pool
        .transaction(|tx| {
            let id = PBytesMap::create_in(tx)?;
            let mut v = PBytesMap::view(&pool, tx, id)?;
            for i in 0..3000u32 {
                v.insert(tx, format!("f{i}").as_bytes(), &i.to_le_bytes())?;
            }
            assert_eq!(v.len(tx)?, 3000);
            assert!(v.remove(tx, b"f7")?);
            assert_eq!(v.get(tx, b"f8")?, Some(8u32.to_le_bytes().to_vec()));
            tx.write(root, &[id.offset(), 0])?;
            Ok::<_, Error>(id)
        })
        .unwrap();
    {
        let m = PBytesMap::open(&pool, id).unwrap();
        assert_eq!(m.len().unwrap(), 2999);
        assert_ok(&m.check());
        // Claimed by the handle: no view meanwhile.
        let e = pool
            .transaction(|tx| PBytesMap::view(&pool, tx, id).map(|_| ()))
            .unwrap_err();
        assert!(matches!(e, Error::CollectionInUse { .. }), "{e}");
    }
    // A failed transaction leaves nothing of what its view did.
    let r: Result<(), Error> = pool.transaction(|tx| {
        let mut v = PBytesMap::view(&pool, tx, id)?;
        v.insert(tx, b"gone", b"x")?;
        assert!(PBytesMap::view(&pool, tx, id).is_err(), "a second view");
        Err(Error::Aborted("no".into()))
    });
    assert!(r.is_err());
    let m = PBytesMap::open(&pool, id).unwrap();
    assert_eq!(m.get(b"gone").unwrap(), None);
    assert_eq!(m.len().unwrap(), 2999);
}

/// `free_step` frees a map of any size in bounded steps, each in its own transaction, with
/// everything reachable accounted for after every step; a crash between steps resumes.
#[test]
fn free_step_frees_a_big_map_in_bounded_transactions() {
    let dir = tmp();
    let path = dir.path().join("free.pool");
    let pool = Pool::create(
        &path,
        &PoolOptions::new("test.hashmap")
            .size(64 << 20)
            .log_slot_size(16 << 10),
    )
    .unwrap();
    let baseline = pool.objects().unwrap().len();
    let id = create_bytes(&pool, 3);
    let root = pool.root::<PPtr<PBytesMap>>().unwrap();
    {
        let mut m = PBytesMap::open(&pool, id).unwrap();
        for i in 0..20_000u32 {
            m.insert(format!("key:{i}").as_bytes(), &[i as u8; 20])
                .unwrap();
        }
    }
    // Unlinked (the caller's part), then freed step by step.
    pool.transaction(|tx| tx.write(root, &PPtr::null()))
        .unwrap();
    let mut steps = 0;
    let mut entries_seen = 0u64;
    let mut crashed = false;
    let mut pool = pool;
    loop {
        let done = pool
            .transaction(|tx| {
                PBytesMap::free_step(&pool, tx, id, 64, |_, e| {
                    assert!(e.key_len() >= 5);
                    entries_seen += 1;
                    Ok(())
                })
            })
            .unwrap();
        steps += 1;
        // Everything the pool holds is the baseline, the root array, or the map's.
        let objs: std::collections::HashSet<u64> =
            pool.objects().unwrap().iter().map(|o| o.off).collect();
        if done {
            assert_eq!(objs.len(), baseline + 1, "only the root is left");
            break;
        }
        let owned = daisy::map_objects(&pool, id.offset()).unwrap();
        assert_eq!(objs.len(), baseline + 1 + owned.len(), "after step {steps}");
        let checks = daisy::check_all(&pool).unwrap();
        for c in &checks {
            assert_ok(c);
        }
        if steps == 40 && !crashed {
            // A crash between steps: reopen and go on.
            crashed = true;
            pool.crash_for_test();
            pool = Pool::open(&path, "test.hashmap").unwrap();
            assert!(PBytesMap::open(&pool, id).is_err(), "being freed");
        }
    }
    assert_eq!(entries_seen, 20_000);
    assert!(steps > 20_000 / 64, "{steps} steps");
}

/// Random picks are uniform over the keys, for a one-segment map and for a map of many
/// segments of different depths (a chi-square test with a generous bound).
#[test]
fn random_entries_are_uniform() {
    let dir = tmp();
    let pool = new_pool(&dir, "rand.pool");
    let id = create_bytes(&pool, 11);
    let mut m = PBytesMap::open(&pool, id).unwrap();
    for &n in &[2u32, 8, 300, 5000] {
        m.clear().unwrap();
        for i in 0..n {
            m.insert(format!("k{i}").as_bytes(), b"").unwrap();
        }
        let draws = (n as usize * 200).min(400_000);
        let mut count = vec![0u64; n as usize];
        let mut rng = xorshift(n as u64 * 77);
        pool.transaction(|tx| {
            for _ in 0..draws {
                let k = m.random_key_tx(tx, &mut rng)?.unwrap();
                let i: usize = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
                count[i] += 1;
            }
            Ok::<_, Error>(())
        })
        .unwrap();
        let expect = draws as f64 / n as f64;
        let chi2: f64 = count
            .iter()
            .map(|&c| (c as f64 - expect).powi(2) / expect)
            .sum();
        // Degrees of freedom n-1; mean n-1, sd sqrt(2(n-1)): allow 6 sd.
        let dof = (n - 1) as f64;
        let bound = dof + 6.0 * (2.0 * dof).sqrt() + 10.0;
        eprintln!(
            "n {n}: chi2 {chi2:.1} (bound {bound:.1}), segments {}",
            m.check().segments
        );
        assert!(
            chi2 < bound,
            "n {n}: chi2 {chi2:.1} over {bound:.1}: {count:?}"
        );
        assert!(count.iter().all(|&c| c > 0), "n {n}: a key never picked");
    }
}

/// Values rewritten where they lie (appends, small edits, shrinking, growing past the block)
/// read back right inside the transaction, after it commits, and not at all after an abort;
/// the map stays sound and allocates nothing for in-place edits.
#[test]
fn values_edited_in_place_read_back_and_roll_back() {
    let dir = tmp();
    let pool = new_pool(&dir, "edit.pool");
    let id = create_bytes(&pool, 5);
    let mut m = PBytesMap::open(&pool, id).unwrap();
    let mut rng = xorshift(99);
    let mut model: std::collections::HashMap<Vec<u8>, Vec<u8>> = Default::default();
    for k in 0..20u32 {
        let v = vec![b'a'; 100 + k as usize * 37];
        m.insert(format!("k{k}").as_bytes(), &v).unwrap();
        model.insert(format!("k{k}").into_bytes(), v);
    }
    for step in 0..3000 {
        let k = format!("k{}", rng() % 20).into_bytes();
        let mut v = model[&k].clone();
        match rng() % 5 {
            0 => v.extend_from_slice(&[b'x'; 7]), // append
            1 => {
                let i = (rng() as usize) % v.len();
                v[i] = b'0' + (step % 10) as u8; // one byte changes
            }
            2 => v.truncate(v.len().saturating_sub(3).max(1)), // shrink
            3 => v = vec![b'z'; (v.len() + 300).min(3000)],    // much changes: a new entry
            _ => v.insert(0, b'p'),                            // everything shifts
        }
        let objects_before = pool.objects().unwrap().len();
        let abort = step % 7 == 0;
        let r: Result<(), Error> = pool.transaction(|tx| {
            m.insert_tx(tx, &k, &v)?;
            assert_eq!(m.get_tx(tx, &k)?.as_deref(), Some(&v[..]), "step {step}");
            if abort {
                return Err(Error::Aborted("roll back".into()));
            }
            Ok(())
        });
        if abort {
            assert!(r.is_err());
            assert_eq!(
                m.get(&k).unwrap().as_deref(),
                Some(&model[&k][..]),
                "step {step}"
            );
            assert_eq!(pool.objects().unwrap().len(), objects_before);
        } else {
            r.unwrap();
            model.insert(k.clone(), v.clone());
            assert_eq!(m.get(&k).unwrap().as_deref(), Some(&v[..]), "step {step}");
        }
    }
    for (k, v) in &model {
        assert_eq!(m.get(k).unwrap().as_deref(), Some(&v[..]));
    }
    assert_ok(&m.check());
    drop(m);
    pool.crash_for_test();
    let pool = Pool::open(dir.path().join("edit.pool"), "test.hashmap").unwrap();
    let m = PBytesMap::open(&pool, id).unwrap();
    for (k, v) in &model {
        assert_eq!(
            m.get(k).unwrap().as_deref(),
            Some(&v[..]),
            "after the crash"
        );
    }
    assert_ok(&m.check());
}

/// A table emptied by removals is rebuilt at the size its entries need: the entries stay
/// (none copied), the old segments are freed, an aborted shrink leaves the table as it was,
/// and the map checks sound before and after a crash.
#[test]
fn shrink_rebuilds_an_emptied_table_smaller() {
    let dir = tmp();
    let pool = new_pool(&dir, "shrink.pool");
    let id = create_bytes(&pool, 8);
    let mut m = PBytesMap::open(&pool, id).unwrap();
    for i in 0..20_000u32 {
        m.insert(format!("k{i}").as_bytes(), &i.to_le_bytes())
            .unwrap();
    }
    for i in 0..19_500u32 {
        m.remove(format!("k{i}").as_bytes()).unwrap();
    }
    let before = m.check();
    assert_ok(&before);
    let objects = pool.objects().unwrap().len();
    // Aborted: nothing changes.
    let r: Result<(), Error> = pool.transaction(|tx| {
        assert!(m.shrink_tx(tx, 4096)?);
        Err(Error::Aborted("no".into()))
    });
    assert!(r.is_err());
    assert_eq!(m.check().segments, before.segments);
    assert_eq!(pool.objects().unwrap().len(), objects);
    // A table over `max_segments` is left alone.
    assert!(!pool.transaction(|tx| m.shrink_tx(tx, 2)).unwrap());
    assert!(pool.transaction(|tx| m.shrink_tx(tx, 4096)).unwrap());
    let after = m.check();
    assert_ok(&after);
    assert!(
        after.segments < before.segments / 4,
        "{} -> {}",
        before.segments,
        after.segments
    );
    assert_eq!(after.entries, 500);
    assert!(pool.objects().unwrap().len() < objects);
    for i in 19_500..20_000u32 {
        assert_eq!(
            m.get(format!("k{i}").as_bytes()).unwrap(),
            Some(i.to_le_bytes().to_vec())
        );
    }
    // Small enough already: nothing to do.
    assert!(!pool.transaction(|tx| m.shrink_tx(tx, 4096)).unwrap());
    drop(m);
    pool.crash_for_test();
    let pool = Pool::open(dir.path().join("shrink.pool"), "test.hashmap").unwrap();
    let m = PBytesMap::open(&pool, id).unwrap();
    assert_ok(&m.check());
    assert_eq!(m.len().unwrap(), 500);
}
