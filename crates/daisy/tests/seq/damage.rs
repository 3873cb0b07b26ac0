//! Damaged sequences: the checker reports damage, operations give errors, never panics.

use super::*;

/// A sequence of a few chunks, with one out-of-line item; returns the pool, id and the
/// chunks (head first).
fn sample(dir: &tempfile::TempDir, name: &str) -> (Pool, PPtr<PSeq>, Vec<u64>) {
    let pool = new_pool(dir, name);
    let id = create(&pool, 128);
    let mut s = PSeq::open(&pool, id).unwrap();
    for i in 0..40u64 {
        s.push_back(&item(i, 10)).unwrap();
    }
    s.set(20, &item(7, 300)).unwrap();
    assert_ok(&s.check());
    drop(s);
    let mut chunks = vec![];
    let mut c: u64 = pool.read(PPtr::<u64>::from_offset(id.offset() + 32));
    while c != 0 {
        chunks.push(c);
        c = pool.read(PPtr::<u64>::from_offset(c + 8));
    }
    assert_eq!(chunks.len(), 5);
    (pool, id, chunks)
}

/// Every read and write, run on a damaged sequence: each returns (an error or a value) and
/// none panics.
fn exercise(pool: &Pool, id: PPtr<PSeq>) -> Vec<String> {
    let mut errors = vec![];
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut note = |r: daisy::Result<()>| {
            if let Err(e) = r {
                errors.push(e.to_string());
            }
        };
        let _ = daisy::check_all(pool);
        let _ = daisy::seq_objects(pool, id.offset());
        let _ = daisy::seq_items(pool, id.offset());
        let mut s = match PSeq::open(pool, id) {
            Ok(s) => s,
            Err(e) => {
                note(Err(e));
                return;
            }
        };
        let _ = s.check();
        note(s.range(0, -1).map(|_| ()));
        note(s.range_rev(0, -1).map(|_| ()));
        note(
            s.iter(0, false)
                .and_then(|i| i.collect::<daisy::Result<Vec<_>>>())
                .map(|_| ()),
        );
        note(
            s.iter(-1, true)
                .and_then(|i| i.collect::<daisy::Result<Vec<_>>>())
                .map(|_| ()),
        );
        for i in [0i64, 5, 20, 33, -1] {
            note(s.get(i).map(|_| ()));
        }
        note(s.position(b"zz", -1, 0, 0).map(|_| ()));
        note(s.insert_at(17, b"in").map(|_| ()));
        note(s.set(9, &[1u8; 40]).map(|_| ()));
        note(s.remove_at(25).map(|_| ()));
        note(s.remove_value(&item(3, 10), 0).map(|_| ()));
        note(s.push_back(b"tail").map(|_| ()));
        note(s.push_front(b"head").map(|_| ()));
        note(s.pop_front_n(3).map(|_| ()));
        note(s.pop_back_n(3).map(|_| ()));
        note(s.trim(2, -2));
    }));
    assert!(r.is_ok(), "an operation panicked on a damaged sequence");
    errors
}

