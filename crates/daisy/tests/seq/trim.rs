//! Redis's LTRIM: the kept range, whole chunks detached at once and freed in bounded
//! transactions.

use super::*;

fn filled(pool: &Pool, id: PPtr<PSeq>, n: u64, len: usize) -> VecDeque<Vec<u8>> {
    let mut s = PSeq::open(pool, id).unwrap();
    let items: Vec<Vec<u8>> = (0..n).map(|i| item(i, len)).collect();
    for part in items.chunks(1000) {
        let refs: Vec<&[u8]> = part.iter().map(|v| v.as_slice()).collect();
        s.push_back_many(&refs).unwrap();
    }
    items.into_iter().collect()
}

/// LTRIM's bounds: negative indexes, ends past the length, an empty range (everything goes).
#[test]
fn trim_keeps_redis_ranges() {
    let cases: [(i64, i64); 12] = [
        (0, -1),
        (0, 0),
        (1, -2),
        (-3, -1),
        (5, 9),
        (40, 1000),
        (-1000, 3),
        (7, 2),
        (100, 200),
        (0, 99),
        (33, 33),
        (-50, -49),
    ];
    for (start, end) in cases {
        let dir = tmp();
        let pool = new_pool(&dir, "t.pool");
        let id = create(&pool, 128);
        let mut model = filled(&pool, id, 100, 9);
        let mut s = PSeq::open(&pool, id).unwrap();
        s.trim(start, end).unwrap();
        let n = model.len() as i64;
        let (mut a, mut b) = (
            if start < 0 { n + start } else { start },
            if end < 0 { n + end } else { end },
        );
        a = a.max(0);
        if a > b || a >= n {
            model.clear();
        } else {
            b = b.min(n - 1);
            model = model.range(a as usize..=b as usize).cloned().collect();
        }
        assert_matches(&pool, &s, &model, &format!("trim {start} {end}"));
    }
}

/// A trim that drops thousands of chunks logs a few words (the cut chain hangs on the
/// header's garbage); the garbage is then freed in bounded transactions, every object
/// accounted for after each; a crash with garbage pending is finished by the next open.
#[test]
fn big_trims_detach_chunks_and_free_them_in_steps() {
    let dir = tmp();
    let path = dir.path().join("big.pool");
    let pool = Pool::create(
        &path,
        &PoolOptions::new(LAYOUT)
            .size(64 << 20)
            .log_slot_size(16 << 10),
    )
    .unwrap();
    let id = create(&pool, 1024);
    let mut model = filled(&pool, id, 100_000, 12);
    // A big item among the dropped ones: freed with its chunk.
    {
        let mut s = PSeq::open(&pool, id).unwrap();
        s.set(10, &item(1, 5000)).unwrap();
        s.set(-10, &item(2, 5000)).unwrap();
        model[10] = item(1, 5000);
        let n = model.len();
        model[n - 10] = item(2, 5000);
    }
    let before = objects(&pool);
    let used = pool
        .transaction(|tx| {
            let mut v = PSeq::view(&pool, tx, id)?;
            let room = tx.log_room();
            v.trim(tx, 40_000, 40_099)?;
            assert!(v.has_garbage(tx)?);
            assert_eq!(v.len(tx)?, 100);
            Ok::<_, Error>(room - tx.log_room())
        })
        .unwrap();
    model = model.range(40_000..40_100).cloned().collect();
    eprintln!("trim of 99,900 items logged {used} bytes");
    assert!(used < 1024, "the trim logged {used} bytes");
    // Nothing freed yet: the garbage is still the sequence's.
    assert_eq!(objects(&pool), before);
    let owned = daisy::seq_objects(&pool, id.offset()).unwrap();
    assert_eq!(objects(&pool), 1 + owned.len());
    let mut steps = 0;
    let mut pool = pool;
    loop {
        let done = pool
            .transaction(|tx| PSeq::view(&pool, tx, id)?.collect_garbage(tx, 64))
            .unwrap();
        steps += 1;
        let owned = daisy::seq_objects(&pool, id.offset()).unwrap();
        assert_eq!(objects(&pool), 1 + owned.len(), "after step {steps}");
        if done {
            break;
        }
        if steps == 10 {
            // A crash with garbage pending: the next open frees the rest.
            pool.crash_for_test();
            pool = Pool::open(&path, LAYOUT).unwrap();
            let s = PSeq::open(&pool, id).unwrap();
            assert_matches(&pool, &s, &model, "reopened after a crash");
            assert_eq!(objects(&pool), 1 + 1 + s.check().segments as usize);
            break;
        }
    }
    assert!(steps >= 10, "{steps} steps");
    let mut s = PSeq::open(&pool, id).unwrap();
    assert_matches(&pool, &s, &model, "collected");
    // A handle's trim frees what it drops before returning.
    s.trim(-10, -1).unwrap();
    model = model.range(90..).cloned().collect();
    assert_matches(&pool, &s, &model, "handle trim");
    assert_eq!(objects(&pool), 2 + s.check().segments as usize);
}

/// A trim that drops items of the boundary chunk only, in a transaction whose log slot is
/// nearly used up (a big group commit): it must not take the garbage path with no chunk to
/// hang there (it once panicked), and the sequence stays sound.
#[test]
fn boundary_only_trim_in_a_full_transaction() {
    let dir = tmp();
    let pool = new_pool(&dir, "t.pool");
    let id = create(&pool, 128);
    let mut model = filled(&pool, id, 100, 9);
    let filler = pool
        .transaction(|tx| tx.alloc_zeroed_bytes(64 << 10))
        .unwrap()
        .offset();
    pool.transaction(|tx| {
        // Logged writes until less than 4 KiB of the slot is left.
        let mut at = 0;
        while tx.log_room() > 2048 {
            tx.write_bytes(filler + at, &[7u8; 512])?;
            at = (at + 512) % (64 << 10);
        }
        let mut v = PSeq::view(&pool, tx, id)?;
        v.trim(tx, 1, -2)
    })
    .unwrap();
    model.pop_front();
    model.pop_back();
    pool.transaction(|tx| tx.free(PPtr::<u8>::from_offset(filler)))
        .unwrap();
    let s = PSeq::open(&pool, id).unwrap();
    assert_matches(
        &pool,
        &s,
        &model,
        "boundary-only trim in a full transaction",
    );
    assert_ok(&s.check());
}
