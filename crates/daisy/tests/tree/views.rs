//! Transaction-scoped views: a tree created and filled in one transaction, reads that see
//! the transaction's writes, aborts that leave nothing, exclusion with handles.

use super::*;
use std::ops::Bound::{Included, Unbounded};

#[test]
fn views_work_inside_the_callers_transaction() {
    let dir = tmp();
    let pool = new_pool(&dir, "view.pool");
    let root = pool.root::<PPtr<PTreeMap>>().unwrap();
    let id = pool
        .transaction(|tx| {
            let id = PTreeMap::create_in_with(tx, 256)?;
            let mut v = PTreeMap::view(&pool, tx, id)?;
            assert!(v.is_empty(tx)?);
            for i in 0..2000u32 {
                v.insert(tx, format!("f{i:05}").as_bytes(), &i.to_le_bytes())?;
            }
            // Reads see this transaction's writes.
            assert_eq!(v.len(tx)?, 2000);
            assert_eq!(v.get(tx, b"f00007")?, Some(7u32.to_le_bytes().to_vec()));
            assert_eq!(v.remove(tx, b"f00007")?, Some(7u32.to_le_bytes().to_vec()));
            assert!(!v.contains_key(tx, b"f00007")?);
            assert_eq!(v.rank(tx, b"f00010")?, (9, true));
            assert_eq!(v.entry_at_rank(tx, 9)?.unwrap().0, b"f00010");
            assert_eq!(
                v.count_range(tx, Included(&b"f00100"[..]), Unbounded)?,
                1900
            );
            assert_eq!(v.lower_rank(tx, Included(&b"f00100"[..]))?, 99);
            assert_eq!(v.upper_rank(tx, Unbounded)?, 1999);
            let r = v.range(tx, Included(&b"f01990"[..]), Unbounded, true, 2, 3)?;
            assert_eq!(
                r.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
                vec![b"f01997".to_vec(), b"f01996".to_vec(), b"f01995".to_vec()]
            );
            assert_eq!(v.range_by_rank(tx, 0, 1, true)?.len(), 2);
            assert_eq!(v.first(tx)?.unwrap().0, b"f00000");
            assert_eq!(v.pop_first(tx)?.unwrap().0, b"f00000");
            assert_eq!(v.last(tx)?.unwrap().0, b"f01999");
            assert_eq!(v.pop_last(tx)?.unwrap().0, b"f01999");
            assert_eq!(v.remove_range_by_rank(tx, 0, 9)?, 10);
            assert_eq!(v.remove_range(tx, Included(&b"f01900"[..]), Unbounded)?, 99);
            assert_eq!(v.len(tx)?, 1888);
            tx.write(root, &id)?;
            Ok::<_, Error>(id)
        })
        .unwrap();
    {
        let m = PTreeMap::open(&pool, id).unwrap();
        assert_eq!(m.len().unwrap(), 1888);
        assert_ok(&m.check());
        // Claimed by the handle: no view meanwhile.
        let e = pool
            .transaction(|tx| PTreeMap::view(&pool, tx, id).map(|_| ()))
            .unwrap_err();
        assert!(matches!(e, Error::CollectionInUse { .. }), "{e}");
    }
    let before = {
        let m = PTreeMap::open(&pool, id).unwrap();
        contents(&m)
    };
    // A failed transaction leaves nothing of what its view did: not the entries, not the
    // nodes its splits made, not the merges.
    let objects = pool.objects().unwrap().len();
    let r: Result<(), Error> = pool.transaction(|tx| {
        let mut v = PTreeMap::view(&pool, tx, id)?;
        for i in 0..500u32 {
            v.insert(tx, format!("g{i:05}").as_bytes(), &[1; 30])?;
        }
        v.remove_range_by_rank(tx, 0, 1000)?;
        assert!(PTreeMap::view(&pool, tx, id).is_err(), "a second view");
        Err(Error::Aborted("no".into()))
    });
    assert!(r.is_err());
    assert_eq!(pool.objects().unwrap().len(), objects);
    let m = PTreeMap::open(&pool, id).unwrap();
    assert_eq!(contents(&m), before);
    assert_ok(&m.check());
    assert_no_leak(&pool, id);
}
