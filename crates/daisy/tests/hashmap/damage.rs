//! Damaged maps: the checker reports damage, and damaged maps give errors, never panics.

use super::*;

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
