//! RESP2 framing: parsing requests (multibulk and inline) out of a connection's input buffer
//! without copying them, and writing replies.
//!
//! The parser never allocates from a length it read: a bulk or multibulk count over the
//! limit is refused by its header alone, and argument ranges point into the input buffer
//! (an inline request's quoted arguments are unescaped there, in place).

use std::io::Write as _;
use std::ops::Range;

/// Redis's limits (defaults as Redis 7: proto-max-bulk-len 512 MB, inline 64 KB).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_bulk_len: u64,
    pub max_multibulk_len: u64,
    pub max_inline_len: usize,
    /// The client has not authenticated yet (with a password set): Redis then accepts at
    /// most [`UNAUTH_MAX_MULTIBULK`] arguments of at most [`UNAUTH_MAX_BULK`] bytes, so an
    /// unauthenticated peer cannot make the server buffer large requests.
    pub unauthenticated: bool,
}

/// Redis's limits for a client that has not authenticated.
pub const UNAUTH_MAX_MULTIBULK: i64 = 10;
pub const UNAUTH_MAX_BULK: i64 = 16384;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 << 20,
            max_multibulk_len: i32::MAX as u64,
            max_inline_len: 64 << 10,
            unauthenticated: false,
        }
    }
}

/// Outcome of one parse attempt at the start of `buf`.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole request yet: read more.
    Incomplete,
    /// One request of `consumed` bytes; its arguments were pushed (none for an empty line
    /// or `*0`, which Redis skips).
    Request { consumed: usize },
    /// A protocol error (Redis's text, without "ERR "): reply it and close the connection.
    Error(String),
}

/// Find `\r\n` at or after `from`; the index of `\r`.
#[inline]
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 1 < buf.len() {
        match buf[i + 1..].iter().position(|&b| b == b'\n') {
            Some(p) => {
                let nl = i + 1 + p;
                if buf[nl - 1] == b'\r' {
                    return Some(nl - 1);
                }
                i = nl;
            }
            None => return None,
        }
    }
    None
}

/// Parse a decimal integer as Redis's string2ll does (optional '-', no '+', no spaces).
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = (d - b'0') as i64;
        v = if neg {
            v.checked_mul(10)?.checked_sub(d)?
        } else {
            v.checked_mul(10)?.checked_add(d)?
        };
    }
    if neg && v == 0 {
        return None; // "-0"
    }
    Some(v)
}

/// Where an incomplete multibulk request stopped, so that the next attempt, with more bytes,
/// resumes there instead of parsing its arguments again: a request of a million arguments
/// arriving in a thousand pieces would otherwise be parsed a thousand times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resume {
    /// Arguments still expected; 0: no request in progress.
    left: i64,
    /// Offset, from the request's start, of the next argument's `$`.
    pos: usize,
}

impl Resume {
    /// A request is half parsed: its arguments so far are in the caller's `args`.
    pub fn in_progress(&self) -> bool {
        self.left > 0
    }
}

/// Parse one request at the start of `buf`, pushing argument ranges into `args`. An inline
/// request's quoted arguments are unescaped in place (see `parse_inline`).
pub fn parse(buf: &mut [u8], args: &mut Vec<Range<usize>>, lim: &Limits) -> Parsed {
    parse_resume(buf, args, lim, &mut Resume::default())
}

/// [`parse`] that can stop in the middle of a multibulk request and go on from there: on
/// `Incomplete`, `st` and `args` hold the progress; call again with the same `args` and
/// `st` and the same request at the start of a longer `buf`. Any other outcome resets `st`.
pub fn parse_resume(
    buf: &mut [u8],
    args: &mut Vec<Range<usize>>,
    lim: &Limits,
    st: &mut Resume,
) -> Parsed {
    if st.left > 0 {
        let (left, pos) = (st.left, st.pos);
        *st = Resume::default();
        return parse_args(buf, args, lim, left, pos, st);
    }
    args.clear();
    if buf.is_empty() {
        return Parsed::Incomplete;
    }
    if buf[0] != b'*' {
        return parse_inline(buf, args, lim);
    }
    let Some(end) = find_crlf(buf, 1) else {
        if buf.len() > lim.max_inline_len {
            return Parsed::Error("Protocol error: too big mbulk count string".into());
        }
        return Parsed::Incomplete;
    };
    let count = match parse_i64(&buf[1..end]) {
        Some(n) if lim.unauthenticated && n > UNAUTH_MAX_MULTIBULK => {
            return Parsed::Error("Protocol error: unauthenticated multibulk length".into())
        }
        Some(n) if (n as i128) <= lim.max_multibulk_len as i128 => n,
        _ => return Parsed::Error("Protocol error: invalid multibulk length".into()),
    };
    let pos = end + 2;
    if count <= 0 {
        return Parsed::Request { consumed: pos };
    }
    parse_args(buf, args, lim, count, pos, st)
}

