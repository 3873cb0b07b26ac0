//! A RESP2 client for the benchmark's own traffic (readiness, INFO, DBSIZE, SHUTDOWN) and the
//! pipelined loads of the memory, restart and `update` cases.

use anyhow::{anyhow, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
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
