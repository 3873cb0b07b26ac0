//! `free_step`: a sequence of any size freed in bounded transactions, resumable after a
//! crash.

use super::*;

#[test]
fn free_step_frees_a_big_sequence_in_bounded_transactions() {
    let dir = tmp();
    let path = dir.path().join("free.pool");
    let pool = Pool::create(
        &path,
        &PoolOptions::new(LAYOUT)
            .size(64 << 20)
            .log_slot_size(16 << 10),
    )
    .unwrap();
    let id = create(&pool, 512);
    {
        let mut s = PSeq::open(&pool, id).unwrap();
        for part in 0..40u64 {
            let items: Vec<Vec<u8>> = (0..1000u64)
                .map(|i| item(part * 1000 + i, if i % 97 == 0 { 700 } else { 20 }))
                .collect();
            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
            s.push_back_many(&refs).unwrap();
        }
        // Garbage pending too (a trim inside a transaction, not collected).
        pool.transaction(|tx| s.trim_tx(tx, 0, 29_999)).unwrap();
        // A handle or a view refuses freeing.
        let e = pool
            .transaction(|tx| PSeq::free_step(&pool, tx, id, 8))
            .unwrap_err();
        assert!(matches!(e, Error::CollectionInUse { .. }), "{e}");
    }
    // Unlinked from the root (the caller's part), then freed step by step.
    let root = pool.root::<PPtr<PSeq>>().unwrap();
    pool.transaction(|tx| tx.write(root, &PPtr::null()))
        .unwrap();
    let baseline = 1; // the root
    let owned_at_start = daisy::seq_objects(&pool, id.offset()).unwrap().len();
    let mut steps = 0;
    let mut crashed = false;
    let mut pool = pool;
    loop {
        let (done, used) = pool
            .transaction(|tx| {
                let room = tx.log_room();
                let d = PSeq::free_step(&pool, tx, id, 64)?;
                Ok::<_, Error>((d, room - tx.log_room()))
            })
            .unwrap();
        steps += 1;
        assert!(used < 16 << 10, "step {steps} logged {used} bytes");
        if done {
            assert_eq!(objects(&pool), baseline, "only the root is left");
            break;
        }
        // Everything is the root or the sequence's; the sequence checks sound.
        let owned = daisy::seq_objects(&pool, id.offset()).unwrap();
        assert_eq!(objects(&pool), baseline + owned.len(), "after step {steps}");
        for c in daisy::check_all(&pool).unwrap() {
            assert_ok(&c);
        }
        // Being freed: no handle or view.
        assert!(matches!(
            PSeq::open(&pool, id),
            Err(Error::NotACollection { .. })
        ));
        if steps == 20 && !crashed {
            crashed = true;
            pool.crash_for_test();
            pool = Pool::open(&path, LAYOUT).unwrap();
        }
    }
    assert!(crashed);
    // At most about `budget` objects per step.
    assert!(
        steps >= owned_at_start / 65,
        "{steps} steps for {owned_at_start} objects"
    );
}
