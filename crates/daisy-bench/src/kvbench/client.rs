//! A RESP2 client for the benchmark's own traffic (readiness, INFO, DBSIZE, SHUTDOWN) and the
//! pipelined loads of the memory, restart and `update` cases.

use anyhow::{anyhow, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

/// Append the RESP encoding of one command to `out`.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// One connection to a server.
pub struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    pub fn connect(port: u16, timeout: Duration) -> std::io::Result<Conn> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let s = TcpStream::connect_timeout(&addr, timeout)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(120)))?;
        s.set_write_timeout(Some(Duration::from_secs(120)))?;
        Ok(Conn {
            r: BufReader::with_capacity(1 << 16, s.try_clone()?),
            w: s,
        })
    }

    /// The bytes already read but not yet parsed, and the socket.
    pub fn into_parts(self) -> (Vec<u8>, TcpStream) {
        (self.r.buffer().to_vec(), self.w)
    }

    pub fn set_read_timeout(&self, t: Duration) {
        let _ = self.w.set_read_timeout(Some(t));
    }

    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.w.write_all(bytes).map_err(|e| anyhow!("write: {e}"))
    }

    fn line(&mut self) -> Result<String> {
        let mut l = String::new();
        let n = self.r.read_line(&mut l).map_err(|e| anyhow!("read: {e}"))?;
        if n == 0 {
            return Err(anyhow!("the server closed the connection"));
        }
        if !l.ends_with("\r\n") {
            return Err(anyhow!("malformed reply line {l:?}"));
        }
        l.truncate(l.len() - 2);
        Ok(l)
    }

    pub fn read_reply(&mut self) -> Result<Reply> {
        let l = self.line()?;
        let (tag, rest) = l.split_at(l.len().min(1));
        let int = |s: &str| {
            s.parse::<i64>()
                .map_err(|_| anyhow!("malformed reply {l:?}"))
        };
        Ok(match tag {
            "+" => Reply::Simple(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Int(int(rest)?),
            "$" => {
                let n = int(rest)?;
                if n < 0 {
                    Reply::Bulk(None)
                } else {
                    let mut b = vec![0; n as usize + 2];
                    self.r
                        .read_exact(&mut b)
                        .map_err(|e| anyhow!("read: {e}"))?;
                    if &b[n as usize..] != b"\r\n" {
                        return Err(anyhow!("malformed bulk reply"));
                    }
                    b.truncate(n as usize);
                    Reply::Bulk(Some(b))
                }
            }
            "*" => {
                let n = int(rest)?;
                if n < 0 {
                    Reply::Array(None)
                } else {
                    let mut v = Vec::with_capacity(n.min(1024) as usize);
                    for _ in 0..n {
                        v.push(self.read_reply()?);
                    }
                    Reply::Array(Some(v))
                }
            }
            _ => return Err(anyhow!("malformed reply {l:?}")),
        })
    }

    /// One command, its reply.
    pub fn cmd(&mut self, args: &[&str]) -> Result<Reply> {
        let mut b = vec![];
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        encode(&mut b, &a);
        self.send(&b)?;
        self.read_reply()
    }

    /// One command that must not answer with an error.
    pub fn ok(&mut self, args: &[&str]) -> Result<Reply> {
        match self.cmd(args)? {
            Reply::Error(e) => Err(anyhow!("{}: -{e}", args.join(" "))),
            r => Ok(r),
        }
    }

    /// An integer reply (DBSIZE).
    pub fn int(&mut self, args: &[&str]) -> Result<i64> {
        match self.ok(args)? {
            Reply::Int(i) => Ok(i),
            r => Err(anyhow!(
                "{}: expected an integer, got {r:?}",
                args.join(" ")
            )),
        }
    }

    /// One field of INFO (`used_memory`): the number after `field:`.
    pub fn info_field(&mut self, section: &str, field: &str) -> Result<u64> {
        let text = match self.ok(&["INFO", section])? {
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
            r => return Err(anyhow!("INFO {section}: expected a bulk string, got {r:?}")),
        };
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| anyhow!("INFO {section} has no numeric {field}: field"))
    }
}

