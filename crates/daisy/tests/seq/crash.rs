//! Reopening after a close and after a crash.

use super::*;

/// Every kind of operation, then a crash (the handle dropped as a crash would: nothing made
/// durable beyond what commits did, logs not retired), or a crash right after the commit
/// fence and before anything was applied: the reopened sequence holds every committed
/// operation.
#[test]
fn committed_operations_survive_a_crash() {
    let dir = tmp();
    let path = dir.path().join("c.pool");
    let mut pool = new_pool(&dir, "c.pool");
    let id = create(&pool, 128);
    let mut model: VecDeque<Vec<u8>> = VecDeque::new();
    let mut rng = xorshift(42);
    for step in 0..120u64 {
        let mut s = PSeq::open(&pool, id).unwrap();
        let it = item(step, (rng() % 60) as usize);
        let len = model.len() as u64;
        let op = step % 8;
        // Operations that always commit one transaction.
        let fail = step % 3 == 2 && matches!(op, 0 | 1 | 4);
        if fail {
            // The next commit stops after its commit fence: recovery must replay it.
            pool.fail_next_apply_for_test();
        }
        match op {
            0 => {
                let its: Vec<Vec<u8>> = (0..10).map(|k| item(step * 10 + k, 9)).collect();
                let refs: Vec<&[u8]> = its.iter().map(|v| v.as_slice()).collect();
                s.push_back_many(&refs).unwrap();
                model.extend(its);
            }
            1 => {
                s.push_front(&it).unwrap();
                model.push_front(it);
            }
            2 => {
                assert_eq!(s.pop_front().unwrap(), model.pop_front());
            }
            3 => {
                assert_eq!(
                    s.pop_back_n(2).unwrap(),
                    (0..2).map_while(|_| model.pop_back()).collect::<Vec<_>>()
                );
            }
            4 => {
                let at = rng() % (len + 1);
                s.insert_at(at, &it).unwrap();
                model.insert(at as usize, it);
            }
            5 if len > 0 => {
                let at = rng() % len;
                s.set(at as i64, &it).unwrap();
                model[at as usize] = it;
            }
            6 if len > 0 => {
                let at = rng() % len;
                assert_eq!(
                    s.remove_at(at as i64).unwrap(),
                    model.remove(at as usize).unwrap()
                );
            }
            7 if len > 20 => {
                s.trim(2, -3).unwrap();
                model.pop_front();
                model.pop_front();
                model.pop_back();
                model.pop_back();
            }
            _ => {
                s.push_back(&it).unwrap();
                model.push_back(it);
            }
        }
        drop(s);
        if fail {
            // The failed apply poisoned the pool: reopen (the crash it simulates).
            drop(pool);
            pool = Pool::open(&path, LAYOUT).unwrap();
            assert!(pool.recovery_report().records_replayed > 0, "step {step}");
        } else if step % 3 == 1 {
            pool.crash_for_test();
            pool = Pool::open(&path, LAYOUT).unwrap();
        }
        let s = PSeq::open(&pool, id).unwrap();
        assert_matches(&pool, &s, &model, &format!("after step {step} (op {op})"));
    }
    // And after a clean close.
    pool.close().unwrap();
    let pool = Pool::open(&path, LAYOUT).unwrap();
    assert_eq!(pool.recovery_report().records_replayed, 0);
    let s = PSeq::open(&pool, id).unwrap();
    assert_matches(&pool, &s, &model, "after close");
}
