//! The packed encoding of small collections (Redis's listpack): a count, then each item as
//! its length and its bytes, in order. A hash packs field, value, field, value, ...; a set
//! its members. Lengths and the count are LEB128 varints, so an item of up to 127 bytes costs
//! one byte of overhead (a listpack entry costs two: its header and its back-length).
//!
//! Invariants (checked by [`decode`]): the count matches the items, every length stays inside
//! the blob, nothing follows the last item. A packed value is rewritten whole by each change
//! (a fresh record), so it is never seen half-written.

/// Append `n` as a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Read a varint at `*pos`.
fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        n |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

/// The packed form of `items`.
pub fn encode<'a>(items: impl ExactSizeIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, items.len() as u64);
    for it in items {
        put_varint(&mut out, it.len() as u64);
        out.extend_from_slice(it);
    }
    out
}

/// The items of a packed blob, or what is wrong with it.
pub fn decode(b: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut pos = 0;
    let n = get_varint(b, &mut pos).ok_or("packed value: truncated count")?;
    if n > b.len() as u64 {
        return Err(format!("packed value: count {n} exceeds its {} bytes", b.len()));
    }
    let mut items = Vec::with_capacity(n as usize);
    for i in 0..n {
        let len = get_varint(b, &mut pos).ok_or_else(|| format!("packed value: item {i} truncated"))?;
        let end = (pos as u64)
            .checked_add(len)
            .filter(|&e| e <= b.len() as u64)
            .ok_or_else(|| format!("packed value: item {i} runs past the end"))? as usize;
        items.push(&b[pos..end]);
        pos = end;
    }
    if pos != b.len() {
        return Err(format!("packed value: {} bytes after the last item", b.len() - pos));
    }
    Ok(items)
}

/// The count of a packed blob without decoding its items.
pub fn count(b: &[u8]) -> Result<usize, String> {
    let mut pos = 0;
    get_varint(b, &mut pos)
        .map(|n| n as usize)
        .ok_or_else(|| "packed value: truncated count".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let long = vec![7u8; 300];
        let items: Vec<&[u8]> = vec![b"", b"a", &long, b"field"];
        let b = encode(items.iter().copied());
        assert_eq!(decode(&b).unwrap(), items);
        assert_eq!(count(&b).unwrap(), 4);
        for cut in 0..b.len() {
            assert!(decode(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut more = b.clone();
        more.push(0);
        assert!(decode(&more).is_err());
        assert!(decode(&[0xff; 12]).is_err());
        assert_eq!(decode(&encode(std::iter::empty())).unwrap().len(), 0);
    }
}
