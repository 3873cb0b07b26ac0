use daisy::{counters, PHashMap, PPtr, Pool, PoolOptions};
use std::time::Instant;
fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1_000_000);
    let path = "/dev/shm/hm_probe.pool";
    let _ = std::fs::remove_file(path);
    let pool = Pool::create(
        path,
        &PoolOptions::new("probe").size(256 << 20).max_size(8 << 30),
    )
    .unwrap();
    let root = pool.root::<[PPtr<PHashMap<u32, u32>>; 2]>().unwrap();
    let ids = pool
        .transaction(|tx| {
            let a = PHashMap::<u32, u32>::create_in_with_seed(tx, 1)?;
            let b = PHashMap::<u32, u32>::create_in_with_seed(tx, 1)?;
            tx.write(root, &[a, b])?;
            Ok::<_, daisy::Error>([a, b])
        })
        .unwrap();
    let keys: Vec<u32> = (0..n)
        .map(|i| i.wrapping_mul(0x9E37_79B1) ^ 0x1234_5678)
        .collect();
    let mut m = PHashMap::open(&pool, ids[0]).unwrap();
    counters::enable(true);
    let _ = counters::take();
    for i in 0..1000u32 {
        m.insert(0xF000_0000 + i, i).unwrap();
    }
    let c = counters::take();
    println!(
        "no-split window: flushes/op {:.2} fences/op {:.2}",
        c.flushes as f64 / 1000.0,
        c.fences as f64 / 1000.0
    );
    let _ = counters::take();
    let t = Instant::now();
    let mut maxl = 0u128;
    let mut lat = Vec::with_capacity(keys.len());
    for (i, &k) in keys.iter().enumerate() {
        let t0 = Instant::now();
        m.insert(k, i as u32).unwrap();
        let l = t0.elapsed().as_nanos();
        lat.push((l, i));
        maxl = maxl.max(l);
    }
    let mut top = lat.clone();
    top.sort();
    top.reverse();
    println!("top latencies (ns, index): {:?}", &top[..8]);
    let mut ls: Vec<u128> = lat.iter().map(|x| x.0).collect();
    ls.sort();
    println!(
        "p50 {} p99 {} p999 {}",
        ls[ls.len() / 2],
        ls[ls.len() * 99 / 100],
        ls[ls.len() * 999 / 1000]
    );
    let el = t.elapsed();
    let c = counters::take();
    counters::enable(false);
    println!(
        "per-op: {:.1} ns/insert, max {} us, flushes/op {:.2} fences/op {:.2}",
        el.as_nanos() as f64 / n as f64,
        maxl / 1000,
        c.flushes as f64 / n as f64,
        c.fences as f64 / n as f64
    );
    let mut m2 = PHashMap::open(&pool, ids[1]).unwrap();
    let t = Instant::now();
    m2.batch(|b| {
        for (i, &k) in keys.iter().enumerate() {
            b.insert(k, i as u32)?;
        }
        Ok(())
    })
    .unwrap();
    let el = t.elapsed();
    println!("batch: {:.1} ns/insert", el.as_nanos() as f64 / n as f64);
    let t = Instant::now();
    let mut hm = std::collections::HashMap::new();
    for (i, &k) in keys.iter().enumerate() {
        hm.insert(k, i as u32);
    }
    println!(
        "dram: {:.1} ns/insert ({})",
        t.elapsed().as_nanos() as f64 / n as f64,
        hm.len()
    );
    let info = pool.info();
    let c1 = m.check();
    let c2 = m2.check();
    println!(
        "segments {} depth {} problems {:?}; used {} B -> {:.1} B/entry (both maps)",
        c1.segments,
        c1.depth,
        c1.problems.len() + c2.problems.len(),
        info.used,
        info.used as f64 / (2.0 * n as f64)
    );
    drop(m);
    drop(m2);
    drop(pool);
    let _ = std::fs::remove_file(path);
}
