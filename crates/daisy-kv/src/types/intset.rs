//! The integer-set encoding (Redis's intset): a set whose members are all integers, stored
//! sorted as fixed-width little-endian numbers: one byte giving the width (2, 4 or 8), then
//! the values. A new set starts 2 bytes wide and widens when a member needs it (as Redis
//! upgrades its intset); like Redis's, it never narrows again when that member goes, which
//! DUMP shows (the payload carries the intset as it is).
//!
//! Invariants (checked by [`decode`]): a known width, a length that is a multiple of it,
//! values strictly ascending (sorted, no duplicates), and a width that holds every value.
//!
//! Members are integers in Redis's sense: the canonical decimal form of an i64 (no sign on
//! zero, no leading zeros or plus sign), so "007" or "+1" are strings, not integers, and a
//! member reads back exactly as it was added.

/// The member as an integer, when it is one in Redis's sense (`string2ll`).
pub fn as_int(m: &[u8]) -> Option<i64> {
    if m.is_empty() || m.len() > 20 {
        return None;
    }
    let n: i64 = std::str::from_utf8(m).ok()?.parse().ok()?;
    // Only the canonical form (no '+', no leading zeros, no "-0").
    (n.to_string().as_bytes() == m).then_some(n)
}

/// The narrowest width that holds `v`.
pub fn width_of(v: i64) -> u8 {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

/// The encoded set of `sorted` (ascending, no duplicates), at least `width` bytes wide.
pub fn encode(sorted: &[i64], width: u8) -> Vec<u8> {
    debug_assert!(sorted.windows(2).all(|w| w[0] < w[1]));
    let w = sorted
        .iter()
        .map(|&v| width_of(v))
        .fold(width.max(2), u8::max);
    let mut out = Vec::with_capacity(1 + w as usize * sorted.len());
    out.push(w);
    for &v in sorted {
        out.extend_from_slice(&v.to_le_bytes()[..w as usize]);
    }
    out
}

/// The members, ascending, and the width, or what is wrong with the blob.
pub fn decode(b: &[u8]) -> Result<(Vec<i64>, u8), String> {
    let (&w, rest) = b.split_first().ok_or("intset: empty")?;
    if !matches!(w, 2 | 4 | 8) || rest.len() % w as usize != 0 {
        return Err(format!("intset: width {w} with {} bytes", rest.len()));
    }
    let vals: Vec<i64> = rest
        .chunks_exact(w as usize)
        .map(|c| match w {
            2 => i16::from_le_bytes(c.try_into().unwrap()) as i64,
            4 => i32::from_le_bytes(c.try_into().unwrap()) as i64,
            _ => i64::from_le_bytes(c.try_into().unwrap()),
        })
        .collect();
    if vals.windows(2).any(|p| p[0] >= p[1]) {
        return Err("intset: values not strictly ascending".into());
    }
    // Values decoded from a width always fit it: no further check.
    Ok((vals, w))
}

/// Number of members without decoding.
pub fn count(b: &[u8]) -> usize {
    match b.split_first() {
        Some((&w, rest)) if w > 0 => rest.len() / w as usize,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_in_redis_sense() {
        assert_eq!(as_int(b"0"), Some(0));
        assert_eq!(as_int(b"-5"), Some(-5));
        assert_eq!(as_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(as_int(b"-9223372036854775808"), Some(i64::MIN));
        for s in [
            &b"007"[..],
            b"+1",
            b"-0",
            b"",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"1.0",
        ] {
            assert_eq!(as_int(s), None, "{:?}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn widths_and_order() {
        for set in [
            vec![],
            vec![1, 2, 3],
            vec![-70000, 5],
            vec![i64::MIN, 0, i64::MAX],
        ] {
            let b = encode(&set, 2);
            let w = set.iter().map(|&v| width_of(v)).max().unwrap_or(2);
            assert_eq!(decode(&b).unwrap(), (set.clone(), w));
            assert_eq!(count(&b), set.len());
        }
        assert_eq!(encode(&[1, 2], 2)[0], 2);
        assert_eq!(encode(&[1, 40000], 2)[0], 4);
        assert_eq!(encode(&[1, 1 << 40], 2)[0], 8);
        // Wider than the values need (a wide member was removed): kept, as Redis keeps it.
        assert_eq!(
            encode(&[1, 2], 8),
            [8, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(decode(&[4, 1, 0, 0, 0]).unwrap(), (vec![1], 4));
        assert!(decode(&[2, 2, 0, 1, 0]).is_err(), "descending");
        assert!(decode(&[3, 1, 0, 0]).is_err());
        assert!(decode(&[]).is_err());
    }
}
