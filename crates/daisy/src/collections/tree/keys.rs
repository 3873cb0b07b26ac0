//! Keys and values of [`super::PTreeMap`] entries: comparing a search key with an entry key
//! (inline, or in an item object behind a 16-byte prefix), reading them out, encoding new
//! entries and separators (allocating item objects for long ones).

use super::node::*;
use crate::collections::table::Src;
use crate::error::{Error, Result};
use crate::tx::Tx;
use std::cmp::Ordering;

/// Largest key or value (an outline entry stores the key length in 32 bits).
pub const MAX_ITEM_LEN: usize = u32::MAX as usize;

/// Item objects of at most this many bytes are assembled in DRAM and written in one copy;
/// larger ones are allocated zeroed and filled piece by piece (no second copy of a huge key).
const ASSEMBLE_MAX: usize = 64 << 10;

pub fn check_len(what: &str, n: usize) -> Result<()> {
    if n > MAX_ITEM_LEN {
        return Err(Error::Unsupported(format!(
            "{what} of {n} bytes is larger than the ordered map's limit of {MAX_ITEM_LEN} bytes"
        )));
    }
    Ok(())
}

/// (klen, vlen) of the item object at `obj`, checked to lie inside the heap.
pub fn obj_lens(src: &Src, obj: u64) -> Result<(u64, u64)> {
    let h: [u64; 2] = src.read_pod(obj)?;
    let end = obj
        .checked_add(OBJ_HDR)
        .and_then(|e| e.checked_add(h[0]))
        .and_then(|e| e.checked_add(h[1]));
    if end.is_none_or(|e| e > src.heap_end()) {
        return Err(damaged(obj, "ordered map item object runs past the heap"));
    }
    Ok((h[0], h[1]))
}

/// The whole key.
pub fn read_key(src: &Src, k: &KeyRef) -> Result<Vec<u8>> {
    match *k {
        KeyRef::In(b) => Ok(b.to_vec()),
        KeyRef::Out { obj, klen, .. } => {
            let (kl, _) = obj_lens(src, obj)?;
            if kl != klen {
                return Err(damaged(
                    obj,
                    "ordered map entry and its object disagree on the key length",
                ));
            }
            let mut out = vec![0u8; kl as usize];
            src.read(obj + OBJ_HDR, &mut out)?;
            Ok(out)
        }
    }
}

/// The whole value.
pub fn read_val(src: &Src, v: &ValRef) -> Result<Vec<u8>> {
    match *v {
        ValRef::In(b) => Ok(b.to_vec()),
        ValRef::Out { obj, klen } => {
            let (kl, vl) = obj_lens(src, obj)?;
            if kl != klen {
                return Err(damaged(
                    obj,
                    "ordered map entry and its object disagree on the key length",
                ));
            }
            let mut out = vec![0u8; vl as usize];
            src.read(obj + OBJ_HDR + kl, &mut out)?;
            Ok(out)
        }
    }
}

/// Byte strings in memcmp order, a proper prefix first (as `a.cmp(b)`), 8 bytes at a time:
/// keys are short (a sorted set's are a score and a member) and most comparisons end in
/// their first word, where a call into the C library's memcmp costs more than the work.
#[inline(always)]
pub fn cmp_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_be_bytes(a[i..i + 8].try_into().unwrap());
        let y = u64::from_be_bytes(b[i..i + 8].try_into().unwrap());
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    while i < n {
        if a[i] != b[i] {
            return a[i].cmp(&b[i]);
        }
        i += 1;
    }
    a.len().cmp(&b.len())
}

/// Compare the search key `k` with an entry's key (memcmp order, a proper prefix first).
/// An outline key is read from its object only when its prefix does not decide.
#[inline]
pub fn cmp_key(src: &Src, k: &[u8], e: &KeyRef) -> Result<Ordering> {
    match *e {
        KeyRef::In(b) => Ok(cmp_bytes(k, b)),
        KeyRef::Out { obj, klen, prefix } => {
            let p = prefix.len();
            let c = k.len().min(p);
            match cmp_bytes(&k[..c], &prefix[..c]) {
                Ordering::Equal => {}
                o => return Ok(o),
            }
            if k.len() <= p || p as u64 == klen {
                // One of them ends within the prefix.
                return Ok((k.len() as u64).cmp(&klen));
            }
            cmp_tail(src, &k[p..], obj, p as u64, klen)
        }
    }
}