/// The value of `key:<i>` in the memory and restart loads: 8 bytes.
pub fn load_value(i: u64) -> String {
    format!("{:08}", i % 100_000_000)
}

/// SET the keys 0..k that `key_value` names, pipelined: batches of at most `per_batch`
/// commands written at once, then their replies read (each must be +OK); `progress` gets the
/// number of keys set after each batch.
fn set_pipelined(
    c: &mut Conn,
    k: u64,
    per_batch: u64,
    key_value: impl Fn(u64) -> (String, Vec<u8>),
    mut progress: impl FnMut(u64),
) -> Result<()> {
    let mut buf = Vec::new();
    let mut i = 0;
    while i < k {
        let end = (i + per_batch.max(1)).min(k);
        buf.clear();
        for j in i..end {
            let (key, val) = key_value(j);
            encode(&mut buf, &[b"SET", key.as_bytes(), &val]);
        }
        c.send(&buf)?;
        for j in i..end {
            match c.read_reply()? {
                Reply::Simple(s) if s == "OK" => {}
                r => return Err(anyhow!("SET {}: expected +OK, got {r:?}", key_value(j).0)),
            }
        }
        i = end;
        progress(i);
    }
    Ok(())
}

/// SET `key:<i>` = [`load_value`]`(i)` for i in 0..k, batches of 1000 commands written at once,
/// then their replies read (each must be +OK).
pub fn load_keys(c: &mut Conn, k: u64, progress: impl FnMut(u64)) -> Result<()> {
    set_pipelined(
        c,
        k,
        1000,
        |j| (format!("key:{j}"), load_value(j).into_bytes()),
        progress,
    )
}

/// Preload the `update` keys: `key:<i>` for i in 0..k, named as redis-benchmark names its
/// `-r` keys (`key:` and 12 digits), each with `size` bytes of `x` (redis-benchmark's value),
/// pipelined in batches of at most 1000 commands or 4 MiB.
pub fn preload_keys(c: &mut Conn, k: usize, size: usize) -> Result<()> {
    let per_batch = (1000).min((4 << 20) / size.max(1)).max(1) as u64;
    set_pipelined(
        c,
        k as u64,
        per_batch,
        |j| (format!("key:{j:012}"), vec![b'x'; size]),
        |_| {},
    )
}

