//! A tiny RESP2/RESP3 client: commands go out as arrays of bulk strings, every reply is read
//! whole, kept as the exact bytes the server sent (what the test compares) and parsed (what
//! the property checks look at).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A parsed reply.
#[derive(Clone, Debug, PartialEq)]
pub enum V {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    /// RESP2's null bulk string (`$-1`).
    NilBulk,
    /// RESP2's null array (`*-1`).
    NilArray,
    /// RESP3's null (`_`).
    Null,
    Array(Vec<Reply>),
    Set(Vec<Reply>),
    /// RESP3 map: key, value, key, value, ...
    Map(Vec<Reply>),
    /// Any other RESP3 scalar (double, boolean, big number, verbatim): its type byte and line.
    Other(u8, Vec<u8>),
}

/// A reply: its bytes on the wire and what they mean.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub raw: Vec<u8>,
    pub v: V,
}

impl Reply {
    pub fn is_error(&self) -> bool {
        matches!(self.v, V::Error(_))
    }

    pub fn is_null(&self) -> bool {
        matches!(self.v, V::NilBulk | V::NilArray | V::Null)
    }

    /// The bytes of a bulk or simple string.
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.v {
            V::Bulk(b) | V::Simple(b) => Some(b),
            _ => None,
        }
    }

    pub fn int(&self) -> Option<i64> {
        match self.v {
            V::Int(n) => Some(n),
            _ => None,
        }
    }

    /// The elements of an aggregate reply (array, set, map flattened).
    pub fn items(&self) -> Option<&[Reply]> {
        match &self.v {
            V::Array(x) | V::Set(x) | V::Map(x) => Some(x),
            _ => None,
        }
    }

    /// The first line of an aggregate (its type byte and count), or the whole of a scalar.
    pub fn header(&self) -> &[u8] {
        let end = self
            .raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or(self.raw.len());
        &self.raw[..end]
    }

    /// The reply's kind: the header of an aggregate (its type and count), the type byte of
    /// anything else.
    pub fn shape(&self) -> &[u8] {
        if self.items().is_some() {
            self.header()
        } else {
            &self.raw[..1]
        }
    }

    /// Bulk strings of an aggregate (None when an element is something else).
    pub fn strings(&self) -> Option<Vec<Vec<u8>>> {
        self.items()?
            .iter()
            .map(|r| r.bytes().map(|b| b.to_vec()))
            .collect()
    }
}

/// Printable form of bytes (as redis-cli quotes them), shortened.
pub fn show(b: &[u8]) -> String {
    let mut s = String::new();
    for &c in b.iter().take(600) {
        match c {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    if b.len() > 600 {
        s.push_str(&format!("...({} bytes)", b.len()));
    }
    s
}

/// A command as redis-cli would show it.
pub fn show_cmd(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| format!("\"{}\"", show(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One connection.
pub struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
    pub who: &'static str,
}

impl Conn {
    pub fn connect(addr: SocketAddr, who: &'static str) -> Conn {
        let s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{who}: connect {addr}: {e}"));
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
            who,
        }
    }

    pub fn send(&mut self, args: &[Vec<u8>]) {
        self.send_many(std::slice::from_ref(&args.to_vec()));
    }

    /// Several commands in one write (a pipeline).
    pub fn send_many(&mut self, cmds: &[Vec<Vec<u8>>]) {
        let mut out = Vec::new();
        for args in cmds {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
        }
        self.w
            .write_all(&out)
            .unwrap_or_else(|e| panic!("{}: write: {e}", self.who));
    }

    pub fn call(&mut self, args: &[Vec<u8>]) -> Reply {
        self.send(args);
        self.read()
    }

    /// One whole reply.
    pub fn read(&mut self) -> Reply {
        let mut raw = Vec::new();
        let v = self.read_into(&mut raw);
        Reply { raw, v }
    }

    fn line(&mut self, raw: &mut Vec<u8>) -> Vec<u8> {
        let start = raw.len();
        match self.r.read_until(b'\n', raw) {
            Ok(0) => panic!("{}: connection closed while reading a reply", self.who),
            Ok(_) => {}
            Err(e) => panic!("{}: reading a reply: {e}", self.who),
        }
        let l = &raw[start..];
        assert!(
            l.ends_with(b"\r\n"),
            "{}: reply line without CRLF: {}",
            self.who,
            show(l)
        );
        l[1..l.len() - 2].to_vec()
    }

    fn read_into(&mut self, raw: &mut Vec<u8>) -> V {
        let start = raw.len();
        let line = self.line(raw);
        let t = raw[start];
        let num = || -> i64 {
            std::str::from_utf8(&line)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("bad length or integer in reply: {}", show(&line)))
        };
        match t {
            b'+' => V::Simple(line),
            b'-' => V::Error(line),
            b':' => V::Int(num()),
            b'_' => V::Null,
            b',' | b'#' | b'(' => V::Other(t, line),
            b'$' | b'=' | b'!' => {
                let n = num();
                if n < 0 {
                    return V::NilBulk;
                }
                let at = raw.len();
                raw.resize(at + n as usize + 2, 0);
                self.r
                    .read_exact(&mut raw[at..])
                    .unwrap_or_else(|e| panic!("{}: reading a bulk: {e}", self.who));
                assert_eq!(
                    &raw[raw.len() - 2..],
                    b"\r\n",
                    "{}: bulk without CRLF",
                    self.who
                );
                let body = raw[at..at + n as usize].to_vec();
                match t {
                    b'$' => V::Bulk(body),
                    b'!' => V::Error(body),
                    _ => V::Other(t, body),
                }
            }
            b'*' | b'~' | b'%' | b'>' => {
                let n = num();
                if n < 0 {
                    return V::NilArray;
                }
                let count = if t == b'%' { 2 * n } else { n };
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    let s = raw.len();
                    let v = self.read_into(raw);
                    items.push(Reply {
                        raw: raw[s..].to_vec(),
                        v,
                    });
                }
                match t {
                    b'~' => V::Set(items),
                    b'%' => V::Map(items),
                    _ => V::Array(items),
                }
            }
            _ => panic!("{}: unknown reply type: {}", self.who, show(&raw[start..])),
        }
    }
}
