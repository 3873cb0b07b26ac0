//! Property tests: random operation sequences against std's `VecDeque`, the sequence checked
//! (`check`, contents, no leak) after every operation; operations run self-durably, inside
//! transactions that commit or abort, through views, and across crashes.

use super::*;
use proptest::prelude::*;

/// One operation, with what it returns.
#[derive(Clone, Debug)]
pub enum SOp {
    PushBack(Vec<Vec<u8>>),
    PushFront(Vec<Vec<u8>>),
    PopFront(u64),
    PopBack(u64),
    Get(i64),
    Set(i64, Vec<u8>),
    /// Position as a fraction of len + 1 (raw % (len + 1)).
    Insert(u64, Vec<u8>),
    InsertAfter(i64, Vec<u8>),
    RemoveAt(i64),
    RemoveValue(Vec<u8>, i64),
    Trim(i64, i64),
    Range(i64, i64, bool),
    Position(Vec<u8>, i64, u64, u64),
    Iter(i64, bool),
    Clear,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out {
    Len(u64),
    Items(Vec<Vec<u8>>),
    Item(Option<Vec<u8>>),
    Count(u64),
    Positions(Vec<u64>),
    NoSuchIndex,
    Unit,
}

fn redis_range(s: i64, e: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i128;
    let (mut s, mut e) = (s as i128, e as i128);
    if s < 0 {
        s += len;
    }
    if e < 0 {
        e += len;
    }
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as usize, e as usize))
}

fn norm(i: i64, len: usize) -> Option<usize> {
    let p = if i < 0 { len as i64 + i } else { i };
    (p >= 0 && (p as usize) < len).then_some(p as usize)
}

/// What `op` does to the model, and returns.
pub fn model_apply(m: &mut VecDeque<Vec<u8>>, op: &SOp) -> Out {
    match op {
        SOp::PushBack(items) => {
            m.extend(items.iter().cloned());
            Out::Len(m.len() as u64)
        }
        SOp::PushFront(items) => {
            for it in items {
                m.push_front(it.clone());
            }
            Out::Len(m.len() as u64)
        }
        SOp::PopFront(n) => Out::Items((0..*n).map_while(|_| m.pop_front()).collect()),
        SOp::PopBack(n) => Out::Items((0..*n).map_while(|_| m.pop_back()).collect()),
        SOp::Get(i) => Out::Item(norm(*i, m.len()).map(|p| m[p].clone())),
        SOp::Set(i, v) => match norm(*i, m.len()) {
            Some(p) => {
                m[p] = v.clone();
                Out::Unit
            }
            None => Out::NoSuchIndex,
        },
        SOp::Insert(raw, v) => {
            let p = (*raw % (m.len() as u64 + 1)) as usize;
            m.insert(p, v.clone());
            Out::Len(m.len() as u64)
        }
        SOp::InsertAfter(i, v) => match norm(*i, m.len()) {
            Some(p) => {
                m.insert(p + 1, v.clone());
                Out::Len(m.len() as u64)
            }
            None => Out::NoSuchIndex,
        },
        SOp::RemoveAt(i) => match norm(*i, m.len()) {
            Some(p) => Out::Item(m.remove(p)),
            None => Out::NoSuchIndex,
        },
        SOp::RemoveValue(v, count) => {
            let limit = if *count == 0 {
                usize::MAX
            } else {
                count.unsigned_abs() as usize
            };
            let mut idx: Vec<usize> = (0..m.len()).filter(|&i| m[i] == *v).collect();
            if *count < 0 {
                idx.reverse();
            }
            idx.truncate(limit);
            idx.sort_unstable();
            for &i in idx.iter().rev() {
                m.remove(i);
            }
            Out::Count(idx.len() as u64)
        }
        SOp::Trim(s, e) => {
            match redis_range(*s, *e, m.len()) {
                None => m.clear(),
                Some((s, e)) => {
                    m.truncate(e + 1);
                    m.drain(..s);
                }
            }
            Out::Unit
        }
        SOp::Range(s, e, rev) => {
            let mut v: Vec<Vec<u8>> = match redis_range(*s, *e, m.len()) {
                None => vec![],
                Some((s, e)) => m.range(s..=e).cloned().collect(),
            };
            if *rev {
                v.reverse();
            }
            Out::Items(v)
        }
        SOp::Position(v, rank, count, maxlen) => {
            let n = m.len();
            let order: Vec<usize> = if *rank < 0 {
                (0..n).rev().collect()
            } else {
                (0..n).collect()
            };
            let mut skip = rank.unsigned_abs() - 1;
            let mut out = vec![];
            for (seen, &i) in order.iter().enumerate() {
                if *maxlen != 0 && seen as u64 >= *maxlen {
                    break;
                }
                if m[i] == *v {
                    if skip > 0 {
                        skip -= 1;
                    } else {
                        out.push(i as u64);
                        if *count != 0 && out.len() as u64 >= *count {
                            break;
                        }
                    }
                }
            }
            Out::Positions(out)
        }
        SOp::Iter(from, rev) => Out::Items(match norm(*from, m.len()) {
            None => vec![],
            Some(p) if *rev => m.range(..=p).rev().cloned().collect(),
            Some(p) => m.range(p..).cloned().collect(),
        }),
        SOp::Clear => {
            m.clear();
            Out::Unit
        }
    }
}