/// Damage the checker must report: a chunk's window word, an item's bytes, a broken back
/// link, a cycle, an item object freed, a wrong length. Each damaged read is an error.
#[test]
fn check_reports_damaged_chunks() {
    type Damage = fn(&Pool, PPtr<PSeq>, &[u64]);
    let damages: [(&str, Damage, &str); 7] = [
        (
            "window tag",
            |p, _, c| write(p, c[2] + 22, &[0, 0]),
            "invalid header word",
        ),
        (
            "window past the chunk",
            |p, _, c| write(p, c[1] + 18, &200u16.to_le_bytes()),
            "invalid header word",
        ),
        (
            "item bytes",
            |p, _, c| {
                let start: u16 = p.read(PPtr::from_offset(c[3] + 16));
                write(p, c[3] + start as u64, &[0x7f])
            },
            "items do not parse",
        ),
        (
            "back link",
            |p, _, c| write(p, c[4], &c[1].to_le_bytes()),
            "prev is",
        ),
        (
            "cycle",
            |p, _, c| write(p, c[4] + 8, &c[1].to_le_bytes()),
            "appears twice",
        ),
        (
            "length",
            |p, id, _| write(p, id.offset() + 24, &41u64.to_le_bytes()),
            "header len",
        ),
        (
            "chunk count",
            |p, id, _| write(p, id.offset() + 48, &7u64.to_le_bytes()),
            "chunks",
        ),
    ];
    for (what, damage, expect) in damages {
        let dir = tmp();
        let (pool, id, chunks) = sample(&dir, "d.pool");
        damage(&pool, id, &chunks);
        let all = daisy::check_all(&pool).unwrap();
        let c = all
            .iter()
            .find(|c| c.header == id.offset())
            .expect("still found");
        assert!(
            c.problems.iter().any(|p| p.contains(expect)),
            "{what}: {:?}",
            c.problems
        );
        assert!(daisy::seq_objects(&pool, id.offset()).is_err(), "{what}");
        let errors = exercise(&pool, id);
        eprintln!(
            "{what}: {} errors, first {:?}",
            errors.len(),
            errors.first()
        );
        if !matches!(what, "length" | "chunk count") {
            assert!(!errors.is_empty(), "{what}: no operation noticed");
        }
    }
    // A freed item object.
    let dir = tmp();
    let (pool, id, chunks) = sample(&dir, "f.pool");
    let big = {
        let s = PSeq::open(&pool, id).unwrap();
        s.check()
            .objects
            .into_iter()
            .find(|o| *o != id.offset() && !chunks.contains(o))
            .unwrap()
    };
    pool.transaction(|tx| tx.free(PPtr::<u8>::from_offset(big)))
        .unwrap();
    let c = PSeq::open(&pool, id).unwrap().check();
    assert!(
        c.problems
            .iter()
            .any(|p| p.contains("not an allocated object")),
        "{:?}",
        c.problems
    );
}

/// A damaged header: refused at open with a clear error.
#[test]
fn damaged_headers_are_refused() {
    for (what, at, bytes) in [
        ("magic", 0u64, &b"DAISYSQX"[..]),
        ("checksum", 16, &[1, 2, 3, 4][..]),
        ("format", 8, &[9, 0, 0, 0][..]),
        ("flags", 20, &[2, 0, 0, 0][..]),
        ("head without tail", 40, &[0; 8][..]),
    ] {
        let dir = tmp();
        let (pool, id, _) = sample(&dir, "h.pool");
        write(&pool, id.offset() + at, bytes);
        let e = PSeq::open(&pool, id).unwrap_err();
        assert!(matches!(e, Error::NotACollection { .. }), "{what}: {e}");
        assert!(daisy::seq_items(&pool, id.offset()).is_err(), "{what}");
    }
}

/// Random bytes flipped in the header and the chunks (seeded, printed): every operation
/// returns, none panics, and the checker never panics.
#[test]
fn random_damage_never_panics() {
    let seed = 0xd15c_u64;
    eprintln!("seed {seed}");
    let mut rng = xorshift(seed);
    for round in 0..150 {
        let dir = tmp();
        let (pool, id, chunks) = sample(&dir, "r.pool");
        for _ in 0..(1 + rng() % 4) {
            let target = if rng().is_multiple_of(4) {
                id.offset()
            } else {
                chunks[(rng() % 5) as usize]
            };
            let at = target + rng() % if target == id.offset() { 64 } else { 128 };
            write(&pool, at, &[rng() as u8]);
        }
        let errors = exercise(&pool, id);
        if round < 5 {
            eprintln!("round {round}: {} operations failed", errors.len());
        }
    }
}

fn write(pool: &Pool, at: u64, bytes: &[u8]) {
    pool.transaction(|tx| tx.write_bytes(at, bytes)).unwrap();
}