/// The `count` bulk arguments of a multibulk request, the first at `pos`.
fn parse_args(
    buf: &[u8],
    args: &mut Vec<Range<usize>>,
    lim: &Limits,
    count: i64,
    mut pos: usize,
    st: &mut Resume,
) -> Parsed {
    let incomplete = |st: &mut Resume, done: i64, pos: usize| {
        *st = Resume {
            left: count - done,
            pos,
        };
        Parsed::Incomplete
    };
    for done in 0..count {
        if pos >= buf.len() {
            return incomplete(st, done, pos);
        }
        if buf[pos] != b'$' {
            return Parsed::Error(format!(
                "Protocol error: expected '$', got '{}'",
                buf[pos] as char
            ));
        }
        let Some(end) = find_crlf(buf, pos + 1) else {
            if buf.len() - pos > lim.max_inline_len {
                return Parsed::Error("Protocol error: too big bulk count string".into());
            }
            return incomplete(st, done, pos);
        };
        let len = match parse_i64(&buf[pos + 1..end]) {
            Some(n) if lim.unauthenticated && n > UNAUTH_MAX_BULK => {
                return Parsed::Error("Protocol error: unauthenticated bulk length".into())
            }
            Some(n) if n >= 0 && n as u64 <= lim.max_bulk_len => n as usize,
            _ => return Parsed::Error("Protocol error: invalid bulk length".into()),
        };
        let start = end + 2;
        if buf.len() < start + len + 2 {
            return incomplete(st, done, pos);
        }
        if &buf[start + len..start + len + 2] != b"\r\n" {
            // Redis trusts the length and then fails on the missing CRLF the same way.
            return Parsed::Error("Protocol error: invalid bulk length".into());
        }
        args.push(start..start + len);
        pos = start + len + 2;
    }
    Parsed::Request { consumed: pos }
}

/// An inline request: one line, split into arguments as Redis's `sdssplitargs` does:
/// blanks separate arguments; `"..."` may hold `\n \r \t \b \a \\ \"` and `\xHH`
/// escapes, `'...'` only `\'`; a closing quote must be followed by a blank or the line's end.
/// Unescaped arguments are written back into `buf` over the bytes they came from (an
/// argument is never longer than its text), so the ranges still point into the buffer.
///
/// As Redis (which looks for the newline with `strchr`), a NUL byte before the newline hides
/// it: the line is incomplete until it is too big.
fn parse_inline(buf: &mut [u8], args: &mut Vec<Range<usize>>, lim: &Limits) -> Parsed {
    let Some(nl) = buf
        .iter()
        .position(|&b| b == b'\n' || b == 0)
        .filter(|&i| buf[i] == b'\n')
    else {
        if buf.len() > lim.max_inline_len {
            return Parsed::Error("Protocol error: too big inline request".into());
        }
        return Parsed::Incomplete;
    };
    if nl > lim.max_inline_len {
        return Parsed::Error("Protocol error: too big inline request".into());
    }
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    if split_args(&mut buf[..line_end], args).is_none() {
        args.clear();
        return Parsed::Error("Protocol error: unbalanced quotes in request".into());
    }
    Parsed::Request { consumed: nl + 1 }
}

