use super::*;
use std::ops::Bound;

#[test]
fn scratch_bounds() {
    let dir = tmp();
    let pool = new_pool(&dir, "r.pool");
    let id = create(&pool, 1024);
    let mut m = PTreeMap::open(&pool, id).unwrap();
    let mut model = Model::new();
    for i in 0..200u32 {
        let k = format!("key:{:06}", i * 7 % 211).into_bytes();
        m.insert(&k, b"").unwrap();
        model.insert(k, vec![]);
    }
    for i in 0..230u32 {
        let k = format!("key:{:06}", i).into_bytes();
        let below = model.range::<Vec<u8>, _>(..k.clone()).count() as u64;
        let upto = model.range::<Vec<u8>, _>(..=k.clone()).count() as u64;
        assert_eq!(
            m.lower_rank(Bound::Included(&k)).unwrap(),
            below,
            "lower incl {i}"
        );
        assert_eq!(
            m.lower_rank(Bound::Excluded(&k)).unwrap(),
            upto,
            "lower excl {i}"
        );
        assert_eq!(
            m.upper_rank(Bound::Included(&k)).unwrap(),
            upto,
            "upper incl {i}"
        );
        assert_eq!(
            m.upper_rank(Bound::Excluded(&k)).unwrap(),
            below,
            "upper excl {i}"
        );
    }
}
