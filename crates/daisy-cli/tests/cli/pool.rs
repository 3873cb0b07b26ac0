//! `daisy pool create/info/check`: pools made, described and checked; bad input refused;
//! damaged allocator metadata and damaged hash maps found.

use super::*;

#[test]
fn pool_create_info_check() {
    let d = tmpdir();
    let p = d.path().join("a.pool");
    let o = run(daisy().args(["pool", "create"]).arg(&p).args([
        "--size",
        "16MiB",
        "--max-size",
        "1GiB",
        "--layout",
        "demo",
    ]));
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("created"), "{}", text(&o));

    let o = run(daisy()
        .args(["pool", "info"])
        .arg(&p)
        .args(["--format", "json"]));
    assert!(o.status.success(), "{}", text(&o));
    let v = &json_lines(&o)[0];
    assert_eq!(v["layout"], "demo");
    assert_eq!(v["format_version"], 5);
    assert_eq!(v["objects"], 0);
    assert!(v["max_size"].as_u64().unwrap() <= 1 << 30);
    assert!(v["uuid"].as_str().unwrap().len() == 36);
    if v["fs"] == "tmpfs" {
        assert_eq!(v["mode"], "pmem");
        assert!(
            ["clwb", "clflushopt", "clflush"].contains(&v["flush_instruction"].as_str().unwrap())
        );
    }
    let o = run(daisy().args(["pool", "info"]).arg(&p));
    assert!(text(&o).contains("persistence:"), "{}", text(&o));

    let o = run(daisy().args(["pool", "check"]).arg(&p));
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("check: OK"));

    // The mode override is honoured and printed.
    let q = d.path().join("m.pool");
    let o = run(daisy()
        .args(["pool", "create"])
        .arg(&q)
        .args(["--size", "16MiB", "--mode", "msync"]));
    assert!(o.status.success(), "{}", text(&o));
    let o = run(daisy()
        .args(["pool", "info"])
        .arg(&q)
        .args(["--format", "json"])
        .env("DAISY_MODE", "msync"));
    assert_eq!(json_lines(&o)[0]["mode"], "msync");
}

