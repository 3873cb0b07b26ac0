//! HyperLogLog (Redis's hyperloglog.c): PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST.
//!
//! An HLL is a string value (TYPE string) in Redis's own format, byte for byte, so a value
//! moved with DUMP/RESTORE between Redis and this server counts the same: a 16-byte header
//! ("HYLL", the encoding byte, 3 unused bytes, the cached cardinality as 8 little-endian
//! bytes whose top bit set means "stale"), then either the sparse encoding (run-length
//! opcodes ZERO `00xxxxxx`, XZERO `01xxxxxx yyyyyyyy`, VAL `1vvvvvxx`) or the dense one
//! (16384 registers of 6 bits, least significant bits first). Elements are hashed with
//! MurmurHash64A (seed 0xadc83b19): the low 14 bits pick the register, the run of zeros
//! above them (plus one) is the register's candidate value. The estimate is Redis 5's
//! (Ertl's improved estimator, from the registers' histogram). A sparse value becomes dense
//! when a register exceeds 32 or the value would pass `hll-sparse-max-bytes`.
//!
//! Layout: the string's. Crash reasoning: a write reads the value, changes a copy and stores
//! the new record in the command's transaction (a whole-record write), so a crash leaves the
//! command whole or absent; PFCOUNT's cached cardinality is written the same way.

use super::Type;
use crate::commands::{Ctx, E_WRONGTYPE};
use crate::keyspace::{Enc, Val};
use crate::pubsub::N_STRING;
use crate::resp;

const P: u32 = 14;
const Q: u32 = 64 - P;
const REGISTERS: usize = 1 << P;
const HDR: usize = 16;
const DENSE_SIZE: usize = HDR + (REGISTERS * 6).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

const E_NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const E_CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

/// MurmurHash64A as Redis uses it (little-endian word reads).
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for w in &mut chunks {
        let mut k = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, b) in rest.iter().enumerate() {
            h ^= u64::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element updates and the value it proposes (Redis's `hllPatLen`).
fn pat_len(ele: &[u8]) -> (usize, u8) {
    let h = murmur64a(ele, 0xadc8_3b19);
    let index = (h & (REGISTERS as u64 - 1)) as usize;
    let rest = (h >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---- dense registers --------------------------------------------------------------------

fn dense_get(r: &[u8], i: usize) -> u8 {
    dense_get_at(r, i * 6 / 8, i * 6 % 8)
}

/// The 6-bit register starting at bit `fb` of byte `byte` of `r`.
fn dense_get_at(r: &[u8], byte: usize, fb: usize) -> u8 {
    let b0 = u32::from(r[byte]);
    let b1 = u32::from(r.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & 63) as u8
}

fn dense_set(r: &mut [u8], i: usize, v: u8) {
    dense_set_at(r, i * 6 / 8, i * 6 % 8, v)
}

fn dense_set_at(r: &mut [u8], byte: usize, fb: usize, v: u8) {
    let v = u32::from(v);
    r[byte] = ((u32::from(r[byte]) & !(63u32 << fb)) | (v << fb)) as u8;
    if let Some(b) = r.get_mut(byte + 1) {
        *b = ((u32::from(*b) & !(63u32 >> (8 - fb))) | (v >> (8 - fb))) as u8;
    }
}

// ---- sparse opcodes ---------------------------------------------------------------------

fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}
fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}
fn zero_len(b: u8) -> usize {
    usize::from(b & 0x3f) + 1
}
fn xzero_len(b: u8, b1: u8) -> usize {
    ((usize::from(b & 0x3f) << 8) | usize::from(b1)) + 1
}
fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}
fn val_len(b: u8) -> usize {
    usize::from(b & 3) + 1
}
fn val_op(v: u8, len: usize) -> u8 {
    ((v - 1) << 2) | (len as u8 - 1) | 0x80
}
fn push_zeros(out: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        let l = len - 1;
        out.push((l >> 8) as u8 | 0x40);
        out.push((l & 0xff) as u8);
    } else {
        out.push(len as u8 - 1);
    }
}