/// What [`multi_exec_load`] measured.
#[derive(Clone, Copy, Debug)]
pub struct TxLoad {
    /// Transactions (EXECs) per second.
    pub tps: f64,
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl TxLoad {
    /// `n` operations in `secs`, with their latencies (microseconds) in `hist`.
    fn of(n: usize, secs: f64, hist: &hdrhistogram::Histogram<u64>) -> TxLoad {
        let ms = |us: u64| us as f64 / 1e3;
        TxLoad {
            tps: n as f64 / secs.max(1e-9),
            avg_ms: hist.mean() / 1e3,
            p50_ms: ms(hist.value_at_quantile(0.5)),
            p99_ms: ms(hist.value_at_quantile(0.99)),
            max_ms: ms(hist.max()),
        }
    }
}

/// An empty histogram of latencies in microseconds (1 us to about 12 days, 3 digits), as the
/// bench's own loaders record them.
fn latency_histogram() -> Result<hdrhistogram::Histogram<u64>> {
    hdrhistogram::Histogram::new_with_bounds(1, 1 << 40, 3).map_err(|e| anyhow!("histogram: {e}"))
}

/// The MULTI/EXEC case (redis-benchmark has none): `clients` connections, each sending
/// `pipeline` transactions at a time and reading all their replies before its next batch, `n`
/// transactions in all. A transaction is `MULTI; SET key:<r> <value>; INCR counter:<r % 1000>;
/// HSET hash:<r % 1000> f<r> <value>; EXEC` with r drawn from `keyspace` (a read-modify-write
/// of a counter and two writes that must happen together). Each reply is checked (+OK,
/// +QUEUED, and EXEC's array of three). Latency is measured per batch and counted for each
/// transaction in it, as redis-benchmark counts pipelined requests.
///
/// Like redis-benchmark, few threads drive many connections (two threads at most, each
/// writing a batch on every one of its connections, then reading their replies in turn), so
/// the load generator does not take the server's CPU with dozens of threads.
pub fn multi_exec_load(
    port: u16,
    clients: usize,
    n: usize,
    pipeline: usize,
    keyspace: usize,
    size: usize,
    seed: u64,
) -> Result<TxLoad> {
    let clients = clients.clamp(1, n.max(1));
    let threads = clients.min(2);
    let value = vec![b'x'; size.max(1)];
    let t0 = std::time::Instant::now();
    let results: Vec<Result<hdrhistogram::Histogram<u64>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let value = &value;
                // This thread's connections, and an even share of the transactions for each.
                let conns: Vec<usize> = (0..clients).filter(|c| c % threads == t).collect();
                s.spawn(move || -> Result<hdrhistogram::Histogram<u64>> {
                    let mut hist = latency_histogram()?;
                    let mut left: Vec<usize> = conns
                        .iter()
                        .map(|&c| n / clients + usize::from(c < n % clients))
                        .collect();
                    let mut cs = conns
                        .iter()
                        .map(|_| Conn::connect(port, Duration::from_secs(10)))
                        .collect::<std::io::Result<Vec<Conn>>>()?;
                    let mut x = (seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
                    let mut buf = Vec::new();
                    let mut key = Vec::new();
                    let mut field = Vec::new();
                    let mut counter = Vec::new();
                    let mut hash = Vec::new();
                    let mut batches = vec![0usize; cs.len()];
                    let mut sent = vec![std::time::Instant::now(); cs.len()];
                    while left.iter().any(|&l| l > 0) {
                        for (i, conn) in cs.iter_mut().enumerate() {
                            let batch = pipeline.max(1).min(left[i]);
                            batches[i] = batch;
                            if batch == 0 {
                                continue;
                            }
                            buf.clear();
                            for _ in 0..batch {
                                x ^= x << 13;
                                x ^= x >> 7;
                                x ^= x << 17;
                                let r = x % keyspace.max(1) as u64;
                                use std::io::Write as _;
                                key.clear();
                                let _ = write!(key, "key:{r:012}");
                                counter.clear();
                                let _ = write!(counter, "counter:{}", r % 1000);
                                hash.clear();
                                let _ = write!(hash, "hash:{}", r % 1000);
                                field.clear();
                                let _ = write!(field, "f{r}");
                                encode(&mut buf, &[b"MULTI"]);
                                encode(&mut buf, &[b"SET", &key, value]);
                                encode(&mut buf, &[b"INCR", &counter]);
                                encode(&mut buf, &[b"HSET", &hash, &field, value]);
                                encode(&mut buf, &[b"EXEC"]);
                            }
                            sent[i] = std::time::Instant::now();
                            conn.send(&buf)?;
                        }
                        for (i, conn) in cs.iter_mut().enumerate() {
                            let batch = batches[i];
                            for _ in 0..batch {
                                for w in ["OK", "QUEUED", "QUEUED", "QUEUED"] {
                                    match conn.read_reply()? {
                                        Reply::Simple(s) if s == w => {}
                                        r => {
                                            return Err(anyhow!(
                                                "MULTI/EXEC: expected +{w}, got {r:?}"
                                            ))
                                        }
                                    }
                                }
                                match conn.read_reply()? {
                                    Reply::Array(Some(a)) if a.len() == 3 => {}
                                    r => {
                                        return Err(anyhow!("EXEC: expected 3 replies, got {r:?}"))
                                    }
                                }
                            }
                            if batch > 0 {
                                let us = sent[i].elapsed().as_micros().max(1) as u64;
                                hist.record_n(us, batch as u64)
                                    .map_err(|e| anyhow!("histogram: {e}"))?;
                                left[i] -= batch;
                            }
                        }
                    }
                    Ok(hist)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a load thread panicked")))
            })
            .collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    let mut all = latency_histogram()?;
    for h in results {
        all.add(h?).map_err(|e| anyhow!("histogram: {e}"))?;
    }
    Ok(TxLoad::of(n, secs, &all))
}

/// Messages a subscriber may lag behind the publisher in [`pubsub_load`] before the
/// publisher waits: far below the `pubsub` output-buffer limit (8 MB soft) of both servers,
/// so the load measures steady delivery, never a subscriber disconnected for reading slowly.
const PUBSUB_WINDOW: u64 = 4096;

/// The pub/sub case (redis-benchmark has none): `subscribers` connections SUBSCRIBE to one
/// channel, then one publisher connection sends `n` PUBLISHes of a `size`-byte message,
/// `pipeline` at a time, reading their replies before its next batch (each must count every
/// subscriber) and staying at most [`PUBSUB_WINDOW`] messages ahead of the slowest
/// subscriber. Every subscriber must receive all `n` messages, byte for byte as sent (each
/// push is the same RESP2 `message` array, so a subscriber's stream is checked against it).
/// Two threads read the subscribers' sockets (non-blocking, in turn), as redis-benchmark
/// drives many connections from few threads. `tps` is messages published per second, the
/// time running until the last subscriber has the last message (deliveries per second are
/// `tps` x subscribers); latency is the publisher's, per batch, counted for each PUBLISH in it.
pub fn pubsub_load(
    port: u16,
    subscribers: usize,
    n: usize,
    pipeline: usize,
    size: usize,
) -> Result<TxLoad> {
    let subscribers = subscribers.max(1);
    let channel: &[u8] = b"bench:pubsub";
    let payload = vec![b'x'; size.max(1)];
    let mut message = Vec::new();
    encode(&mut message, &[b"message", channel, &payload]);
    let mut subs = Vec::with_capacity(subscribers);
    for _ in 0..subscribers {
        let mut c = Conn::connect(port, Duration::from_secs(10))?;
        let mut req = Vec::new();
        encode(&mut req, &[b"SUBSCRIBE", channel]);
        c.send(&req)?;
        match c.read_reply()? {
            Reply::Array(Some(a)) if a.len() == 3 => {}
            r => return Err(anyhow!("SUBSCRIBE: expected a confirmation, got {r:?}")),
        }
        subs.push(c);
    }
    let received: Vec<AtomicU64> = (0..subscribers).map(|_| AtomicU64::new(0)).collect();
    let failed = AtomicBool::new(false);
    let threads = subscribers.min(2);
    let total = n as u64;
    let t0 = std::time::Instant::now();
    let (hist, readers) = std::thread::scope(|s| {
        let mut shares: Vec<Vec<(usize, Conn)>> = (0..threads).map(|_| vec![]).collect();
        for (i, c) in subs.into_iter().enumerate() {
            shares[i % threads].push((i, c));
        }
        let readers: Vec<_> = shares
            .into_iter()
            .map(|mine| {
                let (received, failed, message) = (&received, &failed, &message);
                s.spawn(move || {
                    let r = read_subscribers(mine, received, failed, message, total);
                    if r.is_err() {
                        // The publisher stops too, instead of waiting for this subscriber.
                        failed.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let hist = publish(
            port,
            &received,
            &failed,
            subscribers,
            total,
            pipeline,
            &payload,
        );
        if hist.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
        let readers: Vec<Result<()>> = readers
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a subscriber thread panicked")))
            })
            .collect();
        (hist, readers)
    });
    let secs = t0.elapsed().as_secs_f64();
    // A subscriber's error says more than the publisher's that follows it.
    for r in readers {
        r?;
    }
    Ok(TxLoad::of(n, secs, &hist?))
}

/// [`pubsub_load`]'s publisher: `total` PUBLISHes of `payload`, `pipeline` at a time, at most
/// [`PUBSUB_WINDOW`] ahead of the slowest subscriber; its per-batch latencies.
fn publish(
    port: u16,
    received: &[AtomicU64],
    failed: &AtomicBool,
    subscribers: usize,
    total: u64,
    pipeline: usize,
    payload: &[u8],
) -> Result<hdrhistogram::Histogram<u64>> {
    let mut hist = latency_histogram()?;
    let mut c = Conn::connect(port, Duration::from_secs(10))?;
    let mut one = Vec::new();
    encode(&mut one, &[b"PUBLISH", b"bench:pubsub", payload]);
    let mut buf = Vec::new();
    let mut sent = 0u64;
    let slowest = || received.iter().map(|r| r.load(Ordering::Relaxed)).min();
    while sent < total {
        let start = std::time::Instant::now();
        while slowest().unwrap_or(0) + PUBSUB_WINDOW < sent {
            if failed.load(Ordering::Relaxed) {
                return Err(anyhow!("a subscriber failed"));
            }
            if start.elapsed() > Duration::from_secs(60) {
                return Err(anyhow!("a subscriber stopped receiving"));
            }
            std::thread::yield_now();
        }
        let batch = (pipeline.max(1) as u64).min(total - sent);
        buf.clear();
        for _ in 0..batch {
            buf.extend_from_slice(&one);
        }
        let t = std::time::Instant::now();
        c.send(&buf)?;
        for _ in 0..batch {
            match c.read_reply()? {
                Reply::Int(k) if k == subscribers as i64 => {}
                r => return Err(anyhow!("PUBLISH: expected :{subscribers}, got {r:?}")),
            }
        }
        hist.record_n(t.elapsed().as_micros().max(1) as u64, batch)
            .map_err(|e| anyhow!("histogram: {e}"))?;
        sent += batch;
    }
    Ok(hist)
}

/// [`pubsub_load`]'s readers: the subscribers `mine` (their numbers and connections), read
/// without blocking, in turn, until each has `total` messages. Each one's stream is `message`
/// repeated (every push is the same array): each byte is compared with its place in it.
fn read_subscribers(
    mine: Vec<(usize, Conn)>,
    received: &[AtomicU64],
    failed: &AtomicBool,
    message: &[u8],
    total: u64,
) -> Result<()> {
    let mut socks = Vec::with_capacity(mine.len());
    for (i, c) in mine {
        // What the confirmation's read left buffered comes first.
        let (buffered, sock) = c.into_parts();
        sock.set_nonblocking(true)?;
        socks.push((i, sock, buffered, 0usize));
    }
    let mut buf = vec![0u8; 1 << 16];
    let mut stalled = std::time::Instant::now();
    loop {
        let mut progress = false;
        let mut done = true;
        for (i, sock, pending, pos) in socks.iter_mut() {
            let got = received[*i].load(Ordering::Relaxed);
            if got >= total && pending.is_empty() {
                continue;
            }
            done = false;
            let k = if pending.is_empty() {
                match sock.read(&mut buf) {
                    Ok(0) => {
                        return Err(anyhow!("subscriber {i}: the server closed the connection"))
                    }
                    Ok(k) => k,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(anyhow!("subscriber {i}: read: {e}")),
                }
            } else {
                let k = pending.len().min(buf.len());
                buf[..k].copy_from_slice(&pending[..k]);
                pending.drain(..k);
                k
            };
            progress = true;
            let mut count = got;
            for &b in &buf[..k] {
                if b != message[*pos] {
                    return Err(anyhow!(
                        "subscriber {i}: message {} differs from what was published",
                        count + 1
                    ));
                }
                *pos += 1;
                if *pos == message.len() {
                    *pos = 0;
                    count += 1;
                }
            }
            if count > total {
                return Err(anyhow!("subscriber {i}: more than {total} messages"));
            }
            received[*i].store(count, Ordering::Relaxed);
        }
        if done || failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        if progress {
            stalled = std::time::Instant::now();
        } else if stalled.elapsed() > Duration::from_secs(60) {
            return Err(anyhow!("subscribers: no message for 60 s"));
        } else {
            std::thread::yield_now();
        }
    }
}

/// The consumer-group case (redis-benchmark has no such load): a stream `stream:rg` is filled
/// with `n` entries (field `f`, a value of `size` bytes; not timed) and given a group `g`; then
/// `clients` connections, each a consumer of its own, read and acknowledge all of them: a
/// batch of `pipeline` `XREADGROUP GROUP g c<i> COUNT 1 STREAMS stream:rg >` written at once,
/// their replies read (one new entry each: checked), then one `XACK stream:rg g <id>` for
/// each entry written at once and their replies read (`:1` each: checked). The rate is
/// messages read and acknowledged per second; latency per batch (both round trips), counted
/// for each message in it. Threads as in [`multi_exec_load`].
pub fn xreadgroup_load(
    port: u16,
    clients: usize,
    n: usize,
    pipeline: usize,
    size: usize,
) -> Result<TxLoad> {
    let clients = clients.clamp(1, n.max(1));
    let threads = clients.min(2);
    {
        let mut c = Conn::connect(port, Duration::from_secs(10))?;
        c.cmd(&["DEL", "stream:rg"])?;
        let value = vec![b'x'; size.max(1)];
        pipelined(&mut c, n as u64, 1000, |_, buf| {
            encode(buf, &[b"XADD", b"stream:rg", b"*", b"f", &value])
        })?;
        match c.cmd(&["XGROUP", "CREATE", "stream:rg", "g", "0"])? {
            Reply::Simple(s) if s == "OK" => {}
            r => return Err(anyhow!("XGROUP CREATE: {r:?}")),
        }
    }
    let t0 = std::time::Instant::now();
    let results: Vec<Result<hdrhistogram::Histogram<u64>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let conns: Vec<usize> = (0..clients).filter(|c| c % threads == t).collect();
                s.spawn(move || -> Result<hdrhistogram::Histogram<u64>> {
                    let mut hist = latency_histogram()?;
                    let mut left: Vec<usize> = conns
                        .iter()
                        .map(|&c| n / clients + usize::from(c < n % clients))
                        .collect();
                    let mut cs = conns
                        .iter()
                        .map(|_| Conn::connect(port, Duration::from_secs(10)))
                        .collect::<std::io::Result<Vec<Conn>>>()?;
                    let names: Vec<Vec<u8>> =
                        conns.iter().map(|c| format!("c{c}").into_bytes()).collect();
                    let mut buf = Vec::new();
                    let mut ids: Vec<Vec<Vec<u8>>> = vec![Vec::new(); cs.len()];
                    let mut sent = vec![std::time::Instant::now(); cs.len()];
                    while left.iter().any(|&l| l > 0) {
                        // Reads, on every connection, then their replies.
                        for (i, conn) in cs.iter_mut().enumerate() {
                            let batch = pipeline.max(1).min(left[i]);
                            if batch == 0 {
                                continue;
                            }
                            buf.clear();
                            for _ in 0..batch {
                                encode(
                                    &mut buf,
                                    &[
                                        b"XREADGROUP",
                                        b"GROUP",
                                        b"g",
                                        &names[i],
                                        b"COUNT",
                                        b"1",
                                        b"STREAMS",
                                        b"stream:rg",
                                        b">",
                                    ],
                                );
                            }
                            sent[i] = std::time::Instant::now();
                            conn.send(&buf)?;
                            ids[i].clear();
                            for _ in 0..batch {
                                ids[i].push(read_one_entry_id(conn)?);
                            }
                        }
                        // Acknowledgements of what each read.
                        for (i, conn) in cs.iter_mut().enumerate() {
                            if ids[i].is_empty() {
                                continue;
                            }
                            buf.clear();
                            for id in &ids[i] {
                                encode(&mut buf, &[b"XACK", b"stream:rg", b"g", id]);
                            }
                            conn.send(&buf)?;
                            for _ in 0..ids[i].len() {
                                match conn.read_reply()? {
                                    Reply::Int(1) => {}
                                    r => return Err(anyhow!("XACK: expected :1, got {r:?}")),
                                }
                            }
                            let us = sent[i].elapsed().as_micros().max(1) as u64;
                            hist.record_n(us, ids[i].len() as u64)
                                .map_err(|e| anyhow!("histogram: {e}"))?;
                            left[i] -= ids[i].len();
                        }
                    }
                    Ok(hist)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a load thread panicked")))
            })
            .collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    let mut all = latency_histogram()?;
    for h in results {
        all.add(h?).map_err(|e| anyhow!("histogram: {e}"))?;
    }
    Ok(TxLoad::of(n, secs, &all))
}

/// The ID of the one entry an `XREADGROUP ... COUNT 1 STREAMS key >` reply holds:
/// `[[key, [[id, fields]]]]`.
fn read_one_entry_id(conn: &mut Conn) -> Result<Vec<u8>> {
    let r = conn.read_reply()?;
    let one = |r: &Reply| -> Option<Vec<u8>> {
        let Reply::Array(Some(streams)) = r else {
            return None;
        };
        let Reply::Array(Some(kv)) = streams.first()? else {
            return None;
        };
        let Reply::Array(Some(entries)) = kv.get(1)? else {
            return None;
        };
        let Reply::Array(Some(e)) = entries.first()? else {
            return None;
        };
        match e.first()? {
            Reply::Bulk(Some(id)) if entries.len() == 1 => Some(id.clone()),
            _ => None,
        }
    };
    one(&r).ok_or_else(|| anyhow!("XREADGROUP: expected one new entry, got {r:?}"))
}

/// Send `n` commands, command j encoded by `make(j, buf)`, in batches of `per_batch` written
/// at once, then their replies read: none may be an error. For loads of any commands.
pub fn pipelined(
    c: &mut Conn,
    n: u64,
    per_batch: u64,
    mut make: impl FnMut(u64, &mut Vec<u8>),
) -> Result<()> {
    let mut buf = Vec::new();
    let mut i = 0;
    while i < n {
        let end = (i + per_batch.max(1)).min(n);
        buf.clear();
        for j in i..end {
            make(j, &mut buf);
        }
        c.send(&buf)?;
        for j in i..end {
            if let Reply::Error(e) = c.read_reply()? {
                return Err(anyhow!("command {j} of the load: -{e}"));
            }
        }
        i = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pub/sub loader against a real redis-server (skipped, saying so, without one): every
    /// subscriber gets every message, and a subscriber fed something else fails the load.
    #[test]
    fn pubsub_load_delivers_every_message_to_every_subscriber() {
        let Some(exe) = super::super::find_in_path("redis-server") else {
            eprintln!("skipped: redis-server is not installed");
            return;
        };
        let port = super::super::free_port().unwrap();
        let mut child = std::process::Command::new(exe)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        while !super::super::port_open(port) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let r = pubsub_load(port, 3, 5000, 16, 8);
        // A message to the channel that the publisher did not send: the subscribers see a
        // stream that differs from the published one.
        let stray = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let mut c = Conn::connect(port, Duration::from_secs(5)).unwrap();
            let mut req = Vec::new();
            encode(&mut req, &[b"PUBLISH", b"bench:pubsub", b"not the payload"]);
            c.send(&req).unwrap();
        });
        let bad = pubsub_load(port, 2, 200_000, 1, 8);
        stray.join().unwrap();
        let _ = child.kill();
        let _ = child.wait();
        let r = r.unwrap();
        assert!(r.tps > 0.0 && r.p50_ms > 0.0, "{r:?}");
        let e = bad.unwrap_err().to_string();
        assert!(
            e.contains("differs") || e.contains("expected :2"),
            "a stray message is caught: {e}"
        );
    }
}