/// C's `isspace`.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_val(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Redis's `sdssplitargs` over `line`, in place: the arguments' ranges, or None for
/// unbalanced quotes (or a closing quote followed by something other than a blank).
fn split_args(line: &mut [u8], args: &mut Vec<Range<usize>>) -> Option<()> {
    let n = line.len();
    let (mut r, mut w) = (0, 0);
    loop {
        while r < n && is_space(line[r]) {
            r += 1;
        }
        if r == n {
            return Some(());
        }
        let start = w;
        // 0: unquoted, 1: in "double quotes", 2: in 'single quotes'.
        let mut quote = 0u8;
        loop {
            let c = line.get(r).copied();
            match (quote, c) {
                (1 | 2, None) => return None, // unterminated quotes
                (1, Some(b'\\'))
                    if line.get(r + 1) == Some(&b'x')
                        && line.get(r + 2).and_then(|&h| hex_val(h)).is_some()
                        && line.get(r + 3).and_then(|&h| hex_val(h)).is_some() =>
                {
                    let v =
                        hex_val(line[r + 2]).unwrap_or(0) * 16 + hex_val(line[r + 3]).unwrap_or(0);
                    push(line, &mut w, v);
                    r += 4;
                }
                (1, Some(b'\\')) if r + 1 < n => {
                    let v = match line[r + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    };
                    push(line, &mut w, v);
                    r += 2;
                }
                (2, Some(b'\\')) if line.get(r + 1) == Some(&b'\'') => {
                    push(line, &mut w, b'\'');
                    r += 2;
                }
                (1, Some(b'"')) | (2, Some(b'\'')) => {
                    // The closing quote: a blank or the end must follow.
                    if line.get(r + 1).is_some_and(|&b| !is_space(b)) {
                        return None;
                    }
                    r += 1;
                    break;
                }
                (1 | 2, Some(b)) => {
                    push(line, &mut w, b);
                    r += 1;
                }
                (_, None | Some(b' ' | b'\n' | b'\r' | b'\t')) => break,
                (_, Some(b'"')) => {
                    quote = 1;
                    r += 1;
                }
                (_, Some(b'\'')) => {
                    quote = 2;
                    r += 1;
                }
                (_, Some(b)) => {
                    push(line, &mut w, b);
                    r += 1;
                }
            }
        }
        args.push(start..w);
    }
}

/// Append `b` to the argument being unescaped in place at `*w`.
fn push(line: &mut [u8], w: &mut usize, b: u8) {
    line[*w] = b;
    *w += 1;
}

// ---- replies ---------------------------------------------------------------------------

pub fn ok(out: &mut Vec<u8>) {
    out.extend_from_slice(b"+OK\r\n");
}

