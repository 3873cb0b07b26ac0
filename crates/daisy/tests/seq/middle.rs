//! Set, insert and remove in the middle: windows shifted through the log, full chunks split,
//! windows moved into fresh chunks, small chunks merged into their neighbours.

use super::*;

/// Random middle edits against the model (seed printed); full chunks split, so the chunk
/// count grows past what pushes alone would need, and removals merge chunks back.
#[test]
fn middle_edits_split_and_merge_chunks() {
    for (cb, seed) in [(128u32, 5u64), (256, 6), (1024, 7), (4096, 8)] {
        eprintln!("chunk {cb}, seed {seed}");
        let dir = tmp();
        let pool = new_pool(&dir, "mid.pool");
        let id = create(&pool, cb);
        let mut s = PSeq::open(&pool, id).unwrap();
        let mut model = VecDeque::new();
        let mut rng = xorshift(seed);
        for i in 0..300u64 {
            let it = item(i, (rng() % 30) as usize);
            s.push_back(&it).unwrap();
            model.push_back(it);
        }
        let packed = s.check().segments;
        for step in 0..1500u64 {
            let len = model.len() as u64;
            let it = item(10_000 + step, (rng() % 40) as usize);
            match rng() % 3 {
                0 => {
                    let at = rng() % (len + 1);
                    s.insert_at(at, &it).unwrap();
                    model.insert(at as usize, it);
                }
                1 if len > 0 => {
                    let at = (rng() % len) as i64;
                    s.set(at, &it).unwrap();
                    model[at as usize] = it;
                }
                _ if len > 0 => {
                    let at = (rng() % len) as i64;
                    assert_eq!(s.remove_at(at).unwrap(), model.remove(at as usize).unwrap());
                }
                _ => {}
            }
            if step % 100 == 0 {
                assert_matches(&pool, &s, &model, &format!("chunk {cb} step {step}"));
            }
        }
        assert_matches(&pool, &s, &model, &format!("chunk {cb} edited"));
        // Inserts in the middle of full chunks split them.
        let grown = s.check().segments;
        // Removing most items from the middle merges chunks back together.
        while model.len() > 30 {
            let at = (rng() % model.len() as u64) as i64;
            assert_eq!(s.remove_at(at).unwrap(), model.remove(at as usize).unwrap());
        }
        assert_matches(&pool, &s, &model, &format!("chunk {cb} thinned"));
        let thin = s.check().segments;
        eprintln!("chunk {cb}: {packed} chunks packed, {grown} after edits, {thin} after removals");
        assert!(
            thin < grown,
            "chunk {cb}: removals merged nothing ({grown} -> {thin})"
        );
    }
}

/// A middle edit logs at most `EDIT_LOG_MAX` bytes plus a few words, however full its chunk
/// (the largest chunks move their window into a fresh chunk instead, whose contents are
/// flushed rather than logged when the record lacks room).
#[test]
fn middle_edits_log_a_bounded_amount() {
    for cb in [4096u32, 32768] {
        let dir = tmp();
        let pool = new_pool(&dir, "log.pool");
        let id = create(&pool, cb);
        let mut s = PSeq::open(&pool, id).unwrap();
        let items: Vec<Vec<u8>> = (0..20_000u64).map(|i| item(i, 30)).collect();
        for part in items.chunks(500) {
            let refs: Vec<&[u8]> = part.iter().map(|v| v.as_slice()).collect();
            s.push_back_many(&refs).unwrap();
        }
        let mut model: VecDeque<Vec<u8>> = items.into_iter().collect();
        drop(s);
        let mut rng = xorshift(cb as u64);
        for step in 0..200u64 {
            let len = model.len() as u64;
            let at = rng() % len;
            let it = item(step, 30 + (rng() % 60) as usize);
            let kind = step % 3;
            let used = pool
                .transaction(|tx| {
                    let mut v = PSeq::view(&pool, tx, id)?;
                    let before = tx.log_room();
                    match kind {
                        0 => {
                            v.insert_at(tx, at, &it)?;
                        }
                        1 => v.set(tx, at as i64, &it)?,
                        _ => {
                            v.remove_at(tx, at as i64)?;
                        }
                    }
                    Ok::<_, Error>(before - tx.log_room())
                })
                .unwrap();
            match kind {
                0 => model.insert(at as usize, it),
                1 => model[at as usize] = it,
                _ => {
                    model.remove(at as usize);
                }
            }
            assert!(
                used <= PSeq::EDIT_LOG_MAX + 512,
                "chunk {cb}, step {step}: an edit logged {used} bytes"
            );
        }
        let s = PSeq::open(&pool, id).unwrap();
        assert_matches(&pool, &s, &model, &format!("chunk {cb}"));
    }
}