/// The sparse opcodes' runs: (register count, value) each; Err when the opcodes do not cover
/// exactly the 16384 registers.
fn sparse_runs(body: &[u8]) -> Vec<(usize, u8)> {
    let mut runs = Vec::new();
    let mut p = 0;
    while p < body.len() {
        let b = body[p];
        if is_zero(b) {
            runs.push((zero_len(b), 0));
            p += 1;
        } else if is_xzero(b) {
            runs.push((xzero_len(b, body.get(p + 1).copied().unwrap_or(0)), 0));
            p += 2;
        } else {
            runs.push((val_len(b), val_value(b)));
            p += 1;
        }
    }
    runs
}

/// A new, empty HLL: sparse, one XZERO covering every register, cached cardinality 0.
fn new_hll() -> Vec<u8> {
    let mut v = b"HYLL".to_vec();
    v.extend_from_slice(&[SPARSE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    push_zeros(&mut v, REGISTERS);
    v
}

fn valid_hll(v: &[u8]) -> bool {
    v.len() >= HDR
        && &v[..4] == b"HYLL"
        && v[4] <= SPARSE
        && (v[4] != DENSE || v.len() == DENSE_SIZE)
}

fn invalidate(v: &mut [u8]) {
    v[15] |= 0x80;
}

/// Sparse to dense (`hllSparseToDense`); Err: the sparse data is corrupt.
fn to_dense(v: &mut Vec<u8>) -> Result<(), ()> {
    if v[4] == DENSE {
        return Ok(());
    }
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR].copy_from_slice(&v[..HDR]);
    d[4] = DENSE;
    let mut idx = 0;
    for (n, val) in sparse_runs(&v[HDR..]) {
        if val == 0 {
            idx += n;
            continue;
        }
        if idx + n > REGISTERS {
            break;
        }
        for _ in 0..n {
            dense_set(&mut d[HDR..], idx, val);
            idx += 1;
        }
    }
    if idx != REGISTERS {
        return Err(());
    }
    *v = d;
    Ok(())
}

/// Redis's `hllSparseSet`: Ok(true) when a register grew (the value may have become dense),
/// Err when the data is corrupt.
fn sparse_set(v: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, ()> {
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    let end = v.len();
    let (mut p, mut first, mut span, mut prev) = (HDR, 0usize, 0usize, None);
    while p < end {
        let b = v[p];
        let oplen;
        if is_zero(b) {
            span = zero_len(b);
            oplen = 1;
        } else if is_xzero(b) {
            span = xzero_len(b, v.get(p + 1).copied().unwrap_or(0));
            oplen = 2;
        } else {
            span = val_len(b);
            oplen = 1;
        }
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p >= end {
        return Err(());
    }
    let b = v[p];
    let (zero, xzero) = (is_zero(b), is_xzero(b));
    let last = first + span - 1;
    let mut seq = Vec::with_capacity(5);
    if !zero && !xzero {
        let cur = val_value(b);
        if cur >= count {
            return Ok(false);
        }
        if span == 1 {
            v[p] = val_op(count, 1);
            merge_vals(v, prev.unwrap_or(HDR));
            return Ok(true);
        }
        if index != first {
            seq.push(val_op(cur, index - first));
        }
        seq.push(val_op(count, 1));
        if index != last {
            seq.push(val_op(cur, last - index));
        }
    } else {
        if zero && span == 1 {
            v[p] = val_op(count, 1);
            merge_vals(v, prev.unwrap_or(HDR));
            return Ok(true);
        }
        if index != first {
            push_zeros(&mut seq, index - first);
        }
        seq.push(val_op(count, 1));
        if index != last {
            push_zeros(&mut seq, last - index);
        }
    }
    let oldlen = if xzero { 2 } else { 1 };
    if seq.len() > oldlen && v.len() + seq.len() - oldlen > max_bytes {
        return promote(v, index, count);
    }
    let stop = (p + oldlen).min(v.len());
    v.splice(p..stop, seq);
    merge_vals(v, prev.unwrap_or(HDR));
    Ok(true)
}

fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, ()> {
    to_dense(v)?;
    let r = &mut v[HDR..];
    if dense_get(r, index) < count {
        dense_set(r, index, count);
    }
    Ok(true)
}

/// Step 4 of `hllSparseSet`: merge adjacent VAL opcodes of equal value, scanning at most
/// five opcodes from `p`, as Redis does (so the bytes are Redis's).
fn merge_vals(v: &mut Vec<u8>, mut p: usize) {
    let mut scan = 5;
    while p < v.len() {
        if scan == 0 {
            break;
        }
        scan -= 1;
        let b = v[p];
        if is_xzero(b) {
            p += 2;
            continue;
        }
        if is_zero(b) {
            p += 1;
            continue;
        }
        if p + 1 < v.len() && v[p + 1] & 0x80 != 0 {
            let (v1, v2) = (val_value(b), val_value(v[p + 1]));
            if v1 == v2 {
                let len = val_len(b) + val_len(v[p + 1]);
                if len <= VAL_MAX_LEN {
                    v[p + 1] = val_op(v1, len);
                    v.remove(p);
                    continue;
                }
            }
        }
        p += 1;
    }
}

/// Add one element (`hllAdd`): Ok(true) when a register changed.
fn add(v: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, ()> {
    let (index, count) = pat_len(ele);
    if v[4] == DENSE {
        let r = &mut v[HDR..];
        if dense_get(r, index) < count {
            dense_set(r, index, count);
            return Ok(true);
        }
        return Ok(false);
    }
    sparse_set(v, index, count, max_bytes)
}

/// Fold `v`'s registers into `max` (`hllMerge`); Err: corrupt.
fn merge_into(max: &mut [u8], v: &[u8]) -> Result<(), ()> {
    if v[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&v[HDR..], i));
        }
        return Ok(());
    }
    let mut i = 0;
    for (n, val) in sparse_runs(&v[HDR..]) {
        if val == 0 {
            i += n;
            continue;
        }
        if i + n > REGISTERS {
            break;
        }
        for m in &mut max[i..i + n] {
            *m = (*m).max(val);
        }
        i += n;
    }
    if i != REGISTERS {
        return Err(());
    }
    Ok(())
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// Redis's `hllCount` from the registers' histogram.
fn estimate(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histo[Q as usize + 1])) / m);
    for j in (1..=Q as usize).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// The histogram of a value's registers; Err: corrupt sparse data.