fn out_of<T>(r: daisy::Result<T>, f: impl FnOnce(T) -> Out) -> daisy::Result<Out> {
    match r {
        Ok(v) => Ok(f(v)),
        Err(Error::IndexOutOfRange { .. }) => Ok(Out::NoSuchIndex),
        Err(e) => Err(e),
    }
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|x| x.as_slice()).collect()
}

/// `op` on the handle, each write its own transaction.
pub fn seq_apply(s: &mut PSeq, op: &SOp) -> daisy::Result<Out> {
    match op {
        SOp::PushBack(items) => out_of(s.push_back_many(&refs(items)), Out::Len),
        SOp::PushFront(items) => out_of(s.push_front_many(&refs(items)), Out::Len),
        SOp::PopFront(n) if *n == 1 => {
            out_of(s.pop_front(), |v| Out::Items(v.into_iter().collect()))
        }
        SOp::PopBack(n) if *n == 1 => out_of(s.pop_back(), |v| Out::Items(v.into_iter().collect())),
        SOp::PopFront(n) => out_of(s.pop_front_n(*n), Out::Items),
        SOp::PopBack(n) => out_of(s.pop_back_n(*n), Out::Items),
        SOp::Get(i) => out_of(s.get(*i), Out::Item),
        SOp::Set(i, v) => out_of(s.set(*i, v), |_| Out::Unit),
        SOp::Insert(raw, v) => {
            let p = *raw % (s.len()? + 1);
            out_of(s.insert_at(p, v), Out::Len)
        }
        SOp::InsertAfter(i, v) => out_of(s.insert_after(*i, v), Out::Len),
        SOp::RemoveAt(i) => out_of(s.remove_at(*i), |v| Out::Item(Some(v))),
        SOp::RemoveValue(v, c) => out_of(s.remove_value(v, *c), Out::Count),
        SOp::Trim(a, b) => out_of(s.trim(*a, *b), |_| Out::Unit),
        SOp::Range(a, b, false) => out_of(s.range(*a, *b), Out::Items),
        SOp::Range(a, b, true) => out_of(s.range_rev(*a, *b), Out::Items),
        SOp::Position(v, r, c, m) => out_of(s.position(v, *r, *c, *m), Out::Positions),
        SOp::Iter(from, rev) => {
            let items: daisy::Result<Vec<Vec<u8>>> = s.iter(*from, *rev)?.collect();
            out_of(items, Out::Items)
        }
        SOp::Clear => out_of(s.clear(), |_| Out::Unit),
    }
}

/// `op` through a view inside `tx`.
pub fn view_apply(v: &mut daisy::SeqView, tx: &mut daisy::Tx, op: &SOp) -> daisy::Result<Out> {
    match op {
        SOp::PushBack(items) => out_of(v.push_back_many(tx, &refs(items)), Out::Len),
        SOp::PushFront(items) => out_of(v.push_front_many(tx, &refs(items)), Out::Len),
        SOp::PopFront(n) if *n == 1 => {
            out_of(v.pop_front(tx), |x| Out::Items(x.into_iter().collect()))
        }
        SOp::PopBack(n) if *n == 1 => {
            out_of(v.pop_back(tx), |x| Out::Items(x.into_iter().collect()))
        }
        SOp::PopFront(n) => out_of(v.pop_front_n(tx, *n), Out::Items),
        SOp::PopBack(n) => out_of(v.pop_back_n(tx, *n), Out::Items),
        SOp::Get(i) => out_of(v.get(tx, *i), Out::Item),
        SOp::Set(i, x) => out_of(v.set(tx, *i, x), |_| Out::Unit),
        SOp::Insert(raw, x) => {
            let p = *raw % (v.len(tx)? + 1);
            out_of(v.insert_at(tx, p, x), Out::Len)
        }
        SOp::InsertAfter(i, x) => out_of(v.insert_after(tx, *i, x), Out::Len),
        SOp::RemoveAt(i) => out_of(v.remove_at(tx, *i), |x| Out::Item(Some(x))),
        SOp::RemoveValue(x, c) => out_of(v.remove_value(tx, x, *c), Out::Count),
        SOp::Trim(a, b) => out_of(v.trim(tx, *a, *b), |_| Out::Unit),
        SOp::Range(a, b, rev) => out_of(v.range(tx, *a, *b, *rev), Out::Items),
        SOp::Position(x, r, c, m) => out_of(v.position(tx, x, *r, *c, *m), Out::Positions),
        SOp::Iter(from, rev) => {
            let items: daisy::Result<Vec<Vec<u8>>> = v.iter(tx, *from, *rev)?.collect();
            out_of(items, Out::Items)
        }
        SOp::Clear => out_of(v.clear(tx), |_| Out::Unit),
    }
}

