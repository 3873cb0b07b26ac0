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

/// `a == b`, comparing short items (the usual field or member) with a few word loads
/// instead of a call to `memcmp`.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word8 =
        |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
    let word4 =
        |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4 bytes"));
    match n {
        // Two overlapping words cover every byte.
        8..=16 => word8(a, 0) == word8(b, 0) && word8(a, n - 8) == word8(b, n - 8),
        4..=7 => word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4),
        0..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        _ => a == b,
    }
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
        return Err(format!(
            "packed value: count {n} exceeds its {} bytes",
            b.len()
        ));
    }
    let mut items = Vec::with_capacity(n as usize);
    for i in 0..n {
        let len =
            get_varint(b, &mut pos).ok_or_else(|| format!("packed value: item {i} truncated"))?;
        let end = (pos as u64)
            .checked_add(len)
            .filter(|&e| e <= b.len() as u64)
            .ok_or_else(|| format!("packed value: item {i} runs past the end"))?
            as usize;
        items.push(&b[pos..end]);
        pos = end;
    }
    if pos != b.len() {
        return Err(format!(
            "packed value: {} bytes after the last item",
            b.len() - pos
        ));
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

/// A packed blob edited where it is (a command on a small collection): lookups scan it, a
/// change splices its bytes, with no allocation per item (Redis's listpack operations).
#[derive(Clone, Debug, Default)]
pub struct PackedBuf {
    buf: Vec<u8>,
    count: usize,
    /// Bytes of the count's varint at the start.
    head: usize,
    /// The bytes [start, end) that edits changed where they were, while the blob kept its
    /// length (see [`PackedBuf::in_place_change`]).
    changed: Option<(usize, usize)>,
    /// An edit changed the blob's length.
    resized: bool,
}

/// Where an item lies in a [`PackedBuf`]: its length varint starts at `start`, its bytes are
/// `data`.
#[derive(Clone, Debug)]
pub struct ItemAt {
    pub start: usize,
    pub data: std::ops::Range<usize>,
}

impl PackedBuf {
    /// An empty collection.
    pub fn new() -> PackedBuf {
        PackedBuf {
            buf: vec![0],
            count: 0,
            head: 1,
            changed: None,
            resized: false,
        }
    }

    /// Take a payload, checking its structure (one pass, no allocation).
    pub fn from_payload(buf: Vec<u8>) -> Result<PackedBuf, String> {
        Self::from_payload_find(buf, 1, None).map(|(p, _)| p)
    }

    /// Take a payload, checking its structure, and in the same pass look for `key` among
    /// the items at multiples of `stride` (what [`PackedBuf::find`] returns, without a
    /// second scan: a write to a small hash or set checks the blob and finds its field at
    /// once). With no `key`, finds nothing.
    pub fn from_payload_find(
        buf: Vec<u8>,
        stride: usize,
        key: Option<&[u8]>,
    ) -> Result<(PackedBuf, Option<(usize, ItemAt)>), String> {
        let mut pos = 0;
        let n = get_varint(&buf, &mut pos).ok_or("packed value: truncated count")?;
        let head = pos;
        let end = buf.len();
        let stride = stride.max(1) as u64;
        let mut found = None;
        // The index of the next item compared with `key` (u64::MAX: none).
        let mut probe = if key.is_some() { 0 } else { u64::MAX };
        for i in 0..n {
            let start = pos;
            // Most items are shorter than 128 bytes: a one-byte length.
            let len = match buf.get(pos) {
                Some(&b) if b < 0x80 => {
                    pos += 1;
                    b as usize
                }
                Some(_) => get_varint(&buf, &mut pos)
                    .filter(|&l| l <= end as u64)
                    .ok_or_else(|| format!("packed value: item {i} truncated"))?
                    as usize,
                None => return Err(format!("packed value: item {i} truncated")),
            };
            let data = pos..pos + len;
            pos += len;
            if pos > end {
                return Err(format!("packed value: item {i} runs past the end"));
            }
            if i == probe {
                if key.is_some_and(|k| same_bytes(&buf[data.clone()], k)) {
                    found = Some((i as usize, ItemAt { start, data }));
                    probe = u64::MAX;
                } else {
                    probe += stride;
                }
            }
        }
        if pos != end {
            return Err(format!(
                "packed value: {} bytes after the last item",
                end - pos
            ));
        }
        let p = PackedBuf {
            buf,
            count: n as usize,
            head,
            changed: None,
            resized: false,
        };
        Ok((p, found))
    }

    /// The blob's buffer, for reuse once the collection is stored.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Items in the blob.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The blob (the payload to store).
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The bytes of an item.
    pub fn get(&self, at: &ItemAt) -> &[u8] {
        &self.buf[at.data.clone()]
    }

    /// Every item with where it lies, in order.
    pub fn items(&self) -> impl Iterator<Item = ItemAt> + '_ {
        let mut pos = self.head;
        (0..self.count).map(move |_| {
            let start = pos;
            // Checked when the blob was taken or built.
            let len = get_varint(&self.buf, &mut pos).expect("checked blob") as usize;
            let data = pos..pos + len;
            pos += len;
            ItemAt { start, data }
        })
    }

    /// The first item at an index that is a multiple of `stride` equal to `key`, with its
    /// index (a hash's fields are every second item, a set's members every item).
    pub fn find(&self, stride: usize, key: &[u8]) -> Option<(usize, ItemAt)> {
        let stride = stride.max(1);
        let mut pos = self.head;
        // The index of the next item compared with `key`.
        let mut probe = 0;
        for i in 0..self.count {
            let start = pos;
            // Checked when the blob was taken or built.
            let len = match self.buf[pos] {
                b if b < 0x80 => {
                    pos += 1;
                    b as usize
                }
                _ => get_varint(&self.buf, &mut pos).expect("checked blob") as usize,
            };
            let data = pos..pos + len;
            pos += len;
            if i == probe {
                if same_bytes(&self.buf[data.clone()], key) {
                    return Some((i, ItemAt { start, data }));
                }
                probe += stride;
            }
        }
        None
    }

    /// The item after `at` (a hash field's value).
    pub fn next(&self, at: &ItemAt) -> ItemAt {
        let mut pos = at.data.end;
        let start = pos;
        let len = get_varint(&self.buf, &mut pos).expect("checked blob") as usize;
        ItemAt {
            start,
            data: pos..pos + len,
        }
    }

    /// What the edits since the blob was taken changed, when it kept its length: None when
    /// its length changed (it must be stored whole), `Some(None)` when no byte changed,
    /// `Some(Some(range))` when only the bytes of `range` did (a caller may write just those
    /// over the stored blob, which they were taken from).
    pub fn in_place_change(&self) -> Option<Option<std::ops::Range<usize>>> {
        if self.resized {
            return None;
        }
        Some(self.changed.map(|(a, b)| a..b))
    }

    fn set_count(&mut self, n: usize) {
        self.resized = true;
        let mut h = Vec::with_capacity(10);
        put_varint(&mut h, n as u64);
        self.buf.splice(0..self.head, h.iter().copied());
        self.head = h.len();
        self.count = n;
    }

    /// Append items at the end.
    pub fn push(&mut self, items: &[&[u8]]) {
        for it in items {
            put_varint(&mut self.buf, it.len() as u64);
            self.buf.extend_from_slice(it);
        }
        self.set_count(self.count + items.len());
    }

    /// Byte position just past the last item (where [`PackedBuf::insert_at`] appends).
    pub fn end(&self) -> usize {
        self.buf.len()
    }

    /// Insert items before the item whose length varint starts at byte `pos` (an
    /// [`ItemAt::start`], or [`PackedBuf::end`] to append): a sorted collection keeps its
    /// order.
    pub fn insert_at(&mut self, pos: usize, items: &[&[u8]]) {
        let mut enc = Vec::with_capacity(items.iter().map(|i| i.len() + 2).sum());
        for it in items {
            put_varint(&mut enc, it.len() as u64);
            enc.extend_from_slice(it);
        }
        self.buf.splice(pos..pos, enc);
        self.resized = true;
        self.set_count(self.count + items.len());
    }

    /// Replace the item at `at` by `new` (same place in the order).
    pub fn replace(&mut self, at: &ItemAt, new: &[u8]) {
        if new.len() == at.data.len() {
            // Same length, same length varint: only the item's bytes change, where they are.
            let old = &mut self.buf[at.data.clone()];
            if old != new {
                old.copy_from_slice(new);
                let (a, b) = (at.data.start, at.data.end);
                self.changed = Some(self.changed.map_or((a, b), |(s, e)| (s.min(a), e.max(b))));
            }
            return;
        }
        let mut enc = Vec::with_capacity(new.len() + 10);
        put_varint(&mut enc, new.len() as u64);
        enc.extend_from_slice(new);
        self.buf.splice(at.start..at.data.end, enc);
        self.resized = true;
    }

    /// Remove `n` consecutive items starting with the one at `at` (a hash removes a field and
    /// its value).
    pub fn remove(&mut self, at: &ItemAt, n: usize) {
        let mut end = at.clone();
        for _ in 1..n {
            end = self.next(&end);
        }
        self.buf.drain(at.start..end.data.end);
        self.set_count(self.count - n);
    }
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

    /// Edits in place give the same blob as encoding the edited list.
    #[test]
    fn packed_buf_edits_match_encode() {
        let mut model: Vec<Vec<u8>> = Vec::new();
        let mut p = PackedBuf::new();
        let mut x = 12345u64;
        for step in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let item = vec![b'a' + (x % 7) as u8; (x % 200) as usize];
            match x % 4 {
                0 | 1 => {
                    model.push(item.clone());
                    p.push(&[&item]);
                }
                2 if !model.is_empty() => {
                    let i = (x as usize / 4) % model.len();
                    let at = p.items().nth(i).unwrap();
                    p.replace(&at, &item);
                    model[i] = item;
                }
                _ if !model.is_empty() => {
                    let i = (x as usize / 4) % model.len();
                    let n = if i + 1 < model.len() { 2 } else { 1 };
                    let at = p.items().nth(i).unwrap();
                    p.remove(&at, n);
                    model.drain(i..i + n);
                }
                _ => {}
            }
            let want = encode(model.iter().map(|m| &m[..]).collect::<Vec<_>>().into_iter());
            assert_eq!(p.bytes(), &want[..], "step {step}");
            assert_eq!(p.count(), model.len());
            let again = PackedBuf::from_payload(p.bytes().to_vec()).unwrap();
            assert_eq!(again.count(), model.len());
        }
        // Inserting before an item, and at the end, gives the blob of the list with them.
        let mut p = PackedBuf::from_payload(encode([&b"a"[..], b"c"].into_iter())).unwrap();
        let c = p.items().nth(1).unwrap();
        p.insert_at(c.start, &[b"b", b"bb"]);
        let end = p.end();
        p.insert_at(end, &[b"d"]);
        assert_eq!(
            p.bytes(),
            &encode([&b"a"[..], b"b", b"bb", b"c", b"d"].into_iter())[..]
        );
        assert_eq!(p.count(), 5);
        let p = PackedBuf::from_payload(encode([&b"f"[..], b"v", b"g", b"w"].into_iter())).unwrap();
        let (i, at) = p.find(2, b"g").unwrap();
        assert_eq!((i, p.get(&p.next(&at))), (2, &b"w"[..]));
        assert!(p.find(2, b"v").is_none(), "values are not fields");
        assert!(PackedBuf::from_payload(vec![2, 1, b'a']).is_err());
    }

    /// Checking a blob and finding an item in the same pass finds what `find` finds after the
    /// check, for every stride, items of every short length (the word compares) and longer
    /// ones, present or not; a damaged blob is refused whatever the key.
    #[test]
    fn from_payload_find_matches_find() {
        let mut x = 0x5eed_u64;
        for round in 0..300 {
            let mut items: Vec<Vec<u8>> = Vec::new();
            for _ in 0..(round % 23) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let len = (x % 40) as usize;
                items.push(
                    (0..len)
                        .map(|k| b'a' + ((x >> (k % 50)) % 3) as u8)
                        .collect(),
                );
            }
            let blob = encode(items.iter().map(|i| &i[..]).collect::<Vec<_>>().into_iter());
            let mut keys: Vec<Vec<u8>> = items.clone();
            keys.push(b"absent-key".to_vec());
            keys.push(Vec::new());
            for k in &keys {
                // A near miss: the same length, one byte changed.
                let mut near = k.clone();
                if let Some(b) = near.last_mut() {
                    *b ^= 0x40;
                }
                for key in [k, &near] {
                    for stride in [1, 2] {
                        let plain = PackedBuf::from_payload(blob.clone()).unwrap();
                        let want = plain
                            .find(stride, key)
                            .map(|(i, at)| (i, at.start, at.data));
                        let (p, got) =
                            PackedBuf::from_payload_find(blob.clone(), stride, Some(key)).unwrap();
                        let got = got.map(|(i, at)| (i, at.start, at.data));
                        assert_eq!(got, want, "round {round} stride {stride} key {key:?}");
                        assert_eq!(p.bytes(), &blob[..]);
                        if let Some((i, _, data)) = want {
                            assert_eq!(&blob[data], &key[..]);
                            assert_eq!(i % stride, 0);
                            assert!(items[..i].iter().step_by(stride).all(|it| it != key));
                        } else {
                            assert!(items.iter().step_by(stride).all(|it| it != key));
                        }
                    }
                }
            }
            for cut in 0..blob.len() {
                assert!(PackedBuf::from_payload_find(blob[..cut].to_vec(), 2, Some(b"a")).is_err());
            }
        }
    }

    /// `in_place_change` names exactly the bytes that differ from the blob taken, as long as
    /// every edit kept the length; any other edit asks for the whole blob.
    #[test]
    fn in_place_change_covers_exactly_the_replaced_bytes() {
        let taken = encode([&b"f1"[..], b"aaaa", b"f2", b"bbbb", b"f3", b"cccc"].into_iter());
        let mut p = PackedBuf::from_payload(taken.clone()).unwrap();
        assert_eq!(p.in_place_change(), Some(None));
        let (_, f2) = p.find(2, b"f2").unwrap();
        let v2 = p.next(&f2);
        p.replace(&v2, b"bbbb");
        assert_eq!(p.in_place_change(), Some(None), "same bytes: no change");
        p.replace(&v2, b"xyzw");
        let (_, f3) = p.find(2, b"f3").unwrap();
        let v3 = p.next(&f3);
        p.replace(&v3, b"cccd");
        let r = p.in_place_change().unwrap().unwrap();
        let mut patched = taken.clone();
        patched[r.clone()].copy_from_slice(&p.bytes()[r.clone()]);
        assert_eq!(patched, p.bytes(), "the range carries every change");
        assert_eq!((r.start, r.end), (v2.data.start, v3.data.end));
        p.replace(&v3, b"longer");
        assert_eq!(p.in_place_change(), None);
        let mut q = PackedBuf::from_payload(taken).unwrap();
        q.push(&[b"f4", b"d"]);
        assert_eq!(q.in_place_change(), None);
    }
}