fn histogram(v: &[u8]) -> Result<[u32; 64], ()> {
    let mut h = [0u32; 64];
    if v[4] == DENSE {
        for i in 0..REGISTERS {
            h[usize::from(dense_get(&v[HDR..], i))] += 1;
        }
        return Ok(h);
    }
    let mut idx = 0;
    for (n, val) in sparse_runs(&v[HDR..]) {
        idx += n;
        h[usize::from(val)] += n as u32;
    }
    if idx != REGISTERS {
        return Err(());
    }
    Ok(h)
}

fn raw_histogram(regs: &[u8]) -> [u32; 64] {
    let mut h = [0u32; 64];
    for r in regs {
        h[usize::from(*r)] += 1;
    }
    h
}

/// PFADD's effect on a value (None: absent) as this server computes it: the new bytes, or
/// None when the value is no HLL or is corrupt (PFADD answers an error and changes nothing).
/// The crash tests' models replay PFADD with it.
pub fn pfadd_value(old: Option<&[u8]>, elems: &[&[u8]], max_bytes: usize) -> Option<Vec<u8>> {
    let (mut v, mut updated) = match old {
        Some(o) if !valid_hll(o) => return None,
        Some(o) => (o.to_vec(), false),
        None => (new_hll(), true),
    };
    for e in elems {
        updated |= add(&mut v, e, max_bytes).ok()?;
    }
    if updated {
        invalidate(&mut v);
    }
    Some(v)
}