/// Items from a small alphabet of values (so removals by value and positions find repeats),
/// of lengths that are empty, short, near a small chunk's inline limit, or out of line.
pub fn value() -> impl Strategy<Value = Vec<u8>> {
    let len = prop_oneof![
        4 => 0usize..12,
        2 => 20usize..70,
        1 => 200usize..1500,
        1 => 2000usize..9000,
    ];
    (0u8..6, len).prop_map(|(k, n)| vec![b'a' + k; n])
}

fn index() -> impl Strategy<Value = i64> {
    prop_oneof![6 => -30i64..30, 1 => -300i64..300, 1 => any::<i64>()]
}

pub fn op() -> impl Strategy<Value = SOp> {
    prop_oneof![
        10 => prop::collection::vec(value(), 1..4).prop_map(SOp::PushBack),
        8 => prop::collection::vec(value(), 1..4).prop_map(SOp::PushFront),
        2 => prop::collection::vec(value(), 20..120).prop_map(SOp::PushBack),
        1 => prop::collection::vec(value(), 20..120).prop_map(SOp::PushFront),
        4 => (1u64..4).prop_map(SOp::PopFront),
        4 => (1u64..4).prop_map(SOp::PopBack),
        1 => (10u64..80).prop_map(SOp::PopFront),
        1 => (10u64..80).prop_map(SOp::PopBack),
        3 => index().prop_map(SOp::Get),
        4 => (index(), value()).prop_map(|(i, v)| SOp::Set(i, v)),
        5 => (any::<u64>(), value()).prop_map(|(i, v)| SOp::Insert(i, v)),
        1 => (index(), value()).prop_map(|(i, v)| SOp::InsertAfter(i, v)),
        4 => index().prop_map(SOp::RemoveAt),
        2 => (value(), -3i64..4).prop_map(|(v, c)| SOp::RemoveValue(v, c)),
        2 => (index(), index()).prop_map(|(a, b)| SOp::Trim(a, b)),
        2 => (index(), index(), any::<bool>()).prop_map(|(a, b, r)| SOp::Range(a, b, r)),
        2 => (value(), prop_oneof![1i64..3, -3i64..-1], 0u64..3, 0u64..40)
            .prop_map(|(v, r, c, m)| SOp::Position(v, r, c, m)),
        1 => (index(), any::<bool>()).prop_map(|(f, r)| SOp::Iter(f, r)),
        1 => Just(SOp::Clear),
    ]
}

#[derive(Clone, Debug)]
enum Step {
    One(SOp),
    /// Several operations in one transaction (the handle's `_tx` methods through a view),
    /// committed or aborted.
    Tx(Vec<SOp>, bool),
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => op().prop_map(Step::One),
        2 => (prop::collection::vec(op(), 1..12), prop::bool::weighted(0.3))
            .prop_map(|(o, a)| Step::Tx(o, a)),
        1 => Just(Step::Crash),
    ]
}

fn chunk_size() -> impl Strategy<Value = u32> {
    prop_oneof![Just(128u32), Just(256), Just(512), Just(1024), Just(4096)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn sequence_matches_std_vecdeque(steps in prop::collection::vec(step(), 1..80), cb in chunk_size()) {
        let dir = tmp();
        let path = dir.path().join("p.pool");
        let mut pool = new_pool(&dir, "p.pool");
        let id = create(&pool, cb);
        let mut s = PSeq::open(&pool, id).unwrap();
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        for (n, st) in steps.iter().enumerate() {
            match st {
                Step::One(op) => {
                    let want = model_apply(&mut model, op);
                    let got = seq_apply(&mut s, op).unwrap();
                    prop_assert_eq!(got, want, "step {}: {:?}", n, op);
                }
                Step::Tx(ops, abort) => {
                    let mut staged = model.clone();
                    drop(s);
                    let r: Result<(), Error> = pool.transaction(|tx| {
                        let mut v = PSeq::view(&pool, tx, id)?;
                        for op in ops {
                            let want = model_apply(&mut staged, op);
                            let got = view_apply(&mut v, tx, op)?;
                            assert_eq!(got, want, "step {n}: {op:?} in a transaction");
                            // Read-your-writes: the view sees what the transaction wrote.
                            assert_eq!(v.len(tx)?, staged.len() as u64);
                        }
                        // Garbage a trim or clear left is collected in the same transaction.
                        while !v.collect_garbage(tx, 8)? {}
                        if *abort { Err(Error::Aborted("prop".into())) } else { Ok(()) }
                    });
                    prop_assert_eq!(r.is_ok(), !*abort, "step {}: {:?}", n, r);
                    if !*abort {
                        model = staged;
                    }
                    s = PSeq::open(&pool, id).unwrap();
                }
                Step::Crash => {
                    drop(s);
                    pool.crash_for_test();
                    pool = Pool::open(&path, LAYOUT).unwrap();
                    s = PSeq::open(&pool, id).unwrap();
                }
            }
            assert_matches(&pool, &s, &model, &format!("after step {n}"));
        }
    }
}