#[test]
fn pool_commands_refuse_bad_input_clearly() {
    let d = tmpdir();
    let p = d.path().join("a.pool");
    assert!(run(daisy()
        .args(["pool", "create"])
        .arg(&p)
        .args(["--size", "16MiB"]))
    .status
    .success());

    // Existing file.
    let o = run(daisy()
        .args(["pool", "create"])
        .arg(&p)
        .args(["--size", "16MiB"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("already exists") && text(&o).contains("a.pool"),
        "{}",
        text(&o)
    );
    // Unparseable and too small sizes.
    let o = run(daisy()
        .args(["pool", "create"])
        .arg(d.path().join("b.pool"))
        .args(["--size", "12XB"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("invalid size"), "{}", text(&o));
    let o = run(daisy()
        .args(["pool", "create"])
        .arg(d.path().join("b.pool"))
        .args(["--size", "4KiB"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("too small"), "{}", text(&o));
    assert!(!d.path().join("b.pool").exists());
    // A file that is not a pool.
    let junk = d.path().join("junk");
    std::fs::write(&junk, b"definitely not a pool").unwrap();
    for cmd in ["info", "check"] {
        let o = run(daisy().args(["pool", cmd]).arg(&junk));
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        assert!(
            text(&o).contains("not a Daisy pool") && text(&o).contains("junk"),
            "{}",
            text(&o)
        );
    }
    // A directory, a missing file.
    let o = run(daisy().args(["pool", "info"]).arg(d.path()));
    assert!(text(&o).contains("is a directory"), "{}", text(&o));
    let o = run(daisy()
        .args(["pool", "info"])
        .arg(d.path().join("missing.pool")));
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("missing.pool"), "{}", text(&o));
    // Wrong arguments.
    let o = run(daisy().args(["pool", "frobnicate"]));
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn pool_check_reports_damaged_allocator_metadata() {
    let d = tmpdir();
    let p = d.path().join("dmg.pool");
    {
        let pool = daisy::Pool::create(
            &p,
            &daisy::PoolOptions::new("x")
                .size(16 << 20)
                .max_size(64 << 20)
                .lanes(4),
        )
        .unwrap();
        let _root = pool.root::<[u64; 4]>().unwrap();
    }
    let o = run(daisy().args(["pool", "check"]).arg(&p));
    assert!(o.status.success(), "{}", text(&o));
    // Set a bitmap bit past the last block of the root's run: allocator metadata now lies.
    let mut bytes = std::fs::read(&p).unwrap();
    let hdr: daisy::internals::Header =
        bytemuck::pod_read_unaligned(&bytes[..std::mem::size_of::<daisy::internals::Header>()]);
    let chunk0 = hdr.heap_off as usize;
    let entry = u64::from_le_bytes(
        bytes[hdr.chunk_table_off as usize..][..8]
            .try_into()
            .unwrap(),
    );
    let Some(daisy::internals::ChunkEntry::Run { class }) =
        daisy::internals::ChunkEntry::decode(entry)
    else {
        panic!("chunk 0 should hold the root's run");
    };
    let (n, data_off) = daisy::internals::run_geometry(class as usize);
    let word = (n as usize / 64) * 8;
    assert!(word < data_off as usize);
    let mut w = u64::from_le_bytes(bytes[chunk0 + word..][..8].try_into().unwrap());
    w |= 1 << 63;
    if n % 64 == 0 {
        // No spare bit in the last word: flip a whole spare word instead.
        w = u64::MAX;
    }
    bytes[chunk0 + word..chunk0 + word + 8].copy_from_slice(&w.to_le_bytes());
    std::fs::write(&p, &bytes).unwrap();
    let o = run(daisy()
        .args(["pool", "check"])
        .arg(&p)
        .args(["--format", "json"]));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v = &json_lines(&o)[0];
    assert_eq!(v["ok"], false);
    assert!(v["problems"][0].as_str().unwrap().contains("bitmap"), "{v}");
}

/// `pool check` finds hash maps in any pool and verifies their invariants; damage fails it.
#[test]
fn pool_check_verifies_hash_maps() {
    use daisy::{PHashMap, PPtr, Pool, PoolOptions};
    let d = tmpdir();
    let path = d.path().join("maps.pool");
    {
        let pool = Pool::create(&path, &PoolOptions::new("app").size(16 << 20)).unwrap();
        let root = pool.root::<PPtr<PHashMap<u32, u32>>>().unwrap();
        let id = pool
            .transaction(|tx| {
                let id = PHashMap::<u32, u32>::create_in_with_seed(tx, 1)?;
                tx.write(root, &id)?;
                Ok::<_, daisy::Error>(id)
            })
            .unwrap();
        let mut m = PHashMap::open(&pool, id).unwrap();
        for k in 0..5000 {
            m.insert(k, k * 3).unwrap();
        }
    }
    let o = run(daisy().args(["pool", "check"]).arg(&path));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("fixed-size hash map at")
            && t.contains("5000 entries")
            && t.contains("invariants hold"),
        "{t}"
    );
    // Damage: one entry's key overwritten with another's (a key stored twice, one lost).
    {
        let pool = Pool::open(&path, "app").unwrap();
        let seg = pool
            .objects()
            .unwrap()
            .into_iter()
            .find(|o| o.size == 16384)
            .unwrap()
            .off;
        let mut img = vec![0u8; 16384];
        pool.read_bytes(seg, &mut img);
        let live: Vec<usize> = (0..2048)
            .map(|i| i * 8)
            .filter(|&o| img[o..o + 4] != [0xFF; 4])
            .collect();
        let (a, b) = (live[0], live[1]);
        let key_a = img[a..a + 4].to_vec();
        pool.transaction(|tx| tx.write_bytes(seg + b as u64, &key_a))
            .unwrap();
    }
    let o = run(daisy()
        .args(["pool", "check", "--format", "json"])
        .arg(&path));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: Value = json_lines(&o).pop().unwrap();
    assert_eq!(v["ok"], false);
    let maps = v["hash_maps"].as_array().unwrap();
    assert_eq!(maps.len(), 1);
    let problems = maps[0]["problems"].to_string();
    assert!(
        problems.contains("stored twice")
            || problems.contains("another segment")
            || problems.contains("home"),
        "{problems}"
    );
}

/// `pool check` finds sequences in any pool (by their header), reports their items and chunks
/// and verifies their invariants; a header whose length disagrees with the chunks fails it.
#[test]
fn pool_check_verifies_sequences() {
    use daisy::{PPtr, PSeq, Pool, PoolOptions};
    let d = tmpdir();
    let path = d.path().join("seq.pool");
    let hdr = {
        let pool = Pool::create(&path, &PoolOptions::new("app").size(16 << 20)).unwrap();
        let root = pool.root::<PPtr<PSeq>>().unwrap();
        let id = pool
            .transaction(|tx| {
                // 256-byte chunks: a thousand items span many of them.
                let id = PSeq::create_in_with(tx, 256)?;
                tx.write(root, &id)?;
                Ok::<_, daisy::Error>(id)
            })
            .unwrap();
        let mut s = PSeq::open(&pool, id).unwrap();
        for i in 0..1000u32 {
            let item = format!("item-{i}");
            if i % 2 == 0 {
                s.push_back(item.as_bytes()).unwrap();
            } else {
                s.push_front(item.as_bytes()).unwrap();
            }
        }
        id.offset()
    };
    let o = run(daisy()
        .args(["pool", "check", "--format", "json"])
        .arg(&path));
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = json_lines(&o).pop().unwrap();
    let found: Vec<&Value> = v["hash_maps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "sequence")
        .collect();
    assert_eq!(found.len(), 1, "{v}");
    assert_eq!(found[0]["header"], hdr, "{v}");
    assert_eq!(found[0]["entries"], 1000, "{v}");
    assert!(found[0]["segments"].as_u64().unwrap() > 20, "{v}");
    let o = run(daisy().args(["pool", "check"]).arg(&path));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains(&format!("sequence at {hdr:#x}: 1000 items in"))
            && t.contains("chunks: invariants hold"),
        "{t}"
    );
    // Damage: the header's length (offset 24) one more than the chunks hold.
    {
        let pool = Pool::open(&path, "app").unwrap();
        let len: u64 = pool.read(PPtr::from_offset(hdr + 24));
        assert_eq!(len, 1000);
        pool.transaction(|tx| tx.write(PPtr::<u64>::from_offset(hdr + 24), &1001))
            .unwrap();
    }
    let o = run(daisy().args(["pool", "check"]).arg(&path));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains(&format!("PROBLEM: sequence at {hdr:#x}")), "{t}");
}

/// `pool check` finds ordered maps in any pool and verifies their invariants (shape, counts,
/// order); a wrong entry count in the header fails it.
#[test]
fn pool_check_verifies_ordered_maps() {
    use daisy::{PPtr, PTreeMap, Pool, PoolOptions};
    let d = tmpdir();
    let path = d.path().join("tree.pool");
    let id = {
        let pool = Pool::create(&path, &PoolOptions::new("app").size(16 << 20)).unwrap();
        let root = pool.root::<PPtr<PTreeMap>>().unwrap();
        let id = pool
            .transaction(|tx| {
                let id = PTreeMap::create_in_with(tx, 256)?;
                tx.write(root, &id)?;
                Ok::<_, daisy::Error>(id)
            })
            .unwrap();
        let mut m = PTreeMap::open(&pool, id).unwrap();
        for k in 0..3000u32 {
            m.insert(&(k * 7919 % 3001).to_be_bytes(), b"value")
                .unwrap();
        }
        id
    };
    let o = run(daisy().args(["pool", "check"]).arg(&path));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let line = t
        .lines()
        .find(|l| l.starts_with("ordered map at"))
        .unwrap_or_else(|| panic!("no ordered map reported: {t}"));
    assert!(
        line.contains("3000 entries")
            && line.contains("levels")
            && line.ends_with("invariants hold"),
        "{line}"
    );
    assert!(t.contains("check: OK"), "{t}");
    // Damage: the header's entry count (not covered by its checksum) one short.
    {
        let pool = Pool::open(&path, "app").unwrap();
        pool.transaction(|tx| tx.write_bytes(id.offset() + 32, &2999u64.to_le_bytes()))
            .unwrap();
    }
    let o = run(daisy()
        .args(["pool", "check", "--format", "json"])
        .arg(&path));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: Value = json_lines(&o).pop().unwrap();
    assert_eq!(v["ok"], false);
    let maps = v["hash_maps"].as_array().unwrap();
    let tree = maps
        .iter()
        .find(|m| m["kind"] == "ordered map")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(tree["entries"], 3000, "{tree}");
    assert!(tree["depth"].as_u64().unwrap() >= 3, "{tree}");
    assert!(!tree["problems"].as_array().unwrap().is_empty(), "{tree}");
    assert!(v["problems"].to_string().contains("ordered map at"), "{v}");
}

/// A badly damaged pool: `pool check` prints its verdict and the kinds of problems first, then
/// at most 100 problems (all of them with --all), and exits 1.
#[test]
fn pool_check_summarises_many_problems_first() {
    let d = tmpdir();
    let p = d.path().join("many.pool");
    let objects = 130;
    {
        let pool = daisy::Pool::create(
            &p,
            &daisy::PoolOptions::new("x")
                .size(48 << 20)
                .max_size(64 << 20),
        )
        .unwrap();
        pool.transaction(|tx| {
            for _ in 0..objects {
                tx.alloc_zeroed_bytes(200 << 10)?;
            }
            Ok::<_, daisy::Error>(())
        })
        .unwrap();
    }
    // Every large object's chunk-table entry becomes a value no entry can have.
    let mut bytes = std::fs::read(&p).unwrap();
    let hdr: daisy::internals::Header =
        bytemuck::pod_read_unaligned(&bytes[..std::mem::size_of::<daisy::internals::Header>()]);
    let table = hdr.chunk_table_off as usize;
    let mut damaged = 0;
    for c in 0..(64 << 20) / (256 << 10) {
        let at = table + c * 8;
        let e = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        if let Some(daisy::internals::ChunkEntry::Large { .. }) =
            daisy::internals::ChunkEntry::decode(e)
        {
            bytes[at..at + 8].copy_from_slice(&(7u64 << 56 | 3).to_le_bytes());
            damaged += 1;
        }
    }
    assert_eq!(damaged, objects);
    std::fs::write(&p, &bytes).unwrap();
    let o = run(daisy().args(["pool", "check"]).arg(&p));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    let first = t.lines().next().unwrap();
    assert!(
        first.contains("check: FAILED") && first.contains(" problems ("),
        "{first}"
    );
    assert_eq!(
        t.lines().filter(|l| l.starts_with("PROBLEM:")).count(),
        100,
        "{t}"
    );
    assert!(t.contains("more problems (--all prints them all)"), "{t}");
    let o = run(daisy().args(["pool", "check", "--all"]).arg(&p));
    assert!(
        text(&o)
            .lines()
            .filter(|l| l.starts_with("PROBLEM:"))
            .count()
            >= objects,
        "{}",
        text(&o)
    );
    let o = run(daisy().args(["pool", "check", "--format", "json"]).arg(&p));
    let v = &json_lines(&o)[0];
    assert!(
        v["problem_kinds"][0]["count"].as_u64().unwrap() >= 100,
        "{v}"
    );
}