// ---- commands -----------------------------------------------------------------------------

/// A key's HLL: Ok(None) absent; Err(()) the reply (WRONGTYPE) was sent.
type Found = Result<Option<(Val, Vec<u8>)>, ()>;

/// The key's HLL and its record.
fn lookup_hll(c: &mut Ctx, key: &[u8], write: bool) -> daisy::Result<Found> {
    let v = if write {
        c.lookup(key)?
    } else {
        c.lookup_read(key)?
    };
    let Some(v) = v else { return Ok(Ok(None)) };
    if v.ty != Type::String {
        c.err(E_WRONGTYPE)?;
        return Ok(Err(()));
    }
    let s = c.payload(&v)?;
    // An integer-encoded string is not an HLL in Redis (not an sds).
    if !valid_hll(&s) || v.enc == Enc::Int {
        c.err(E_NOT_HLL)?;
        return Ok(Err(()));
    }
    Ok(Ok(Some((v, s))))
}

fn store(c: &mut Ctx, key: &[u8], val: &[u8], old: Option<&Val>) -> daisy::Result<()> {
    super::bitops::store(c, key, val, old, true)
}

/// Redis's `dbUnshareStringValue` of an HLL left unchanged: the encoding becomes raw.
fn unshare(c: &mut Ctx, key: &[u8], val: &[u8], old: &Val) -> daisy::Result<()> {
    if old.enc != Enc::Raw {
        super::bitops::store(c, key, val, Some(old), false)?;
    }
    Ok(())
}

fn sparse_max(c: &Ctx) -> usize {
    c.sv.config
        .get("hll-sparse-max-bytes")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(3000)
}

/// PFADD on a dense HLL of a raw string (`v`, the key's record): only the register bytes
/// that grow and the cache's validity byte are written, through the command's transaction,
/// instead of the whole 12 KB value (which a replacement would read back and compare). Each
/// element's register is read as the transaction sees it, so registers an earlier element of
/// the same command set are seen. None: not such a value (the caller takes the general path).
fn pfadd_dense_in_place(c: &mut Ctx, v: &Val, elems: &[&[u8]]) -> daisy::Result<Option<bool>> {
    if v.ty != Type::String || v.enc != Enc::Raw || v.len != DENSE_SIZE {
        return Ok(None);
    }
    let mut h = [0u8; HDR];
    v.entry.read_tx(c.tx, v.off, &mut h)?;
    // The header of a value of the dense length (`valid_hll` of the whole value).
    if &h[..4] != b"HYLL" || h[4] != DENSE {
        return Ok(None);
    }
    let mut updated = false;
    for e in elems {
        let (index, count) = pat_len(e);
        let byte = index * 6 / 8;
        // The register's bytes (one for the last register, which ends the value).
        let n = (DENSE_SIZE - HDR - byte).min(2);
        let mut r = [0u8; 2];
        v.entry.read_tx(c.tx, v.off + HDR + byte, &mut r[..n])?;
        let fb = index * 6 % 8;
        if dense_get_at(&r[..n], 0, fb) >= count {
            continue;
        }
        dense_set_at(&mut r[..n], 0, fb, count);
        c.ks.patch_payload(c.tx, v, HDR + byte, &r[..n])?;
        updated = true;
    }
    if updated && h[15] & 0x80 == 0 {
        invalidate(&mut h);
        c.ks.patch_payload(c.tx, v, 15, &h[15..16])?;
    }
    Ok(Some(updated))
}

