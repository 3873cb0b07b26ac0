//! In-process cost of `daisy serve`'s commands, without sockets or parsing: commands run through
//! `commands::execute` in groups of G, one transaction per group, as the event loop's group
//! commit does (a round of 50 clients at pipeline 16 holds up to 800 commands). The arguments
//! follow redis-benchmark's tests (random members out of 100,000, 3-byte values).
//!
//! ```text
//! cargo run --release -p daisy-kv --example inproc -- lpush,hset,zadd 16 300000 [runs]
//! ```
//!
//! Prints per test the median over the runs of wall and CPU nanoseconds per command. Each test
//! first runs a quarter of N commands untimed (to fill its collection), then RUNS timed runs of
//! N commands each. The pool lies in /dev/shm (removed at the end).
use daisy::{Pool, PoolOptions};
use daisy_kv::commands::{self as cmd, Client, ServerState};
use daisy_kv::keyspace::{Keyspace, LAYOUT};
use std::time::Instant;

/// CPU time of this thread in nanoseconds.
fn cpu_ns() -> u64 {
    let (s, u) = daisy_kv::server::cpu_times()[2];
    let us = |t: (i64, i64)| t.0 as u64 * 1_000_000 + t.1 as u64;
    (us(s) + us(u)) * 1000
}

/// xorshift64: deterministic arguments.
fn rng(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn request(test: &str, s: &mut u64) -> Vec<Vec<u8>> {
    let r = format!("{:012}", rng(s) % 100_000).into_bytes();
    let el = [b"element:".as_slice(), &r].concat();
    let val = b"xxx".to_vec();
    let v = |a: &[&[u8]]| a.iter().map(|x| x.to_vec()).collect::<Vec<_>>();
    match test {
        "set" => v(&[b"SET", &[b"key:".as_slice(), &r].concat(), &val]),
        "get" => v(&[b"GET", &[b"key:".as_slice(), &r].concat()]),
        "incr" => v(&[b"INCR", b"counter:rand"]),
        "hset" => v(&[b"HSET", b"myhash", &el, &val]),
        "sadd" => v(&[b"SADD", b"myset", &el]),
        "spop" => v(&[b"SPOP", b"myset"]),
        "lpush" => v(&[b"LPUSH", b"mylist", &val]),
        "rpush" => v(&[b"RPUSH", b"mylist", &val]),
        "lpop" => v(&[b"LPOP", b"mylist"]),
        "rpop" => v(&[b"RPOP", b"mylist"]),
        "zadd" => {
            let score = format!("{}", rng(s) % 100_000).into_bytes();
            v(&[b"ZADD", b"myzset", &score, &el])
        }
        "zpopmin" => v(&[b"ZPOPMIN", b"myzset"]),
        _ => panic!("unknown test {test}"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let tests: Vec<String> = args
        .next()
        .unwrap_or("set,hset,sadd,spop,lpush,rpush,lpop,zadd,zpopmin".into())
        .split(',')
        .map(String::from)
        .collect();
    let group: usize = args.next().map_or(800, |s| s.parse().expect("group size"));
    let total: usize = args.next().map_or(400_000, |s| s.parse().expect("N"));
    let runs: usize = args.next().map_or(3, |s| s.parse().expect("runs"));
    let path = format!("/dev/shm/daisy-inproc-{}.pool", std::process::id());
    let _ = std::fs::remove_file(&path);
    let opts = PoolOptions::new(LAYOUT)
        .size(256 << 20)
        .max_size(8 << 30)
        .lanes(2)
        .log_slot_size(1 << 20);
    let pool = Pool::create(&path, &opts).expect("create pool");
    let mut ks = Keyspace::open(&pool, 16).expect("open keyspace");
    let mut sv = ServerState::new(&pool, 0);
    let table = cmd::Table::new();
    let mut cl = Client::default();
    let mut seed = 88172645463325252u64;
    let mut out = Vec::with_capacity(1 << 20);
    // One transaction per group of commands, then what the event loop does after a commit.
    let mut exec = |cmds: &[Vec<Vec<u8>>], group: usize| {
        for g in cmds.chunks(group) {
            out.clear();
            pool.transaction(|tx| {
                for c in g {
                    let args: Vec<&[u8]> = c.iter().map(|a| &a[..]).collect();
                    cmd::execute(&table, &mut ks, tx, &mut cl, &mut sv, &args, 0, &mut out)?;
                }
                Ok::<_, daisy::Error>(())
            })
            .expect("group transaction");
            ks.committed();
            while !ks.lazyfree_step(128).unwrap_or(true) {}
        }
    };
    for t in &tests {
        // A pop test pops what its push added: before each run, 2N pushes (random members
        // repeat in SADD/ZADD) so that the run finds its elements there.
        let fill = match t.as_str() {
            "spop" => Some("sadd"),
            "zpopmin" => Some("zadd"),
            "lpop" | "rpop" => Some("lpush"),
            _ => None,
        };
        let mut res = Vec::new();
        for r in 0..=runs {
            if let Some(f) = fill {
                let cmds: Vec<_> = (0..total * 2).map(|_| request(f, &mut seed)).collect();
                exec(&cmds, 800);
            }
            // Run 0 (a quarter of N) warms up and fills; it is not counted.
            let n = if r == 0 { total / 4 } else { total };
            let cmds: Vec<_> = (0..n).map(|_| request(t, &mut seed)).collect();
            let (t0, c0) = (Instant::now(), cpu_ns());
            exec(&cmds, group);
            let wall = t0.elapsed().as_nanos() as f64 / n as f64;
            if r > 0 {
                res.push((wall, (cpu_ns() - c0) as f64 / n as f64));
            }
        }
        res.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (w, c) = res[res.len() / 2];
        let all: Vec<String> = res.iter().map(|r| format!("{:.0}", r.1)).collect();
        println!(
            "{t:8} group {group}: {w:6.0} ns/cmd wall {c:6.0} cpu (median of {runs}; cpu {})",
            all.join(" ")
        );
    }
    drop(pool);
    let _ = std::fs::remove_file(&path);
}
