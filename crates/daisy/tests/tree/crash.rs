//! Crashes: a tree reopens intact after a clean close and after a crash, committed
//! operations (splits and merges included) survive, uncommitted ones leave nothing.

use super::*;

#[test]
fn committed_operations_survive_close_and_crash() {
    let dir = tmp();
    let path = dir.path().join("c.pool");
    let pool = new_pool(&dir, "c.pool");
    let id = create(&pool, 256);
    let mut model = Model::new();
    {
        let mut m = PTreeMap::open(&pool, id).unwrap();
        for i in 0..1500u32 {
            let k = format!("{:05}", i * 7 % 1511).into_bytes();
            m.insert(&k, &[i as u8; 3]).unwrap();
            model.insert(k, vec![i as u8; 3]);
        }
    }
    pool.close().unwrap();
    let pool = Pool::open(&path, "test.tree").unwrap();
    {
        let mut m = PTreeMap::open(&pool, id).unwrap();
        assert_eq!(contents(&m), model_vec(&model));
        // More work, with merges, then a crash with nothing made durable beyond the commits.
        for i in 0..1000u32 {
            let k = format!("{:05}", i * 3 % 1511).into_bytes();
            assert_eq!(m.remove(&k).unwrap(), model.remove(&k));
        }
        // A committed transaction whose record is durable but not applied: recovery
        // replays it (a split, counts, the length).
        pool.fail_next_apply_for_test();
        let r = pool.transaction(|tx| {
            for i in 0..40u32 {
                let k = format!("z{i:03}").into_bytes();
                m.insert_tx(tx, &k, b"late")?;
            }
            Ok::<_, Error>(())
        });
        assert!(r.is_ok(), "{r:?}");
        for i in 0..40u32 {
            model.insert(format!("z{i:03}").into_bytes(), b"late".to_vec());
        }
    }
    pool.crash_for_test();
    let pool = Pool::open(&path, "test.tree").unwrap();
    assert!(pool.recovery_report().records_replayed > 0);
    let m = PTreeMap::open(&pool, id).unwrap();
    assert_eq!(m.len().unwrap(), model.len() as u64);
    assert_eq!(contents(&m), model_vec(&model));
    assert_ok(&m.check());
    assert_no_leak(&pool, id);
}
