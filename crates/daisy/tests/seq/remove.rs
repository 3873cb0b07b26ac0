//! Redis's LREM: removal by value from the head, from the tail, and everywhere.

use super::*;

#[test]
fn remove_by_value_counts_from_either_end() {
    let dir = tmp();
    let pool = new_pool(&dir, "rm.pool");
    let id = create(&pool, 256);
    let mut s = PSeq::open(&pool, id).unwrap();
    let mut model: VecDeque<Vec<u8>> = VecDeque::new();
    // Every fifth item is "x"; one of them is big (out of line), others short.
    for i in 0..600u64 {
        let it = if i % 5 == 0 {
            b"x".to_vec()
        } else {
            item(i, (i % 17) as usize)
        };
        model.push_back(it);
    }
    model[300] = vec![b'x'; 3000];
    let refs: Vec<&[u8]> = model.iter().map(|v| v.as_slice()).collect();
    s.push_back_many(&refs).unwrap();
    let chunks = s.check().segments;
    let positions =
        |m: &VecDeque<Vec<u8>>| -> Vec<usize> { (0..m.len()).filter(|&i| m[i] == b"x").collect() };
    // Two from the head.
    assert_eq!(s.remove_value(b"x", 2).unwrap(), 2);
    for i in positions(&model).into_iter().take(2).rev() {
        model.remove(i);
    }
    assert_matches(&pool, &s, &model, "two from the head");
    // Three from the tail.
    assert_eq!(s.remove_value(b"x", -3).unwrap(), 3);
    for i in positions(&model).into_iter().rev().take(3) {
        model.remove(i);
    }
    assert_matches(&pool, &s, &model, "three from the tail");
    // The big one.
    assert_eq!(s.remove_value(&[b'x'; 3000], 0).unwrap(), 1);
    model.retain(|v| v != &vec![b'x'; 3000]);
    // None left of a value that is not there.
    assert_eq!(s.remove_value(b"nothing", 0).unwrap(), 0);
    // All the rest.
    let n = positions(&model).len() as u64;
    assert_eq!(s.remove_value(b"x", 0).unwrap(), n);
    model.retain(|v| v != b"x");
    assert_matches(&pool, &s, &model, "all");
    assert!(s.check().segments <= chunks);
    // Chunks emptied by removals are freed: a sequence of one value empties to one chunk.
    s.clear().unwrap();
    let same: Vec<&[u8]> = vec![b"same"; 500];
    s.push_back_many(&same).unwrap();
    assert!(s.check().segments > 10);
    assert_eq!(s.remove_value(b"same", -499).unwrap(), 499);
    assert_eq!(s.range(0, -1).unwrap(), vec![b"same".to_vec()]);
    assert_eq!(s.check().segments, 1);
    assert_eq!(s.remove_value(b"same", 1).unwrap(), 1);
    assert_eq!(objects(&pool), 3, "root, header and the kept chunk");
    assert_ok(&s.check());
}
