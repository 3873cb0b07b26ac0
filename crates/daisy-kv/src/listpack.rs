//! Redis's listpack (listpack.c), element by element: how Redis encodes a string or an integer
//! and reads it back, with the checks of `lpValidateNext`. DUMP/RESTORE payloads (`rdb`) carry
//! listpacks, and a stream's nodes (`types::stream`) are listpacks byte for byte, so both
//! read and write them through this module (Redis is the specification; its sources were
//! read, not copied).
//!
//! A listpack: `u32` LE total bytes, `u16` LE number of elements (65535: unknown, count them),
//! the elements, the terminator `0xFF`. An element: its encoding and data, then its "backlen"
//! (the bytes of encoding and data, 7 bits a byte, read backwards) so that the listpack can be
//! walked from either end. Integers take 1 to 9 bytes (7-bit unsigned, 13-bit, 16, 24, 32, 64
//! bit signed); strings a 1, 2 or 5 byte length then the bytes. A string that is the exact
//! decimal form of an `i64` is stored as that integer (`lpAppend` -> `lpStringToInt64`).

/// Bytes of the header (total bytes, number of elements).
pub const HDR: usize = 6;
/// The terminator.
pub const EOF: u8 = 0xFF;
/// The element count that means "too many: count them".
pub const NUMELE_UNKNOWN: u16 = u16::MAX;
/// An empty listpack: header and terminator.
pub const EMPTY_BYTES: usize = HDR + 1;

/// Redis's string2ll / lpStringToInt64: `s` is the exact decimal form of an i64 (no sign but
/// '-', no leading zeros, no "-0", at most 20 bytes).
pub fn canonical_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if negative {
        if v > 1 << 63 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// lpEncodeBacklen's size, including its boundaries (16383 already takes three bytes).
pub fn backlen_size(l: u64) -> u64 {
    if l <= 127 {
        1
    } else if l < 16383 {
        2
    } else if l < 2_097_151 {
        3
    } else if l < 268_435_455 {
        4
    } else {
        5
    }
}

/// Append the backlen of an element of `l` bytes.
pub fn push_backlen(out: &mut Vec<u8>, l: u64) {
    let n = backlen_size(l);
    // Most significant 7-bit group first; every byte but the first has the high bit set.
    for i in (0..n).rev() {
        let group = ((l >> (7 * i)) & 127) as u8;
        out.push(if i == n - 1 { group } else { group | 128 });
    }
}

/// Append the encoding and data of integer `v` (lpEncodeIntegerGetType), without the backlen.
pub fn encode_int(out: &mut Vec<u8>, v: i64) {
    if (0..=127).contains(&v) {
        out.push(v as u8);
    } else if (-4096..=4095).contains(&v) {
        let u = (v as u64) & 0x1FFF;
        out.push(0xC0 | (u >> 8) as u8);
        out.push(u as u8);
    } else if (-32768..=32767).contains(&v) {
        out.push(0xF1);
        out.extend_from_slice(&(v as i16).to_le_bytes());
    } else if (-8_388_608..=8_388_607).contains(&v) {
        out.push(0xF2);
        out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
    } else if let Ok(v) = i32::try_from(v) {
        out.push(0xF3);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.push(0xF4);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Append the encoding and data of string `s` stored as a string (lpEncodeString), without
/// the backlen.
pub fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    let n = s.len();
    if n < 64 {
        out.push(0x80 | n as u8);
    } else if n < 4096 {
        out.push(0xE0 | (n >> 8) as u8);
        out.push(n as u8);
    } else {
        out.push(0xF0);
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    out.extend_from_slice(s);
}

/// Append integer `v` as a whole element (lpAppendInteger).
pub fn push_int(out: &mut Vec<u8>, v: i64) {
    let start = out.len();
    encode_int(out, v);
    let l = (out.len() - start) as u64;
    push_backlen(out, l);
}

/// Append `s` as a whole element as lpAppend stores it: an integer when it is the canonical
/// decimal form of one, else a string.
pub fn push_str(out: &mut Vec<u8>, s: &[u8]) {
    let start = out.len();
    match canonical_i64(s) {
        Some(v) => encode_int(out, v),
        None => encode_string(out, s),
    }
    let l = (out.len() - start) as u64;
    push_backlen(out, l);
}

/// Bytes of `s` as a whole element (see [`push_str`]).
pub fn str_elem_bytes(s: &[u8]) -> usize {
    let data = match canonical_i64(s) {
        Some(v) => int_data_bytes(v),
        None => {
            let n = s.len();
            n + if n < 64 {
                1
            } else if n < 4096 {
                2
            } else {
                5
            }
        }
    };
    data + backlen_size(data as u64) as usize
}

/// Bytes of integer `v` as a whole element.
pub fn int_elem_bytes(v: i64) -> usize {
    let data = int_data_bytes(v);
    data + backlen_size(data as u64) as usize
}

fn int_data_bytes(v: i64) -> usize {
    if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if (-32768..=32767).contains(&v) {
        3
    } else if (-8_388_608..=8_388_607).contains(&v) {
        4
    } else if i32::try_from(v).is_ok() {
        5
    } else {
        9
    }
}

/// An element's value: an integer or the bytes of a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Elem<'_> {
    /// The value as Redis's lpGet hands it out: a string (an integer as its decimal form).
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Elem::Int(v) => v.to_string().into_bytes(),
            Elem::Str(s) => s.to_vec(),
        }
    }

    /// Append the value's bytes (an integer as its decimal form) to `out`.
    pub fn write_to(self, out: &mut Vec<u8>) {
        match self {
            Elem::Int(v) => {
                let mut b = itoa_buf();
                out.extend_from_slice(fmt_i64(v, &mut b));
            }
            Elem::Str(s) => out.extend_from_slice(s),
        }
    }

    /// Bytes of the value as a string.
    pub fn str_len(self) -> usize {
        match self {
            Elem::Int(v) => {
                let mut b = itoa_buf();
                fmt_i64(v, &mut b).len()
            }
            Elem::Str(s) => s.len(),
        }
    }

    /// The value as an integer, as lpGetIntegerIfValid reads it (a string that is a canonical
    /// integer counts; anything else is None).
    pub fn int(self) -> Option<i64> {
        match self {
            Elem::Int(v) => Some(v),
            Elem::Str(s) => canonical_i64(s),
        }
    }

    /// Whether the value equals the string `s` (an integer compares by its decimal form).
    pub fn eq_str(self, s: &[u8]) -> bool {
        match self {
            Elem::Int(v) => {
                let mut b = itoa_buf();
                fmt_i64(v, &mut b) == s
            }
            Elem::Str(x) => x == s,
        }
    }
}

