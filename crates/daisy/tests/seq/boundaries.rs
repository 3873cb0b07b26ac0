//! Pushes and pops across chunk allocation and freeing at both ends.

use super::*;

/// 128-byte chunks hold 104 bytes of items: eight 10-byte items (12 bytes encoded).
const CB: u32 = 128;
const PER_CHUNK: u64 = 8;

/// Filling from the tail allocates a chunk per eight items; popping from the head frees each
/// chunk as it empties, except the last, which an emptied sequence keeps. The same from the
/// other end. The pool holds exactly the root, the header and the chunks at every step.
#[test]
fn chunks_are_allocated_and_freed_at_both_ends() {
    let dir = tmp();
    let pool = new_pool(&dir, "c.pool");
    let id = create(&pool, CB);
    let base = objects(&pool); // root + header
    let mut s = PSeq::open(&pool, id).unwrap();
    let mut model = VecDeque::new();
    for (back, fill_from) in [(true, "tail"), (false, "head")] {
        for i in 0..1000u64 {
            let it = item(i, 10);
            if back {
                s.push_back(&it).unwrap();
                model.push_back(it);
            } else {
                s.push_front(&it).unwrap();
                model.push_front(it);
            }
            let chunks = (i + 1).div_ceil(PER_CHUNK);
            let c = s.check();
            assert_eq!(c.segments, chunks, "filling from the {fill_from}, item {i}");
            assert_eq!(objects(&pool), base + chunks as usize, "item {i}");
        }
        assert_matches(&pool, &s, &model, fill_from);
        // Drain from the other end.
        for i in 0..1000u64 {
            let got = if back { s.pop_front() } else { s.pop_back() }.unwrap();
            let want = if back {
                model.pop_front()
            } else {
                model.pop_back()
            };
            assert_eq!(got, want, "drain {i}");
            let left = 999 - i;
            let chunks = left.div_ceil(PER_CHUNK).max(1);
            assert_eq!(s.check().segments, chunks, "draining, {left} left");
            assert_eq!(
                objects(&pool),
                base + chunks as usize,
                "draining, {left} left"
            );
        }
        assert_matches(&pool, &s, &model, "drained");
        assert_eq!(s.check().segments, 1, "the sole chunk is kept");
    }
    // Popping an empty sequence changes nothing.
    assert_eq!(s.pop_front().unwrap(), None);
    assert_eq!(s.pop_back_n(3).unwrap(), Vec::<Vec<u8>>::new());
    // `clear` frees the kept chunk too.
    s.clear().unwrap();
    assert_eq!(objects(&pool), base);
    assert_eq!(s.check().segments, 0);
    assert_matches(&pool, &s, &model, "cleared");
}

/// A queue (push at the tail, pop at the head) slides through at most two chunks; a deque
/// used at one end with few items stays in one chunk (its window moves instead of a chunk
/// being allocated and freed per item).
#[test]
fn queues_slide_through_few_chunks() {
    let dir = tmp();
    let pool = new_pool(&dir, "q.pool");
    let id = create(&pool, 256);
    let base = objects(&pool);
    let mut s = PSeq::open(&pool, id).unwrap();
    let mut model = VecDeque::new();
    for i in 0..5000u64 {
        let it = item(i, (i % 13) as usize);
        s.push_back(&it).unwrap();
        model.push_back(it);
        if i % 2 == 1 || model.len() > 3 {
            assert_eq!(s.pop_front().unwrap(), model.pop_front());
        }
        assert!(
            objects(&pool) <= base + 2,
            "step {i}: {} objects",
            objects(&pool)
        );
    }
    assert_matches(&pool, &s, &model, "queue");
    // A stack at the head of a chunk the tail pushes created: the window moves to the end.
    s.clear().unwrap();
    model.clear();
    s.push_back(b"anchor").unwrap();
    model.push_back(b"anchor".to_vec());
    for i in 0..2000u64 {
        let it = item(i, 5);
        s.push_front(&it).unwrap();
        model.push_front(it);
        assert_eq!(s.pop_front().unwrap(), model.pop_front());
        assert_eq!(objects(&pool), base + 1, "step {i}");
    }
    assert_matches(&pool, &s, &model, "stack");
}

/// Many items pushed at once fill the end chunk, then whole new chunks, in one transaction,
/// in the order LPUSH/RPUSH give; popping many crosses chunks.
#[test]
fn bulk_pushes_and_pops_cross_chunks() {
    let dir = tmp();
    let pool = new_pool(&dir, "m.pool");
    let id = create(&pool, CB);
    let mut s = PSeq::open(&pool, id).unwrap();
    let mut model = VecDeque::new();
    let mut rng = xorshift(17);
    for round in 0..60u64 {
        let n = rng() % 50 + 1;
        let items: Vec<Vec<u8>> = (0..n)
            .map(|k| item(round * 100 + k, (rng() % 20) as usize))
            .collect();
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        if round % 2 == 0 {
            s.push_back_many(&refs).unwrap();
            model.extend(items);
        } else {
            s.push_front_many(&refs).unwrap();
            for it in items {
                model.push_front(it);
            }
        }
        let k = rng() % 40;
        if round % 3 == 0 {
            let got = s.pop_front_n(k).unwrap();
            let want: Vec<Vec<u8>> = (0..k).map_while(|_| model.pop_front()).collect();
            assert_eq!(got, want, "round {round}");
        } else {
            let got = s.pop_back_n(k).unwrap();
            let want: Vec<Vec<u8>> = (0..k).map_while(|_| model.pop_back()).collect();
            assert_eq!(got, want, "round {round}");
        }
        assert_matches(&pool, &s, &model, &format!("round {round}"));
    }
    let n = model.len() as u64;
    assert_eq!(s.pop_back_n(n + 5).unwrap().len() as u64, n);
    assert!(s.is_empty().unwrap());
}
