//! Transaction-scoped views: read-your-writes, aborts, claims.

use super::*;

/// A sequence created in a transaction is used through a view in the same transaction, which
/// reads its own writes; it commits with it; an aborted transaction leaves nothing of what its
/// view did (allocations included); a second view of the same sequence is refused.
#[test]
fn views_work_inside_the_callers_transaction() {
    let dir = tmp();
    let pool = new_pool(&dir, "v.pool");
    let root = pool.root::<PPtr<PSeq>>().unwrap();
    let id = pool
        .transaction(|tx| {
            let id = PSeq::create_in_with(tx, 256)?;
            let mut v = PSeq::view(&pool, tx, id)?;
            for i in 0..500u64 {
                v.push_back(tx, &item(i, (i % 40) as usize))?;
            }
            v.push_front(tx, b"head")?;
            assert_eq!(v.len(tx)?, 501);
            assert_eq!(v.get(tx, 0)?.as_deref(), Some(&b"head"[..]));
            assert_eq!(v.get(tx, -1)?, Some(item(499, 19)));
            v.set(tx, 250, b"middle")?;
            assert_eq!(v.range(tx, 250, 250, false)?, vec![b"middle".to_vec()]);
            assert!(PSeq::view(&pool, tx, id).is_err(), "a second view");
            tx.write(root, &id)?;
            Ok::<_, Error>(id)
        })
        .unwrap();
    let mut model: VecDeque<Vec<u8>> = (0..500u64).map(|i| item(i, (i % 40) as usize)).collect();
    model.push_front(b"head".to_vec());
    model[250] = b"middle".to_vec();
    {
        let s = PSeq::open(&pool, id).unwrap();
        assert_matches(&pool, &s, &model, "committed");
    }
    let before = objects(&pool);
    let r: Result<(), Error> = pool.transaction(|tx| {
        let mut v = PSeq::view(&pool, tx, id)?;
        let many: Vec<Vec<u8>> = (0..300u64).map(|i| item(i, 50)).collect();
        let refs: Vec<&[u8]> = many.iter().map(|x| x.as_slice()).collect();
        v.push_back_many(tx, &refs)?;
        v.push_front(tx, &item(1, 10_000))?;
        v.pop_front_n(tx, 3)?;
        v.insert_at(tx, 100, b"in")?;
        v.remove_value(tx, b"middle", 0)?;
        v.trim(tx, 10, -10)?;
        assert_eq!(v.len(tx)?, 501 + 300 + 1 - 3 + 1 - 1 - 19);
        Err(Error::Aborted("no".into()))
    });
    assert!(r.is_err());
    assert_eq!(
        objects(&pool),
        before,
        "the aborted transaction allocated nothing"
    );
    let s = PSeq::open(&pool, id).unwrap();
    assert_matches(&pool, &s, &model, "after the abort");
}
