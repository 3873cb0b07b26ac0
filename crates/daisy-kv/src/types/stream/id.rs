//! Stream entry IDs (Redis's `streamID`): a millisecond time and a sequence number, both u64,
//! ordered as a pair; stored as 16 big-endian bytes so that byte order is ID order (the
//! ordered maps' keys); parsed from and printed as `<ms>-<seq>` exactly as Redis's
//! `streamGenericParseIDOrReply` and `createStreamIDString` do.

use crate::commands::Ctx;

/// A stream entry ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// Redis's reply to an ID it cannot parse.
pub const E_INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next ID (streamIncrID); None past the largest.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID (streamDecrID); None before 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// 16 big-endian bytes: byte order is ID order (streamEncodeID).
    pub fn key(self) -> [u8; 16] {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&self.ms.to_be_bytes());
        k[8..].copy_from_slice(&self.seq.to_be_bytes());
        k
    }

    /// The ID of a 16-byte key (None for another length).
    pub fn from_key(k: &[u8]) -> Option<StreamId> {
        if k.len() != 16 {
            return None;
        }
        Some(StreamId::new(
            u64::from_be_bytes(k[..8].try_into().ok()?),
            u64::from_be_bytes(k[8..].try_into().ok()?),
        ))
    }

    /// `<ms>-<seq>`.
    pub fn to_bytes(self) -> Vec<u8> {
        let mut b = [0u8; 41];
        self.text(&mut b).to_vec()
    }

    /// `<ms>-<seq>` written into `buf` (no allocation: replies carry many IDs).
    pub fn text(self, buf: &mut [u8; 41]) -> &[u8] {
        let mut i = buf.len();
        for (n, dash) in [(self.seq, true), (self.ms, false)] {
            let mut n = n;
            loop {
                i -= 1;
                buf[i] = b'0' + (n % 10) as u8;
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            if dash {
                i -= 1;
                buf[i] = b'-';
            }
        }
        &buf[i..]
    }

    /// The ID following `self` as XADD * makes it at time `now_ms` (streamNextID): the time
    /// and sequence 0 when the clock is ahead of `self`, else `self`'s successor (None past
    /// the largest).
    pub fn next_at(self, now_ms: i64) -> Option<StreamId> {
        let ms = now_ms.max(0) as u64;
        if ms > self.ms {
            Some(StreamId::new(ms, 0))
        } else {
            self.incr()
        }
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// C's `isspace` in the "C" locale.
fn c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// Redis's `string2ull` on a C string: a canonical non-negative `long long`, or else what
/// `strtoull(s, &end, 10)` accepts whole (leading white space, a sign, digits; a '-' negates
/// modulo 2^64, as C does; overflow fails).
pub fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = crate::listpack::canonical_i64(s) {
        return (v >= 0).then_some(v as u64);
    }
    let mut i = 0;
    while i < s.len() && c_space(s[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let digits = &s[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// How an ID argument may be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRules {
    /// The sequence when only `<ms>` is given.
    pub missing_seq: u64,
    /// `-` and `+` are refused (Redis's "strict" parse).
    pub strict: bool,
    /// `<ms>-*` is accepted (XADD's ID): the sequence is then left to the stream.
    pub seq_star: bool,
}

/// A parsed ID and whether its sequence was given (false for `<ms>-*`).
pub fn parse(arg: &[u8], rules: IdRules) -> Option<(StreamId, bool)> {
    // Redis copies the argument into a 128-byte C buffer: longer is invalid, and a NUL ends it.
    if arg.len() > 127 {
        return None;
    }
    let arg = match arg.iter().position(|&b| b == 0) {
        Some(n) => &arg[..n],
        None => arg,
    };
    if arg == b"-" {
        return (!rules.strict).then_some((StreamId::MIN, true));
    }
    if arg == b"+" {
        return (!rules.strict).then_some((StreamId::MAX, true));
    }
    let (ms_part, seq_part) = match arg.iter().position(|&b| b == b'-') {
        Some(d) => (&arg[..d], Some(&arg[d + 1..])),
        None => (arg, None),
    };
    let ms = string2ull(ms_part)?;
    match seq_part {
        None => Some((StreamId::new(ms, rules.missing_seq), true)),
        Some(b"*") if rules.seq_star => Some((StreamId::new(ms, 0), false)),
        Some(s) => Some((StreamId::new(ms, string2ull(s)?), true)),
    }
}

/// Parse an ID or reply Redis's error; None after the error reply.
pub fn parse_or_reply(
    c: &mut Ctx,
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
) -> daisy::Result<Option<StreamId>> {
    let rules = IdRules {
        missing_seq,
        strict,
        seq_star: false,
    };
    match parse(arg, rules) {
        Some((id, _)) => Ok(Some(id)),
        None => {
            c.err(E_INVALID_ID)?;
            Ok(None)
        }
    }
}

/// A range bound of XRANGE, XREVRANGE, XPENDING and XAUTOCLAIM (streamParseIntervalIDOrReply
/// and the increment or decrement of an exclusive bound): `(` makes it exclusive (then
/// strict). `start` says which end it is: an exclusive start moves up, an exclusive end
/// down, with Redis's errors when that is impossible. None after the error reply.
pub fn parse_bound(
    c: &mut Ctx,
    arg: &[u8],
    missing_seq: u64,
    start: bool,
) -> daisy::Result<Option<StreamId>> {
    let exclusive = arg.len() > 1 && arg[0] == b'(';
    if !exclusive {
        return parse_or_reply(c, arg, missing_seq, false);
    }
    let Some(id) = parse_or_reply(c, &arg[1..], missing_seq, true)? else {
        return Ok(None);
    };
    let moved = if start { id.incr() } else { id.decr() };
    match moved {
        Some(id) => Ok(Some(id)),
        None => {
            c.err(if start {
                "ERR invalid start ID for the interval"
            } else {
                "ERR invalid end ID for the interval"
            })?;
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAX: IdRules = IdRules {
        missing_seq: 0,
        strict: false,
        seq_star: false,
    };

    #[test]
    fn ids_parse_as_redis_parses_them() {
        let p = |s: &str| parse(s.as_bytes(), LAX).map(|(id, _)| id);
        assert_eq!(p("1-2"), Some(StreamId::new(1, 2)));
        assert_eq!(p("5"), Some(StreamId::new(5, 0)));
        assert_eq!(p("-"), Some(StreamId::MIN));
        assert_eq!(p("+"), Some(StreamId::MAX));
        assert_eq!(
            p("18446744073709551615-18446744073709551615"),
            Some(StreamId::MAX)
        );
        assert_eq!(p("18446744073709551616-0"), None);
        // strtoull's leniency: white space, a plus sign, leading zeros, "-0".
        assert_eq!(p(" 7-+3"), Some(StreamId::new(7, 3)));
        assert_eq!(p("007-1"), Some(StreamId::new(7, 1)));
        assert_eq!(p("1--0"), Some(StreamId::new(1, 0)));
        // A negative canonical number is refused; the '-' splits at the first one.
        assert_eq!(p("1--5"), None);
        assert_eq!(p("-5"), None);
        assert_eq!(p("1-"), None);
        assert_eq!(p("a-1"), None);
        assert_eq!(p(""), None);
        assert_eq!(p(&"1".repeat(128)), None);
        let strict = IdRules {
            strict: true,
            ..LAX
        };
        assert_eq!(parse(b"-", strict), None);
        assert_eq!(parse(b"+", strict), None);
        let star = IdRules {
            seq_star: true,
            ..LAX
        };
        assert_eq!(parse(b"5-*", star), Some((StreamId::new(5, 0), false)));
        assert_eq!(parse(b"5-*", LAX), None);
    }

    #[test]
    fn keys_sort_as_ids() {
        let ids = [
            StreamId::new(0, 1),
            StreamId::new(0, u64::MAX),
            StreamId::new(1, 0),
            StreamId::new(u64::MAX, 0),
        ];
        for w in ids.windows(2) {
            assert!(w[0] < w[1]);
            assert!(w[0].key() < w[1].key());
            assert_eq!(StreamId::from_key(&w[0].key()), Some(w[0]));
        }
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(StreamId::MIN.decr(), None);
        assert_eq!(StreamId::new(1, u64::MAX).incr(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::new(2, 0).decr(), Some(StreamId::new(1, u64::MAX)));
        for id in [
            StreamId::MIN,
            StreamId::MAX,
            StreamId::new(1526919030474, 55),
        ] {
            assert_eq!(id.to_bytes(), format!("{}-{}", id.ms, id.seq).into_bytes());
        }
    }
}
