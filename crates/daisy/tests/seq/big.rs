//! Items stored out of line: over a quarter of a chunk's data area, up to megabytes.

use super::*;

/// Big items round-trip through every operation, their objects are freed with them, and an
/// item at the inline limit stays inline.
#[test]
fn big_items_live_in_their_own_objects() {
    let dir = tmp();
    let pool = new_pool(&dir, "big.pool");
    let id = create(&pool, 4096);
    let base = objects(&pool);
    let mut s = PSeq::open(&pool, id).unwrap();
    let limit = (4096 - 24) / 4; // inline limit: 1018 bytes
    let sizes = [limit, limit + 1, 5000, 100_000, 3 << 20, 0, 17];
    let mut model = VecDeque::new();
    for (i, &n) in sizes.iter().enumerate() {
        let it = item(i as u64, n);
        s.push_back(&it).unwrap();
        model.push_back(it);
    }
    // One chunk, and one object per out-of-line item (four of them).
    assert_eq!(objects(&pool), base + 1 + 4);
    assert_matches(&pool, &s, &model, "pushed");
    assert_eq!(s.get(4).unwrap().unwrap().len(), 3 << 20);
    // Replace a big item by a small one and a small one by a big one.
    s.set(3, b"small now").unwrap();
    model[3] = b"small now".to_vec();
    s.set(6, &item(99, 200_000)).unwrap();
    model[6] = item(99, 200_000);
    assert_eq!(objects(&pool), base + 1 + 4);
    assert_matches(&pool, &s, &model, "set");
    // Insert one in the middle, remove another, find one by value.
    s.insert_at(2, &item(7, 70_000)).unwrap();
    model.insert(2, item(7, 70_000));
    assert_eq!(s.remove_at(5).unwrap(), model.remove(5).unwrap());
    assert_eq!(s.position(&item(7, 70_000), 1, 0, 0).unwrap(), vec![2]);
    assert_eq!(s.remove_value(&item(7, 70_000), 0).unwrap(), 1);
    model.remove(2);
    assert_matches(&pool, &s, &model, "edited");
    // Pops free their objects.
    while let Some(v) = s.pop_front().unwrap() {
        assert_eq!(Some(v), model.pop_front());
    }
    assert_eq!(objects(&pool), base + 1, "only the kept chunk is left");
    // Many big items at once, at both ends, then a trim that drops most of them.
    let items: Vec<Vec<u8>> = (0..40).map(|i| item(i, 1500 + i as usize)).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    s.push_back_many(&refs).unwrap();
    s.push_front_many(&refs).unwrap();
    model.extend(items.iter().cloned());
    for it in &items {
        model.push_front(it.clone());
    }
    assert_matches(&pool, &s, &model, "bulk");
    s.trim(30, 45).unwrap();
    let kept: VecDeque<Vec<u8>> = model.range(30..=45).cloned().collect();
    model = kept;
    assert_matches(&pool, &s, &model, "trimmed");
    assert_eq!(objects(&pool), base + s.check().segments as usize + 16);
}