fn itoa_buf() -> [u8; 20] {
    [0; 20]
}

/// `v` in decimal, written at the end of `buf`.
fn fmt_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut u = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        // i64::MIN has 19 digits: there is room for the sign.
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// The low `bits` bits of `u` as a two's complement number.
fn sign_extend(u: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((u << shift) as i64) >> shift
}

/// lpDecodeBacklen: read backwards from `q`, 7 bits a byte, at most 5 bytes.
pub fn decode_backlen(lp: &[u8], mut q: usize) -> Option<u64> {
    let mut val = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *lp.get(q)?;
        val |= u64::from(b & 127) << shift;
        if b & 128 == 0 {
            return Some(val);
        }
        shift += 7;
        if shift > 28 || q == 0 {
            return None;
        }
        q -= 1;
    }
}

/// The element starting at `p` and the position just after it (its backlen included),
/// checked as lpValidateNext does: it lies before the listpack's last byte (the terminator)
/// and its backlen matches. None at the terminator or for a damaged element.
pub fn elem(lp: &[u8], p: usize) -> Option<(Elem<'_>, usize)> {
    let last = lp.len().checked_sub(1)?;
    if p >= last {
        return None;
    }
    let b = lp[p];
    let header: usize = match b {
        0x00..=0xDF | 0xF1..=0xF4 => 1,
        0xE0..=0xEF => 2,
        0xF0 => 5,
        _ => return None,
    };
    if p + header > last {
        return None;
    }
    let h = &lp[p..p + header];
    let encoded: u64 = match b {
        0x00..=0x7F => 1,
        0x80..=0xBF => 1 + u64::from(b & 0x3F),
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 2 + ((u64::from(b & 0x0F) << 8) | u64::from(h[1])),
        0xF0 => 5 + u64::from(u32::from_le_bytes([h[1], h[2], h[3], h[4]])),
        0xF1 => 3,
        0xF2 => 4,
        0xF3 => 5,
        _ => 9, // 0xF4
    };
    let blen = backlen_size(encoded);
    let end = (p as u64).checked_add(encoded)?.checked_add(blen)?;
    if end > last as u64 {
        return None;
    }
    let end = end as usize;
    if decode_backlen(lp, end - 1) != Some(encoded) {
        return None;
    }
    let data = &lp[p..p + encoded as usize];
    let v = match b {
        0x00..=0x7F => Elem::Int(i64::from(b)),
        0x80..=0xBF => Elem::Str(&data[1..]),
        0xC0..=0xDF => {
            let u = (u64::from(b & 0x1F) << 8) | u64::from(data[1]);
            Elem::Int(sign_extend(u, 13))
        }
        0xE0..=0xEF => Elem::Str(&data[2..]),
        0xF0 => Elem::Str(&data[5..]),
        _ => {
            let mut le = [0u8; 8];
            le[..data.len() - 1].copy_from_slice(&data[1..]);
            Elem::Int(sign_extend(
                u64::from_le_bytes(le),
                8 * (data.len() as u32 - 1),
            ))
        }
    };
    Some((v, end))
}

