//! SORT and SORT_RO (Redis's sort.c): the elements of a list, set or sorted set, sorted as
//! numbers or (ALPHA) as byte strings, by themselves or by the values of other keys (BY
//! pattern, `*` replaced by the element; `key->field` reads a hash field), a LIMIT window,
//! GET patterns (`#`: the element), and STORE into a list. Byte order stands in for Redis's
//! `strcoll`, which is byte order in the C locale the server runs in.

use crate::commands::{parse_i64, upper, Ctx, E_SYNTAX, E_WRONGTYPE};
use crate::keyspace::Val;
use crate::resp;
use crate::types::{hash, list, set, Type};
use std::cmp::Ordering;

/// One element to sort and what it sorts by.
struct Item {
    obj: Vec<u8>,
    score: f64,
    /// ALPHA with BY: the BY value (None: no such key).
    by: Option<Vec<u8>>,
}

/// The value `pattern` names for element `subst` (Redis's `lookupKeyByPattern`): `#` is the
/// element itself; a pattern without `*` names nothing; `key->field` reads a hash field.
fn lookup_by_pattern(c: &mut Ctx, pattern: &[u8], subst: &[u8]) -> daisy::Result<Option<Vec<u8>>> {
    if pattern == b"#" {
        return Ok(Some(subst.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else {
        return Ok(None);
    };
    // A hash dereference: "->" after the '*' with a field after it.
    let arrow = pattern[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|p| p + star + 1)
        .filter(|&p| p + 2 < pattern.len());
    let (key_pat, field) = match arrow {
        Some(p) => (&pattern[..p], Some(&pattern[p + 2..])),
        None => (pattern, None),
    };
    let mut key = Vec::with_capacity(key_pat.len() + subst.len());
    key.extend_from_slice(&key_pat[..star]);
    key.extend_from_slice(subst);
    key.extend_from_slice(&key_pat[star + 1..]);
    let Some(v) = c.lookup_read(&key)? else {
        return Ok(None);
    };
    match field {
        Some(f) => {
            if v.ty != Type::Hash {
                return Ok(None);
            }
            hash::HashVal::open(c, &v)?.get(c, f)
        }
        None => {
            if v.ty != Type::String {
                return Ok(None);
            }
            Ok(Some(c.payload(&v)?))
        }
    }
}

/// `strtod` over the whole value, as SORT reads a score: None when something follows the
/// number, it is out of range, or it is NaN. Leading white space is allowed and an empty
/// value reads as 0, as with `strtod`.
fn score_of(v: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(v).ok()?;
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    if t.is_empty() {
        return if s.is_empty() { Some(0.0) } else { None };
    }
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    // Rust reads "inf", "infinity" and "nan" too; strtod does as well, NaN is refused below.
    if body.starts_with("0x") {
        let neg = lower.starts_with('-');
        let digits = body.trim_start_matches("0x");
        let n = u64::from_str_radix(digits, 16).ok()? as f64;
        return Some(if neg { -n } else { n });
    }
    let f: f64 = t.parse().ok()?;
    if f.is_nan() || (f.is_infinite() && !body.starts_with("inf")) {
        return None;
    }
    Some(f)
}

pub fn sort(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    sort_generic(c, a, false)
}

pub fn sort_ro(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    sort_generic(c, a, true)
}

fn sort_generic(c: &mut Ctx, a: &[&[u8]], readonly: bool) -> daisy::Result<()> {
    let (mut desc, mut alpha) = (false, false);
    let (mut limit_start, mut limit_count) = (0i64, -1i64);
    let mut store: Option<&[u8]> = None;
    let mut by: Option<&[u8]> = None;
    let mut dontsort = false;
    let mut gets: Vec<&[u8]> = Vec::new();
    let mut j = 2;
    while j < a.len() {
        let left = a.len() - j - 1;
        match &upper(a[j])[..] {
            b"ASC" => desc = false,
            b"DESC" => desc = true,
            b"ALPHA" => alpha = true,
            b"LIMIT" if left >= 2 => {
                let (Some(s), Some(n)) = (parse_i64(a[j + 1]), parse_i64(a[j + 2])) else {
                    return c.err(crate::commands::E_INT);
                };
                limit_start = s;
                limit_count = n;
                j += 2;
            }
            b"STORE" if !readonly && left >= 1 => {
                store = Some(a[j + 1]);
                j += 1;
            }
            b"BY" if left >= 1 => {
                by = Some(a[j + 1]);
                // A constant BY pattern: nothing to sort.
                dontsort = !a[j + 1].contains(&b'*');
                j += 1;
            }
            b"GET" if left >= 1 => {
                gets.push(a[j + 1]);
                j += 1;
            }
            _ => return c.err(E_SYNTAX),
        }
        j += 1;
    }
    let sortval: Option<Val> = c.lookup_read(a[1])?;
    let ty = sortval.as_ref().map(|v| v.ty);
    if ty.is_some_and(|t| !matches!(t, Type::List | Type::Set | Type::ZSet)) {
        return c.err(E_WRONGTYPE);
    }
    // A set has no order of its own: stored or scripted output is sorted anyway.
    if dontsort && ty == Some(Type::Set) && (store.is_some() || c.cl.script) {
        dontsort = false;
        alpha = true;
        by = None;
    }
    // The elements, in the value's own order.
    let elements: Vec<Vec<u8>> = match (&sortval, ty) {
        (Some(v), Some(Type::List)) => list::ListVal::open(c, v)?.all(c)?,
        (Some(v), Some(Type::Set)) => set::SetVal::open(c, v)?.all(c)?,
        (Some(v), Some(Type::ZSet)) => crate::types::zset_members(c, v)?,
        _ => Vec::new(),
    };
    let vectorlen = elements.len() as i64;
    let mut start = limit_start.max(0).min(vectorlen);
    let limit_count = limit_count.max(-1).min(vectorlen);
    let mut end = if limit_count < 0 {
        vectorlen - 1
    } else {
        start + limit_count - 1
    };
    if start >= vectorlen {
        start = vectorlen - 1;
        end = vectorlen - 2;
    }
    if end >= vectorlen {
        end = vectorlen - 1;
    }
    let mut items: Vec<Item> = elements
        .into_iter()
        .map(|obj| Item {
            obj,
            score: 0.0,
            by: None,
        })
        .collect();
    if dontsort && desc && ty != Some(Type::Set) {
        // Lists and sorted sets keep their own order, reversed by DESC.
        items.reverse();
    }
    let mut conversion_error = false;
    if !dontsort {
        for it in items.iter_mut() {
            let byval = match by {
                Some(p) => match lookup_by_pattern(c, p, &it.obj)? {
                    Some(v) => v,
                    None => continue,
                },
                None => it.obj.clone(),
            };
            if alpha {
                if by.is_some() {
                    it.by = Some(byval);
                }
            } else {
                match score_of(&byval) {
                    Some(f) => it.score = f,
                    None => conversion_error = true,
                }
            }
        }
        let by_pattern = by.is_some();
        items.sort_by(|x, y| {
            let o = if !alpha {
                x.score
                    .partial_cmp(&y.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| x.obj.cmp(&y.obj))
            } else if by_pattern {
                match (&x.by, &y.by) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(p), Some(q)) => p.cmp(q),
                }
            } else {
                x.obj.cmp(&y.obj)
            };
            if desc {
                o.reverse()
            } else {
                o
            }
        });
    }
    if conversion_error {
        return c.err("ERR One or more scores can't be converted into double");
    }
    let window: &[Item] = if end >= start && start >= 0 {
        &items[start as usize..=end as usize]
    } else {
        &[]
    };
    let outputlen = if gets.is_empty() {
        window.len()
    } else {
        gets.len() * window.len()
    };
    match store {
        None => {
            resp::array(c.out, outputlen);
            for it in window {
                if gets.is_empty() {
                    resp::bulk(c.out, &it.obj);
                }
                for g in &gets {
                    match lookup_by_pattern(c, g, &it.obj)? {
                        Some(v) => resp::bulk(c.out, &v),
                        None => c.nil(),
                    }
                }
            }
        }
        Some(dst) => {
            let mut out: Vec<Vec<u8>> = Vec::with_capacity(outputlen);
            for it in window {
                if gets.is_empty() {
                    out.push(it.obj.clone());
                }
                for g in &gets {
                    out.push(lookup_by_pattern(c, g, &it.obj)?.unwrap_or_default());
                }
            }
            let db = c.db();
            // The destination is replaced whatever it held (its expiry goes with it), or
            // deleted when the result is empty.
            let existed = c.lookup(dst)?;
            if let Some(old) = &existed {
                c.ks.delete(c.tx, db, dst, old)?;
                c.touch(dst);
            }
            if !out.is_empty() {
                let refs: Vec<&[u8]> = out.iter().map(|v| &v[..]).collect();
                let mut l = list::ListVal::new();
                l.push(c, &refs, list::End::Tail)?;
                l.store(c, dst, None)?;
                c.notify(crate::pubsub::N_LIST, "sortstore", dst);
            } else if existed.is_some() {
                c.notify(crate::pubsub::N_GENERIC, "del", dst);
            }
            resp::int(c.out, outputlen as i64);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::score_of;

    #[test]
    fn scores_read_as_strtod_does() {
        assert_eq!(score_of(b"1.5"), Some(1.5));
        assert_eq!(score_of(b"  -2"), Some(-2.0));
        assert_eq!(score_of(b""), Some(0.0));
        assert_eq!(score_of(b"0x10"), Some(16.0));
        assert_eq!(score_of(b"inf"), Some(f64::INFINITY));
        assert_eq!(score_of(b"nan"), None);
        assert_eq!(score_of(b"1x"), None);
        assert_eq!(score_of(b"1e400"), None);
    }
}
