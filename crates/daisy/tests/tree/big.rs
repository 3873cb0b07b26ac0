//! Long keys and values: outline entries (a prefix inline, the rest in an item object),
//! separators too long to keep inline, a member of tens of megabytes.

use super::*;

/// Keys from one byte to 100 KB, many sharing a 2 KB prefix (so separators are long),
/// values up to 300 KB: everything reads back, ranks agree, removing frees every object.
#[test]
fn long_keys_values_and_separators_round_trip() {
    let dir = tmp();
    let pool = new_pool(&dir, "big.pool");
    let id = create(&pool, 256);
    let mut m = PTreeMap::open(&pool, id).unwrap();
    let mut model = Model::new();
    let common = vec![b'p'; 2048];
    for i in 0..400u32 {
        let key = match i % 4 {
            0 => format!("{i}").into_bytes(),
            1 => {
                let mut k = common.clone();
                k.extend_from_slice(format!("{:05}", i * 37 % 401).as_bytes());
                k
            }
            2 => vec![(i % 251) as u8; 1 + (i as usize * 263) % 100_000],
            _ => format!("key:{i:04}").into_bytes(),
        };
        let val = match i % 5 {
            0 => vec![],
            1 => vec![i as u8; 10],
            2 => vec![i as u8; 300],
            3 => vec![(i * 3) as u8; 1 + (i as usize * 997) % 300_000],
            _ => b"v".to_vec(),
        };
        assert_eq!(
            m.insert(&key, &val).unwrap(),
            model.insert(key, val).is_some()
        );
    }
    let c = m.check();
    assert_ok(&c);
    assert!(c.depth >= 2, "depth {}", c.depth);
    assert_eq!(contents(&m), model_vec(&model));
    for (r, (k, v)) in model.iter().enumerate() {
        assert_eq!(m.get(k).unwrap().as_ref(), Some(v));
        assert_eq!(m.rank(k).unwrap(), (r as u64, true));
    }
    // A key just below and just above each long shared-prefix key.
    let mut probe = common.clone();
    probe.extend_from_slice(b"00000");
    let below = model.range::<Vec<u8>, _>(..probe.clone()).count() as u64;
    assert_eq!(m.rank(&probe).unwrap().0, below);
    assert_no_leak(&pool, id);
    // Remove in an order unlike insertion; every item object goes with its entry.
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    for (i, k) in keys.iter().enumerate() {
        if i % 2 == 1 {
            assert_eq!(m.remove(k).unwrap(), model.remove(k));
        }
    }
    for k in keys.iter().rev() {
        assert_eq!(m.remove(k).unwrap(), model.remove(k));
    }
    assert!(m.is_empty().unwrap());
    assert_ok(&m.check());
    assert_eq!(
        daisy::tree_objects(&pool, id.offset()).unwrap().len(),
        1,
        "only the header"
    );
    assert_no_leak(&pool, id);
}

/// A sorted set with one member of 24 MB among short ones (Redis allows 512 MB members).
#[test]
fn a_member_of_tens_of_megabytes() {
    let dir = tmp();
    let pool = new_pool(&dir, "huge.pool");
    let id = create(&pool, PTreeMap::DEFAULT_NODE_SIZE);
    let mut m = PTreeMap::open(&pool, id).unwrap();
    for i in 0..500u32 {
        m.insert(&zkey(1.0, format!("m{i:04}").as_bytes()), b"")
            .unwrap();
    }
    let mut big = vec![b'm'; 24 << 20];
    big[1] = b'0';
    big[5 << 20] = 1; // differs from every short member past the prefix
    let k = zkey(1.0, &big);
    assert!(!m.insert(&k, b"").unwrap());
    let (r, found) = m.rank(&k).unwrap();
    assert!(found);
    // "m0" + ... sorts after "m0000".."m0499"? Compare with the model's order.
    let mut keys: Vec<Vec<u8>> = (0..500u32)
        .map(|i| zkey(1.0, format!("m{i:04}").as_bytes()))
        .collect();
    keys.push(k.clone());
    keys.sort();
    assert_eq!(keys.iter().position(|x| *x == k).unwrap() as u64, r);
    assert_eq!(m.entry_at_rank(r).unwrap().unwrap().0, k);
    assert_ok(&m.check());
    assert_eq!(m.remove(&k).unwrap(), Some(vec![]));
    assert_ok(&m.check());
    assert_no_leak(&pool, id);
}
