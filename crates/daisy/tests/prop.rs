//! Property test: random transactions against a model.
//!
//! Each case runs a random sequence of transactions (allocate objects of 1 byte to 600 KB,
//! write ranges, free, and sometimes abort at the end), with simulated crashes (drop without
//! draining, then reopen and recover) between them. After every step the pool must hold
//! exactly the model's objects with exactly their bytes, and nothing else.

use daisy::{Error, Pool, PoolOptions};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: u64,
        fill: u8,
    },
    Write {
        obj: usize,
        at: u64,
        len: u64,
        byte: u8,
    },
    Free {
        obj: usize,
    },
}

#[derive(Clone, Debug)]
enum Step {
    Tx { ops: Vec<Op>, abort: bool },
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (prop_oneof![1u64..200, 200u64..20_000, 60_000u64..120_000, 200_000u64..600_000], any::<u8>())
            .prop_map(|(size, fill)| Op::Alloc { size, fill }),
        4 => (any::<usize>(), any::<u64>(), 1u64..300, any::<u8>())
            .prop_map(|(obj, at, len, byte)| Op::Write { obj, at, len, byte }),
        2 => any::<usize>().prop_map(|obj| Op::Free { obj }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (prop::collection::vec(op(), 1..8), prop::bool::weighted(0.2))
            .prop_map(|(ops, abort)| Step::Tx { ops, abort }),
        1 => Just(Step::Crash),
    ]
}

/// Live objects: (offset, contents).
type Model = Vec<(u64, Vec<u8>)>;

fn check(pool: &Pool, model: &Model) {
    for (off, data) in model {
        let mut got = vec![0u8; data.len()];
        pool.read_bytes(*off, &mut got);
        assert!(got == *data, "object {off:#x} differs from the model");
    }
    let objs = pool.objects().unwrap();
    assert_eq!(
        objs.len(),
        model.len(),
        "allocated objects differ from the model"
    );
    let rep = pool.check(Some(&model.iter().map(|m| m.0).collect::<Vec<_>>()));
    assert!(rep.ok(), "{:?}", rep.problems);
}

fn run(steps: Vec<Step>) {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let path = dir.path().join("p.pool");
    let opts = PoolOptions::new("prop")
        .size(8 << 20)
        .max_size(256 << 20)
        .lanes(2);
    let mut pool = Pool::create(&path, &opts).unwrap();
    let mut model: Model = vec![];
    for s in steps {
        match s {
            Step::Crash => {
                pool.crash_for_test();
                pool = Pool::open(&path, "prop").unwrap();
            }
            Step::Tx { ops, abort } => {
                let mut next = model.clone();
                let r: Result<(), Error> = pool.transaction(|tx| {
                    for o in &ops {
                        match *o {
                            Op::Alloc { size, fill } => {
                                let data = vec![fill; size as usize];
                                let p = tx.alloc_bytes(&data)?;
                                next.push((p.offset(), data));
                            }
                            Op::Write { obj, at, len, byte } if !next.is_empty() => {
                                let i = obj % next.len();
                                let size = next[i].1.len() as u64;
                                let at = at % size;
                                let len = len.min(size - at);
                                let buf = vec![byte; len as usize];
                                tx.write_bytes(next[i].0 + at, &buf)?;
                                next[i].1[at as usize..(at + len) as usize].copy_from_slice(&buf);
                                // Read-your-writes inside the transaction.
                                let mut back = vec![0u8; size as usize];
                                tx.read_bytes(next[i].0, &mut back)?;
                                assert!(back == next[i].1, "read-your-writes");
                            }
                            Op::Free { obj } if !next.is_empty() => {
                                let i = obj % next.len();
                                let (off, _) = next.swap_remove(i);
                                tx.free(daisy::PPtr::<u8>::from_offset(off))?;
                            }
                            _ => {}
                        }
                    }
                    if abort {
                        return Err(Error::Aborted("test".into()));
                    }
                    Ok(())
                });
                match r {
                    Ok(()) => model = next,
                    Err(Error::Aborted(_)) => {}
                    Err(e) => panic!("unexpected error: {e}"),
                }
            }
        }
        check(&pool, &model);
    }
    pool.close().unwrap();
    let pool = Pool::open(&path, "prop").unwrap();
    check(&pool, &model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn transactions_match_model(steps in prop::collection::vec(step(), 1..40)) {
        run(steps);
    }
}