/// PFADD key [element ...]
pub fn pfadd(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a.len() > 2 {
        if let Some(v) = c.lookup(a[1])? {
            if let Some(updated) = pfadd_dense_in_place(c, &v, &a[2..])? {
                if updated {
                    c.touch(a[1]);
                    c.notify(N_STRING, "pfadd", a[1]);
                }
                resp::int(c.out, updated as i64);
                return Ok(());
            }
        }
    }
    let Ok(found) = lookup_hll(c, a[1], true)? else {
        return Ok(());
    };
    let (old, mut v, mut updated) = match found {
        Some((o, s)) => (Some(o), s, false),
        None => (None, new_hll(), true),
    };
    let max = sparse_max(c);
    for e in &a[2..] {
        match add(&mut v, e, max) {
            Ok(true) => updated = true,
            Ok(false) => {}
            Err(()) => return c.err(E_CORRUPT),
        }
    }
    if updated {
        invalidate(&mut v);
        store(c, a[1], &v, old.as_ref())?;
        c.notify(N_STRING, "pfadd", a[1]);
    } else if let Some(o) = &old {
        unshare(c, a[1], &v, o)?;
    }
    resp::int(c.out, updated as i64);
    Ok(())
}

/// PFCOUNT key [key ...]
pub fn pfcount(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a.len() > 2 {
        let mut max = vec![0u8; REGISTERS];
        for k in &a[1..] {
            let Ok(found) = lookup_hll(c, k, false)? else {
                return Ok(());
            };
            if let Some((_, s)) = found {
                if merge_into(&mut max, &s).is_err() {
                    return c.err(E_CORRUPT);
                }
            }
        }
        resp::int(c.out, estimate(&raw_histogram(&max)) as i64);
        return Ok(());
    }
    let Ok(found) = lookup_hll(c, a[1], true)? else {
        return Ok(());
    };
    let Some((old, mut v)) = found else {
        resp::int(c.out, 0);
        return Ok(());
    };
    if v[15] & 0x80 == 0 {
        let card = u64::from_le_bytes(v[8..16].try_into().expect("8 bytes"));
        unshare(c, a[1], &v, &old)?;
        resp::int(c.out, card as i64);
        return Ok(());
    }
    let Ok(h) = histogram(&v) else {
        return c.err(E_CORRUPT);
    };
    let card = estimate(&h);
    v[8..16].copy_from_slice(&card.to_le_bytes());
    // The cache is written back, as Redis does (a DUMP then shows Redis's bytes).
    store(c, a[1], &v, Some(&old))?;
    resp::int(c.out, card as i64);
    Ok(())
}