pub fn simple(out: &mut Vec<u8>, s: &str) {
    out.push(b'+');
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// An error reply; `msg` starts with its code ("ERR ...", "WRONGTYPE ...").
pub fn error(out: &mut Vec<u8>, msg: &str) {
    out.push(b'-');
    // A reply line must not contain CR or LF (Redis replaces them with spaces).
    out.extend(
        msg.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

// Numbers are formatted straight into the output buffer (no String per reply).
/// `tag`, the decimal digits of `n` (with a minus sign when `negative`), CRLF: the headers
/// of integers, bulk strings and arrays. Hand-written because it runs once per reply item
/// (an LRANGE of 600 items writes 601 headers) and `write!`'s formatting machinery was a
/// tenth of the server's time there.
#[inline]
fn header(out: &mut Vec<u8>, tag: u8, negative: bool, mut n: u64) {
    let mut buf = [0u8; 24];
    let mut i = buf.len() - 2;
    buf[i..].copy_from_slice(b"\r\n");
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if negative {
        i -= 1;
        buf[i] = b'-';
    }
    i -= 1;
    buf[i] = tag;
    out.extend_from_slice(&buf[i..]);
}

pub fn int(out: &mut Vec<u8>, v: i64) {
    header(out, b':', v < 0, v.unsigned_abs());
}

pub fn bulk_header(out: &mut Vec<u8>, len: usize) {
    header(out, b'$', false, len as u64);
}

pub fn bulk(out: &mut Vec<u8>, v: &[u8]) {
    bulk_header(out, v.len());
    out.extend_from_slice(v);
    out.extend_from_slice(b"\r\n");
}

pub fn array(out: &mut Vec<u8>, n: usize) {
    header(out, b'*', false, n as u64);
}

/// The null reply: `$-1` in RESP2, `_` in RESP3.
pub fn null(out: &mut Vec<u8>, resp3: bool) {
    out.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" });
}

/// A null array (COMMAND INFO of an unknown name): `*-1` in RESP2, `_` in RESP3.
pub fn null_array(out: &mut Vec<u8>, resp3: bool) {
    out.extend_from_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" });
}

/// A map of `n` pairs: `%n` in RESP3, a flat array of 2n elements in RESP2.
pub fn map(out: &mut Vec<u8>, n: usize, resp3: bool) {
    if resp3 {
        let _ = write!(out, "%{n}\r\n");
    } else {
        array(out, 2 * n);
    }
}

/// A set of `n` elements: `~n` in RESP3, an array in RESP2.
pub fn set_header(out: &mut Vec<u8>, n: usize, resp3: bool) {
    if resp3 {
        let _ = write!(out, "~{n}\r\n");
    } else {
        array(out, n);
    }
}

/// A text reply (INFO, CLIENT LIST): a verbatim string of format `txt` in RESP3, a bulk
/// string in RESP2 (Redis's `addReplyVerbatim`).
pub fn verbatim(out: &mut Vec<u8>, text: &[u8], resp3: bool) {
    if resp3 {
        let _ = write!(out, "={}\r\ntxt:", text.len() + 4);
        out.extend_from_slice(text);
        out.extend_from_slice(b"\r\n");
    } else {
        bulk(out, text);
    }
}

/// A double: `,d` in RESP3, a bulk string in RESP2 (`text` is its Redis formatting).
pub fn double(out: &mut Vec<u8>, text: &str, resp3: bool) {
    if resp3 {
        let _ = write!(out, ",{text}\r\n");
    } else {
        bulk(out, text.as_bytes());
    }
}

pub fn crlf(out: &mut Vec<u8>) {
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(buf: &[u8]) -> (Parsed, Vec<Vec<u8>>) {
        let mut a = Vec::new();
        let mut buf = buf.to_vec();
        let p = parse(&mut buf, &mut a, &Limits::default());
        (p, a.into_iter().map(|r| buf[r].to_vec()).collect())
    }

    #[test]
    fn multibulk_inline_and_incomplete() {
        let (p, a) = args_of(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nrest");
        assert_eq!(p, Parsed::Request { consumed: 20 });
        assert_eq!(a, vec![b"GET".to_vec(), b"k".to_vec()]);
        for cut in 0..20 {
            let (p, _) = args_of(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"[..cut]);
            assert_eq!(p, Parsed::Incomplete, "prefix of {cut} bytes");
        }
        let (p, a) = args_of(b"  set  a\tb \r\n");
        assert_eq!(p, Parsed::Request { consumed: 13 });
        assert_eq!(a, vec![b"set".to_vec(), b"a".to_vec(), b"b".to_vec()]);
        let (p, a) = args_of(b"\r\n");
        assert_eq!((p, a.len()), (Parsed::Request { consumed: 2 }, 0));
        let (p, a) = args_of(b"*0\r\n");
        assert_eq!((p, a.len()), (Parsed::Request { consumed: 4 }, 0));
        // A bulk may hold CR, LF and '*'.
        let (p, a) = args_of(b"*1\r\n$4\r\n\r\n*\n\r\n");
        assert_eq!(p, Parsed::Request { consumed: 14 });
        assert_eq!(a, vec![b"\r\n*\n".to_vec()]);
    }

    #[test]
    fn inline_quoting_as_sdssplitargs() {
        let ok = |line: &[u8], want: &[&[u8]]| {
            let (p, a) = args_of(line);
            assert_eq!(
                p,
                Parsed::Request {
                    consumed: line.len()
                },
                "{:?}",
                String::from_utf8_lossy(line)
            );
            assert_eq!(a, want, "{:?}", String::from_utf8_lossy(line));
        };
        ok(
            b"set \"hello world\" x\r\n",
            &[b"set", b"hello world", b"x"],
        );
        ok(
            b"a \"\\n\\r\\t\\b\\a\\\\\\\"\\q\"\n",
            &[b"a", b"\n\r\t\x08\x07\\\"q"],
        );
        ok(b"\"\\x41\\x7a\\xzz\\x4\"\n", &[b"Azxzzx4"]);
        ok(b"'it\\'s' '\\n'\n", &[b"it's", b"\\n"]);
        ok(b"ab\"c d\"\t''  \"\"\n", &[b"abc d", b"", b""]);
        ok(b"\x0bx\x0c\n", &[b"x\x0c"]);
        // A NUL hides the newline (Redis looks for it with strchr).
        assert_eq!(args_of(b"ping\0\r\nping\r\n").0, Parsed::Incomplete);
        for bad in [
            &b"set \"\"\"test-key\"\"\" v\r\n"[..],
            b"\"abc\n",
            b"'abc\r\n",
            b"\"a\"b\n",
            b"'a'b\n",
            b"\"a\\\"\n",
        ] {
            assert_eq!(
                args_of(bad).0,
                Parsed::Error("Protocol error: unbalanced quotes in request".into()),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn unauthenticated_limits() {
        let lim = Limits {
            unauthenticated: true,
            ..Limits::default()
        };
        let mut a = Vec::new();
        let ten = format!("*10\r\n{}", "$1\r\nx\r\n".repeat(10));
        assert_eq!(
            parse(&mut ten.clone().into_bytes(), &mut a, &lim),
            Parsed::Request {
                consumed: ten.len()
            }
        );
        let err = |b: &[u8]| match parse(&mut b.to_vec(), &mut a.clone(), &lim) {
            Parsed::Error(e) => e,
            p => panic!("parsed as {p:?}"),
        };
        assert_eq!(
            err(b"*11\r\n"),
            "Protocol error: unauthenticated multibulk length"
        );
        assert_eq!(
            err(b"*1\r\n$16385\r\n"),
            "Protocol error: unauthenticated bulk length"
        );
        let ok = format!("*1\r\n$16384\r\n{}\r\n", "y".repeat(16384));
        assert!(matches!(
            parse(&mut ok.into_bytes(), &mut a, &lim),
            Parsed::Request { .. }
        ));
    }

    #[test]
    fn protocol_errors_use_redis_texts() {
        let e = |b: &[u8]| match args_of(b).0 {
            Parsed::Error(e) => e,
            p => panic!("{:?} parsed as {p:?}", String::from_utf8_lossy(b)),
        };
        assert_eq!(e(b"*x\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(
            e(b"*99999999999\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(e(b"*1\r\n+3\r\n"), "Protocol error: expected '$', got '+'");
        assert_eq!(e(b"*1\r\n$-2\r\n"), "Protocol error: invalid bulk length");
        // Over proto-max-bulk-len: refused from the header, nothing allocated.
        assert_eq!(
            e(b"*1\r\n$536870913\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            e(b"*1\r\n$1\r\nab\r\n"),
            "Protocol error: invalid bulk length"
        );
        let long = vec![b'a'; 70 << 10];
        assert_eq!(e(&long), "Protocol error: too big inline request");
        let mut long = b"*".to_vec();
        long.extend(std::iter::repeat_n(b'1', 70 << 10));
        assert_eq!(e(&long), "Protocol error: too big mbulk count string");
    }

    /// Parse a whole stream as the server does (requests one after another).
    fn parse_stream(buf: &[u8]) -> (Vec<Vec<Vec<u8>>>, Option<String>, usize) {
        let lim = Limits::default();
        let mut buf = buf.to_vec();
        let (mut out, mut pos, mut args) = (Vec::new(), 0, Vec::new());
        loop {
            match parse(&mut buf[pos..], &mut args, &lim) {
                Parsed::Incomplete => return (out, None, pos),
                Parsed::Request { consumed } => {
                    assert!(
                        consumed > 0 && consumed <= buf.len() - pos,
                        "consumed {consumed}"
                    );
                    let a = args.iter().map(|r| {
                        assert!(r.end <= consumed);
                        buf[pos + r.start..pos + r.end].to_vec()
                    });
                    out.push(a.collect());
                    pos += consumed;
                }
                Parsed::Error(e) => return (out, Some(e), pos),
            }
        }
    }

    /// Parse `wire` as a server does when the bytes arrive in two reads, the first ending at
    /// `cut`: the request the cut splits is resumed, not parsed again from its start.
    fn parse_stream_resuming(wire: &[u8], cut: usize) -> Vec<Vec<Vec<u8>>> {
        let lim = Limits::default();
        let mut wire = wire.to_vec();
        let (mut out, mut pos, mut args, mut st) = (Vec::new(), 0, Vec::new(), Resume::default());
        for avail in [cut, wire.len()] {
            loop {
                match parse_resume(&mut wire[pos..avail.max(pos)], &mut args, &lim, &mut st) {
                    Parsed::Incomplete => break,
                    Parsed::Request { consumed } => {
                        assert!(!st.in_progress());
                        out.push(
                            args.iter()
                                .map(|r| wire[pos + r.start..pos + r.end].to_vec())
                                .collect(),
                        );
                        pos += consumed;
                    }
                    Parsed::Error(e) => panic!("{e}"),
                }
            }
        }
        out
    }

    #[test]
    fn a_request_resumes_where_it_stopped() {
        let lim = Limits::default();
        let wire = &mut b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n".to_vec();
        let (mut args, mut st) = (Vec::new(), Resume::default());
        // Two whole arguments and part of the third.
        assert_eq!(
            parse_resume(&mut wire[..22], &mut args, &lim, &mut st),
            Parsed::Incomplete
        );
        assert!(st.in_progress());
        assert_eq!(args.len(), 2);
        assert_eq!(st.pos, 20, "resumes at the third argument's '$'");
        assert_eq!(
            parse_resume(wire, &mut args, &lim, &mut st),
            Parsed::Request {
                consumed: wire.len()
            }
        );
        assert!(!st.in_progress());
        let got: Vec<&[u8]> = args.iter().map(|r| &wire[r.clone()]).collect();
        assert_eq!(got, [&b"SET"[..], b"k", b"value"]);
    }

    fn encode(cmds: &[Vec<Vec<u8>>]) -> Vec<u8> {
        let mut b = Vec::new();
        for c in cmds {
            b.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
            for a in c {
                b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                b.extend_from_slice(a);
                b.extend_from_slice(b"\r\n");
            }
        }
        b
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

        /// Arbitrary bytes: no panic, nothing consumed beyond the input.
        #[test]
        fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = parse_stream(&buf);
        }

        /// A pipeline arrives in two reads split anywhere: the requests come out the same as
        /// from one read, and a mutated byte gives an error or other requests, never a panic.
        #[test]
        fn pipelines_parse_the_same_however_split(
            cmds in proptest::collection::vec(
                proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20), 1..5),
                1..6),
            cut in 0usize..1000,
            flip in 0usize..1000,
            byte in proptest::prelude::any::<u8>(),
        ) {
            let wire = encode(&cmds);
            let (all, err, used) = parse_stream(&wire);
            proptest::prop_assert_eq!(&all, &cmds);
            proptest::prop_assert!(err.is_none() && used == wire.len());
            let cut = cut % (wire.len() + 1);
            let (first, _, used1) = parse_stream(&wire[..cut]);
            let (rest, _, _) = parse_stream(&wire[used1..]);
            let mut joined = first;
            joined.extend(rest);
            proptest::prop_assert_eq!(&joined, &cmds);
            // The same, resuming the request cut in two where the first attempt stopped.
            proptest::prop_assert_eq!(&parse_stream_resuming(&wire, cut), &cmds);
            let mut bad = wire.clone();
            let i = flip % bad.len();
            bad[i] = byte;
            let _ = parse_stream(&bad);
        }
    }

    #[test]
    fn integers_parse_like_redis() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"01",
            b"-0",
            b"1a",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}

#[cfg(test)]
mod header_tests {
    use super::*;

    #[test]
    fn headers_print_every_width_and_sign() {
        for v in [0i64, 7, -7, 10, 99, -100, 123_456_789, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            int(&mut out, v);
            assert_eq!(out, format!(":{v}\r\n").into_bytes(), "{v}");
        }
        for n in [0usize, 9, 10, 600, usize::MAX] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            array(&mut a, n);
            bulk_header(&mut b, n);
            assert_eq!(a, format!("*{n}\r\n").into_bytes());
            assert_eq!(b, format!("${n}\r\n").into_bytes());
        }
    }
}