/// The whole length (encoding, data, backlen) of the element at `p`, read from its encoding
/// alone: for walking a listpack whose elements were validated before (a stream node in the
/// pool). Bounds are checked (None past the last byte before the terminator), the backlen is
/// not.
#[inline]
pub fn elem_len(lp: &[u8], p: usize) -> Option<usize> {
    let b = *lp.get(p)?;
    let data = match b {
        0x00..=0x7F => 1,
        0x80..=0xBF => 1 + usize::from(b & 0x3F),
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 2 + ((usize::from(b & 0x0F) << 8) | usize::from(*lp.get(p + 1)?)),
        0xF0 => 5 + u32::from_le_bytes(lp.get(p + 1..p + 5)?.try_into().ok()?) as usize,
        0xF1 => 3,
        0xF2 => 4,
        0xF3 => 5,
        0xF4 => 9,
        _ => return None,
    };
    let total = data + backlen_size(data as u64) as usize;
    (p.checked_add(total)? < lp.len()).then_some(total)
}

/// The integer element at `p` and the position after it, as [`elem_len`] walks (an integer
/// stored as a string is parsed, as lpGetInteger does); None for anything else.
#[inline]
pub fn int_fast(lp: &[u8], p: usize) -> Option<(i64, usize)> {
    let b = *lp.get(p)?;
    if b < 0x80 {
        return (p + 2 < lp.len()).then_some((i64::from(b), p + 2));
    }
    let n = elem_len(lp, p)?;
    let v = match b {
        0xC0..=0xDF => sign_extend((u64::from(b & 0x1F) << 8) | u64::from(lp[p + 1]), 13),
        0xF1..=0xF4 => {
            let w = [0, 0, 2, 3, 4, 8][usize::from(b - 0xEF)];
            let mut le = [0u8; 8];
            le[..w].copy_from_slice(&lp[p + 1..p + 1 + w]);
            sign_extend(u64::from_le_bytes(le), 8 * w as u32)
        }
        _ => return elem(lp, p)?.0.int().map(|v| (v, p + n)),
    };
    Some((v, p + n))
}

/// The header's total bytes.
pub fn total_bytes(lp: &[u8]) -> Option<usize> {
    Some(u32::from_le_bytes(lp.get(..4)?.try_into().ok()?) as usize)
}

/// The header's number of elements.
pub fn num_elements(lp: &[u8]) -> Option<u16> {
    Some(u16::from_le_bytes(lp.get(4..6)?.try_into().ok()?))
}

/// Whether the header is sound for a listpack of exactly `lp.len()` bytes (lpValidateIntegrity
/// without `deep`): at least header and terminator, the total bytes match, the terminator
/// ends it.
pub fn header_ok(lp: &[u8]) -> bool {
    lp.len() >= EMPTY_BYTES && total_bytes(lp) == Some(lp.len()) && lp[lp.len() - 1] == EOF
}

/// Every element of `lp`, validated as lpValidateIntegrity (deep) does: the header, each
/// element, the terminator right after the last one, and the header's count unless it is
/// "unknown". None when damaged.
pub fn elements(lp: &[u8]) -> Option<Vec<Elem<'_>>> {
    if !header_ok(lp) {
        return None;
    }
    let numele = num_elements(lp)?;
    let last = lp.len() - 1;
    let mut out = Vec::with_capacity(usize::from(numele).min(lp.len()));
    let mut p = HDR;
    while p != last {
        let (e, next) = elem(lp, p)?;
        out.push(e);
        p = next;
    }
    if numele != NUMELE_UNKNOWN && usize::from(numele) != out.len() {
        return None;
    }
    Some(out)
}