/// Compare `rest` with the object's key from byte `from` on, in pieces.
fn cmp_tail(src: &Src, rest: &[u8], obj: u64, from: u64, klen: u64) -> Result<Ordering> {
    let (kl, _) = obj_lens(src, obj)?;
    if kl != klen {
        return Err(damaged(
            obj,
            "ordered map entry and its object disagree on the key length",
        ));
    }
    let tail = (klen - from) as usize;
    let mut buf = [0u8; 256];
    let mut done = 0;
    let common = rest.len().min(tail);
    while done < common {
        let n = (common - done).min(buf.len());
        src.read(obj + OBJ_HDR + from + done as u64, &mut buf[..n])?;
        match rest[done..done + n].cmp(&buf[..n]) {
            Ordering::Equal => {}
            o => return Ok(o),
        }
        done += n;
    }
    Ok(rest.len().cmp(&tail))
}

/// Allocate an item object `[klen u64][vlen u64][key][value]` in `tx`.
pub fn alloc_obj(tx: &mut Tx, key: &[u8], val: &[u8]) -> Result<u64> {
    let total = OBJ_HDR as usize + key.len() + val.len();
    let mut hdr = [0u8; 16];
    hdr[..8].copy_from_slice(&(key.len() as u64).to_le_bytes());
    hdr[8..].copy_from_slice(&(val.len() as u64).to_le_bytes());
    if total <= ASSEMBLE_MAX {
        let mut b = Vec::with_capacity(total);
        b.extend_from_slice(&hdr);
        b.extend_from_slice(key);
        b.extend_from_slice(val);
        return Ok(tx.alloc_bytes(&b)?.offset());
    }
    let p = tx.alloc_zeroed_bytes(total as u64)?.offset();
    // A fresh object: these writes go in place, unlogged (flushed before the commit record).
    tx.write_bytes(p, &hdr)?;
    tx.write_bytes(p + OBJ_HDR, key)?;
    if !val.is_empty() {
        tx.write_bytes(p + OBJ_HDR + key.len() as u64, val)?;
    }
    Ok(p)
}

/// Whether the leaf entry for (key, value) is inline (see [`make_entry`]).
#[inline]
fn is_inline(geo: Geo, key: &[u8], val: &[u8]) -> bool {
    2 + key.len() + val.len() <= geo.inline_max()
}

/// Bytes of the leaf entry [`make_entry`] makes for (key, value) (nothing allocated).
#[inline]
pub fn entry_len(geo: Geo, key: &[u8], val: &[u8]) -> usize {
    if is_inline(geo, key, val) {
        pad8(2 + key.len() + val.len())
    } else {
        OUT_ENTRY
    }
}

/// The leaf entry for (key, value): inline when `2 + klen + vlen` fits the node's inline
/// limit, else an outline entry naming a new item object.
pub fn make_entry(tx: &mut Tx, geo: Geo, key: &[u8], val: &[u8]) -> Result<Vec<u8>> {
    check_len("key", key.len())?;
    check_len("value", val.len())?;
    if is_inline(geo, key, val) {
        return Ok(inline_entry(key, val));
    }
    let obj = alloc_obj(tx, key, val)?;
    Ok(outline_entry(key, obj))
}

/// The separator entry for `sep`: inline when short, else an outline entry naming a new
/// object that the internal item owns.
pub fn make_sep(tx: &mut Tx, geo: Geo, sep: &[u8]) -> Result<Vec<u8>> {
    if 2 + sep.len() <= geo.sep_inline_max() {
        return Ok(inline_entry(sep, &[]));
    }
    let obj = alloc_obj(tx, sep, &[])?;
    Ok(outline_entry(sep, obj))
}

/// The shortest separator `s` with `a < s <= b` (suffix truncation): `b`'s first
/// `lcp(a, b) + 1` bytes. Read from the known prefixes when they decide (almost always),
/// else from the objects.
pub fn shortest_sep(src: &Src, a: &KeyRef, b: &KeyRef) -> Result<Vec<u8>> {
    let (ka, kb) = (a.known(), b.known());
    let l = ka.iter().zip(kb).take_while(|(x, y)| x == y).count();
    if l < ka.len() && l < kb.len() {
        return Ok(kb[..l + 1].to_vec());
    }
    if a.complete() && l == ka.len() && l < kb.len() {
        return Ok(kb[..l + 1].to_vec());
    }
    let fa = read_key(src, a)?;
    let fb = read_key(src, b)?;
    let l = fa.iter().zip(&fb).take_while(|(x, y)| x == y).count();
    if l >= fb.len() || fa.as_slice() >= fb.as_slice() {
        return Err(damaged(0, "ordered map keys out of order at a split"));
    }
    Ok(fb[..l + 1].to_vec())
}