/// PFMERGE destkey [sourcekey ...]
pub fn pfmerge(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let mut max = vec![0u8; REGISTERS];
    let mut use_dense = false;
    for k in &a[1..] {
        let Ok(found) = lookup_hll(c, k, false)? else {
            return Ok(());
        };
        if let Some((_, s)) = found {
            use_dense |= s[4] == DENSE;
            if merge_into(&mut max, &s).is_err() {
                return c.err(E_CORRUPT);
            }
        }
    }
    let old = c.lookup(a[1])?;
    let mut v = match &old {
        Some(o) => c.payload(o)?,
        None => new_hll(),
    };
    if use_dense && to_dense(&mut v).is_err() {
        return c.err(E_CORRUPT);
    }
    let smax = sparse_max(c);
    for (j, &m) in max.iter().enumerate() {
        if m == 0 {
            continue;
        }
        if v[4] == DENSE {
            let r = &mut v[HDR..];
            if dense_get(r, j) < m {
                dense_set(r, j, m);
            }
        } else if sparse_set(&mut v, j, m, smax).is_err() {
            // Redis ignores the result here; the destination was checked above.
        }
    }
    invalidate(&mut v);
    store(c, a[1], &v, old.as_ref())?;
    c.notify(N_STRING, "pfadd", a[1]);
    resp::ok(c.out);
    Ok(())
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key
pub fn pfdebug(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let sub = crate::commands::upper(a[1]);
    let Ok(found) = lookup_hll(c, a[2], true)? else {
        return Ok(());
    };
    let Some((o, mut v)) = found else {
        return c.err("ERR The specified key does not exist");
    };
    match &sub[..] {
        b"GETREG" => {
            let was_sparse = v[4] == SPARSE;
            if to_dense(&mut v).is_err() {
                return c.err(E_CORRUPT);
            }
            if was_sparse {
                store(c, a[2], &v, Some(&o))?;
            }
            resp::array(c.out, REGISTERS);
            for i in 0..REGISTERS {
                resp::int(c.out, i64::from(dense_get(&v[HDR..], i)));
            }
        }
        b"DECODE" => {
            if v[4] != SPARSE {
                return c.err("ERR HLL encoding is not sparse");
            }
            let mut s = String::new();
            let mut p = HDR;
            while p < v.len() {
                let b = v[p];
                if is_zero(b) {
                    s.push_str(&format!("z:{} ", zero_len(b)));
                    p += 1;
                } else if is_xzero(b) {
                    let n = xzero_len(b, v.get(p + 1).copied().unwrap_or(0));
                    s.push_str(&format!("Z:{n} "));
                    p += 2;
                } else {
                    s.push_str(&format!("v:{},{} ", val_value(b), val_len(b)));
                    p += 1;
                }
            }
            let s = s.trim_end();
            resp::simple(c.out, s);
        }
        b"ENCODING" => {
            resp::simple(c.out, if v[4] == DENSE { "dense" } else { "sparse" });
        }
        b"TODENSE" => {
            let conv = v[4] == SPARSE;
            if to_dense(&mut v).is_err() {
                return c.err(E_CORRUPT);
            }
            if conv {
                store(c, a[2], &v, Some(&o))?;
            }
            resp::int(c.out, conv as i64);
        }
        _ => {
            let name = String::from_utf8_lossy(a[1]).into_owned();
            return c.err(&format!("ERR Unknown PFDEBUG subcommand '{name}'"));
        }
    }
    Ok(())
}

/// PFSELFTEST: checks the register layout and that the sparse and dense encodings estimate
/// the same for the same elements.
pub fn pfselftest(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    match self_test() {
        Ok(()) => {
            resp::ok(c.out);
            Ok(())
        }
        Err(e) => c.err(&format!("ERR TESTFAILED {e}")),
    }
}

fn self_test() -> Result<(), String> {
    let mut regs = vec![0u8; DENSE_SIZE - HDR];
    let mut model = vec![0u8; REGISTERS];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..100_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let i = (seed % REGISTERS as u64) as usize;
        let val = ((seed >> 20) % 64) as u8;
        dense_set(&mut regs, i, val);
        model[i] = val;
    }
    if (0..REGISTERS).any(|i| dense_get(&regs, i) != model[i]) {
        return Err("dense register layout".into());
    }
    let (mut sparse, mut dense) = (new_hll(), new_hll());
    to_dense(&mut dense).map_err(|()| "conversion")?;
    for n in 0..5000u32 {
        let e = n.to_string();
        add(&mut sparse, e.as_bytes(), 3000).map_err(|()| "sparse add")?;
        add(&mut dense, e.as_bytes(), 3000).map_err(|()| "dense add")?;
        let (hs, hd) = (
            histogram(&sparse).map_err(|()| "sparse data")?,
            histogram(&dense).map_err(|()| "dense data")?,
        );
        if estimate(&hs) != estimate(&hd) {
            return Err(format!("sparse and dense differ after {n} elements"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_matches_redis() {
        // The seed and element Redis's own tests rely on: an empty HLL's first PFADD.
        assert_eq!(new_hll().len(), 18);
        assert!(self_test().is_ok());
    }

    #[test]
    fn estimate_of_nothing_is_zero() {
        let mut h = [0u32; 64];
        h[0] = REGISTERS as u32;
        assert_eq!(estimate(&h), 0);
    }
}