/// A listpack made of `body` (whole elements) and `count` elements: header, body, terminator.
pub fn finish(body: &[u8], count: usize) -> Vec<u8> {
    let total = HDR + body.len() + 1;
    let mut lp = Vec::with_capacity(total);
    lp.extend_from_slice(&(total as u32).to_le_bytes());
    let numele = u16::try_from(count).unwrap_or(NUMELE_UNKNOWN);
    lp.extend_from_slice(&numele.to_le_bytes());
    lp.extend_from_slice(body);
    lp.push(EOF);
    lp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_read_back_as_written() {
        let ints = [
            0i64,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -32768,
            32767,
            -8_388_608,
            8_388_607,
            i32::MIN as i64,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ];
        let strs: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"007".to_vec(),
            b"-0".to_vec(),
            vec![b'x'; 63],
            vec![b'x'; 64],
            vec![b'y'; 4095],
            vec![b'z'; 4096],
            vec![b'w'; 70000],
        ];
        let mut body = Vec::new();
        for &v in &ints {
            let at = body.len();
            push_int(&mut body, v);
            assert_eq!(body.len() - at, int_elem_bytes(v), "{v}");
        }
        for s in &strs {
            let at = body.len();
            push_str(&mut body, s);
            assert_eq!(body.len() - at, str_elem_bytes(s));
        }
        let lp = finish(&body, ints.len() + strs.len());
        let got = elements(&lp).expect("valid");
        for (i, &v) in ints.iter().enumerate() {
            assert_eq!(got[i], Elem::Int(v));
            assert_eq!(got[i].to_vec(), v.to_string().into_bytes());
            assert!(got[i].eq_str(v.to_string().as_bytes()));
            assert_eq!(got[i].str_len(), v.to_string().len());
        }
        for (i, s) in strs.iter().enumerate() {
            assert_eq!(got[ints.len() + i], Elem::Str(s));
        }
        // A canonical integer string becomes an integer; others stay strings.
        let mut b = Vec::new();
        push_str(&mut b, b"12345");
        assert_eq!(elem(&finish(&b, 1), HDR).unwrap().0, Elem::Int(12345));
    }

    #[test]
    fn the_fast_walk_agrees_with_the_checked_one() {
        let mut body = Vec::new();
        let ints = [
            0i64,
            127,
            -1,
            4095,
            -4096,
            32767,
            -8_388_608,
            i32::MIN as i64,
            i64::MAX,
        ];
        for &v in &ints {
            push_int(&mut body, v);
        }
        push_str(&mut body, &[b'q'; 5000]);
        push_str(&mut body, b"not a number");
        let lp = finish(&body, ints.len() + 2);
        let mut p = HDR;
        for &v in &ints {
            let (got, next) = int_fast(&lp, p).unwrap();
            assert_eq!(got, v);
            assert_eq!(next, elem(&lp, p).unwrap().1);
            p = next;
        }
        let n = elem_len(&lp, p).unwrap();
        assert_eq!(p + n, elem(&lp, p).unwrap().1);
        p += n;
        assert!(int_fast(&lp, p).is_none(), "a string is no integer");
        p += elem_len(&lp, p).unwrap();
        assert_eq!(p, lp.len() - 1);
        assert!(elem_len(&lp, p).is_none(), "the terminator is no element");
        // A string whose length passes the end is refused, never read.
        let mut b = Vec::new();
        push_str(&mut b, &[b'q'; 5000]);
        let mut cut = finish(&b, 1);
        cut.truncate(HDR + 100);
        assert!(elem_len(&cut, HDR).is_none());
        assert!(int_fast(&cut, HDR).is_none());
    }

    #[test]
    fn damage_is_refused() {
        let mut body = Vec::new();
        push_str(&mut body, b"hello");
        let lp = finish(&body, 1);
        assert!(elements(&lp).is_some());
        let mut bad = lp.clone();
        bad[0] += 1; // total bytes
        assert!(elements(&bad).is_none());
        let mut bad = lp.clone();
        bad[4] = 2; // count
        assert!(elements(&bad).is_none());
        let mut bad = lp.clone();
        let n = bad.len();
        bad[n - 2] ^= 1; // backlen
        assert!(elements(&bad).is_none());
        let mut bad = lp;
        bad[HDR] = 0x8F; // a string longer than the listpack
        assert!(elements(&bad).is_none());
    }
}
