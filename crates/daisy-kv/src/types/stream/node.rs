//! A stream node: the listpack Redis keeps under each key of a stream's radix tree (t_stream.c,
//! "Low level stream encoding"), byte for byte, so that nodes split where Redis's split, DUMP
//! writes them as they are, and RESTORE takes Redis's.
//!
//! ```text
//! master entry: count | deleted | num-fields | field_1 ... field_N | 0
//! entry:        flags | ms-diff | seq-diff | [num-fields | field_1 value_1 ...] | lp-count
//!               (with flag SAMEFIELDS: flags | ms-diff | seq-diff | value_1 ... | lp-count)
//! ```
//!
//! `count` and `deleted` count the node's live entries and those flagged DELETED (tombstones:
//! an entry is never removed from a node, only flagged; a node whose last live entry goes is
//! removed whole). An entry's ID is the node's master ID (its key in the tree, the ID of the
//! first entry written into it) plus the two differences, modulo 2^64. An entry with the
//! master entry's fields carries only its values. `lp-count` is the number of the entry's
//! elements before it, so the node can be walked backwards.
//!
//! Everything here works on a node's bytes in DRAM; `super` reads and writes them in the
//! pool.

use super::id::StreamId;
use crate::listpack::{self, Elem, EOF, HDR, NUMELE_UNKNOWN};

/// Entry flags.
pub const F_DELETED: i64 = 1;
pub const F_SAMEFIELDS: i64 = 2;

fn damaged(why: &str) -> String {
    format!("stream node: {why}")
}

/// The master entry of a node.
#[derive(Clone, Debug)]
pub struct Master {
    /// Live entries, and where that element starts.
    pub count: i64,
    pub count_pos: usize,
    /// Entries flagged DELETED, and where that element starts.
    pub deleted: i64,
    pub deleted_pos: usize,
    /// The master fields: where the first starts, how many.
    pub fields_pos: usize,
    pub nfields: usize,
    /// Where the first entry starts (just after the master entry's 0).
    pub first_entry: usize,
}

/// Where an entry lies in its node, and what its fixed part says.
#[derive(Clone, Copy, Debug)]
pub struct EntryAt {
    pub flags_pos: usize,
    pub flags: i64,
    pub id: StreamId,
    /// Field-value pairs.
    pub nfields: usize,
    /// Its fields are the master entry's (only values follow).
    pub same: bool,
    /// The first field (or value, when `same`).
    pub fields_pos: usize,
    /// Just after its lp-count.
    pub end: usize,
}

impl EntryAt {
    pub fn deleted(&self) -> bool {
        self.flags & F_DELETED != 0
    }
}

fn int_at(lp: &[u8], p: usize) -> Result<(i64, usize), String> {
    let (e, next) = listpack::elem(lp, p).ok_or_else(|| damaged("bad element"))?;
    let v = e
        .int()
        .ok_or_else(|| damaged("an integer element is not one"))?;
    Ok((v, next))
}

fn skip(lp: &[u8], p: usize) -> Result<usize, String> {
    listpack::elem(lp, p)
        .map(|(_, n)| n)
        .ok_or_else(|| damaged("bad element"))
}

/// The node's master entry (the header checked too).
pub fn master(lp: &[u8]) -> Result<Master, String> {
    if !listpack::header_ok(lp) {
        return Err(damaged("bad listpack header"));
    }
    master_at(lp)
}

/// The master entry read from `lp`, which may be only the node's first bytes (the header is
/// not checked; an element that does not end before `lp`'s last byte is an error).
pub fn master_at(lp: &[u8]) -> Result<Master, String> {
    let (count, p) = int_at(lp, HDR)?;
    let deleted_pos = p;
    let (deleted, p) = int_at(lp, p)?;
    let (nfields, mut p) = int_at(lp, p)?;
    if count < 0 || deleted < 0 || nfields < 0 {
        return Err(damaged("negative master entry counts"));
    }
    let fields_pos = p;
    for _ in 0..nfields {
        p = skip(lp, p)?;
    }
    let (zero, p) = int_at(lp, p)?;
    if zero != 0 {
        return Err(damaged("master entry not terminated by 0"));
    }
    Ok(Master {
        count,
        count_pos: HDR,
        deleted,
        deleted_pos,
        fields_pos,
        nfields: nfields as usize,
        first_entry: p,
    })
}

/// The entry starting at `p` (the node's master entry is `m`, its master ID `master_id`).
pub fn entry_at(lp: &[u8], m: &Master, master_id: StreamId, p: usize) -> Result<EntryAt, String> {
    let (flags, q) = int_at(lp, p)?;
    let (ms, q) = int_at(lp, q)?;
    let (seq, mut q) = int_at(lp, q)?;
    let same = flags & F_SAMEFIELDS != 0;
    let nfields = if same {
        m.nfields
    } else {
        let (n, next) = int_at(lp, q)?;
        if n < 0 {
            return Err(damaged("negative field count"));
        }
        q = next;
        n as usize
    };
    let fields_pos = q;
    let elems = if same { nfields } else { 2 * nfields };
    for _ in 0..elems {
        q = skip(lp, q)?;
    }
    let (lp_count, end) = int_at(lp, q)?;
    let want = 3 + nfields as i64 + if same { 0 } else { nfields as i64 + 1 };
    if lp_count != want {
        return Err(damaged("lp-count does not match the entry"));
    }
    Ok(EntryAt {
        flags_pos: p,
        flags,
        id: StreamId::new(
            master_id.ms.wrapping_add(ms as u64),
            master_id.seq.wrapping_add(seq as u64),
        ),
        nfields,
        same,
        fields_pos,
        end,
    })
}

/// The entry starting at `p`, read the fast way (`listpack::elem_len`: bounds checked,
/// backlens not), for nodes in the pool, which were validated when they came in; its lp-count
/// is still checked against its shape.
pub fn entry_fast(lp: &[u8], m: &Master, master_id: StreamId, p: usize) -> Result<EntryAt, String> {
    let bad = || damaged("bad entry");
    let (flags, q) = listpack::int_fast(lp, p).ok_or_else(bad)?;
    let (ms, q) = listpack::int_fast(lp, q).ok_or_else(bad)?;
    let (seq, mut q) = listpack::int_fast(lp, q).ok_or_else(bad)?;
    let same = flags & F_SAMEFIELDS != 0;
    let nfields = if same {
        m.nfields
    } else {
        let (n, next) = listpack::int_fast(lp, q).ok_or_else(bad)?;
        if n < 0 {
            return Err(damaged("negative field count"));
        }
        q = next;
        n as usize
    };
    let fields_pos = q;
    let elems = if same { nfields } else { 2 * nfields };
    for _ in 0..elems {
        q += listpack::elem_len(lp, q).ok_or_else(bad)?;
    }
    let (lp_count, end) = listpack::int_fast(lp, q).ok_or_else(bad)?;
    let want = 3 + nfields as i64 + if same { 0 } else { nfields as i64 + 1 };
    if lp_count != want {
        return Err(damaged("lp-count does not match the entry"));
    }
    Ok(EntryAt {
        flags_pos: p,
        flags,
        id: StreamId::new(
            master_id.ms.wrapping_add(ms as u64),
            master_id.seq.wrapping_add(seq as u64),
        ),
        nfields,
        same,
        fields_pos,
        end,
    })
}

/// Every entry of the node, tombstones included, in order, read the fast way (see
/// [`entry_fast`]).
pub fn entries_fast(lp: &[u8], m: &Master, master_id: StreamId) -> Result<Vec<EntryAt>, String> {
    let last = lp.len() - 1;
    let mut out = Vec::with_capacity((m.count + m.deleted).clamp(0, 1024) as usize);
    let mut p = m.first_entry;
    while p < last {
        let e = entry_fast(lp, m, master_id, p)?;
        p = e.end;
        out.push(e);
    }
    if p != last {
        return Err(damaged("entries run past the terminator"));
    }
    Ok(out)
}

/// Every entry of the node, tombstones included, in order, each element checked.
pub fn entries(lp: &[u8], m: &Master, master_id: StreamId) -> Result<Vec<EntryAt>, String> {
    let last = lp.len() - 1;
    let mut out = Vec::with_capacity((m.count + m.deleted).clamp(0, 1024) as usize);
    let mut p = m.first_entry;
    while p < last {
        let e = entry_at(lp, m, master_id, p)?;
        p = e.end;
        out.push(e);
    }
    if p != last {
        return Err(damaged("entries run past the terminator"));
    }
    Ok(out)
}

/// Call `f(field, value)` for each pair of an entry.
pub fn each_field<'a>(
    lp: &'a [u8],
    m: &Master,
    e: &EntryAt,
    mut f: impl FnMut(Elem<'a>, Elem<'a>),
) -> Result<(), String> {
    let mut mp = m.fields_pos;
    let mut p = e.fields_pos;
    for _ in 0..e.nfields {
        let field = if e.same {
            let (x, n) = listpack::elem(lp, mp).ok_or_else(|| damaged("bad field"))?;
            mp = n;
            x
        } else {
            let (x, n) = listpack::elem(lp, p).ok_or_else(|| damaged("bad field"))?;
            p = n;
            x
        };
        let (value, n) = listpack::elem(lp, p).ok_or_else(|| damaged("bad value"))?;
        p = n;
        f(field, value);
    }
    Ok(())
}

/// An entry's (field, value) pairs as strings.
/// An entry's fields and values, in order.
pub type Fields = Vec<(Vec<u8>, Vec<u8>)>;

pub fn fields_of(lp: &[u8], m: &Master, e: &EntryAt) -> Result<Fields, String> {
    let mut out = Vec::with_capacity(e.nfields);
    each_field(lp, m, e, |f, v| out.push((f.to_vec(), v.to_vec())))?;
    Ok(out)
}

/// Whether `fields` (field, value, field, value...) has exactly the master entry's fields in
/// order.
pub fn same_fields(lp: &[u8], m: &Master, fields: &[&[u8]]) -> bool {
    if fields.len() != 2 * m.nfields {
        return false;
    }
    let mut p = m.fields_pos;
    for pair in fields.chunks(2) {
        match listpack::elem(lp, p) {
            Some((e, n)) if e.eq_str(pair[0]) => p = n,
            _ => return false,
        }
    }
    true
}

/// The elements of a new entry (`fields` as field, value, ...), relative to `master_id`: its
/// bytes and its number of elements.
pub fn entry_bytes(
    master_id: StreamId,
    id: StreamId,
    fields: &[&[u8]],
    same: bool,
) -> (Vec<u8>, usize) {
    let nfields = fields.len() / 2;
    let mut out = Vec::with_capacity(16 + fields.iter().map(|f| f.len() + 2).sum::<usize>());
    let flags = if same { F_SAMEFIELDS } else { 0 };
    listpack::push_int(&mut out, flags);
    listpack::push_int(&mut out, id.ms.wrapping_sub(master_id.ms) as i64);
    listpack::push_int(&mut out, id.seq.wrapping_sub(master_id.seq) as i64);
    let mut elems = 4 + nfields;
    if !same {
        listpack::push_int(&mut out, nfields as i64);
        elems += nfields + 1;
    }
    for pair in fields.chunks(2) {
        if !same {
            listpack::push_str(&mut out, pair[0]);
        }
        listpack::push_str(&mut out, pair[1]);
    }
    // lp-count: the entry's elements before it.
    listpack::push_int(&mut out, (elems - 1) as i64);
    (out, elems)
}

/// A new node holding one entry, `id` with `fields`: its master entry takes the entry's
/// fields, and the entry has the SAMEFIELDS flag (streamAppendItem's new node).
pub fn new_node(id: StreamId, fields: &[&[u8]]) -> Vec<u8> {
    let nfields = fields.len() / 2;
    let mut body = Vec::new();
    listpack::push_int(&mut body, 1);
    listpack::push_int(&mut body, 0);
    listpack::push_int(&mut body, nfields as i64);
    for pair in fields.chunks(2) {
        listpack::push_str(&mut body, pair[0]);
    }
    listpack::push_int(&mut body, 0);
    let (entry, elems) = entry_bytes(id, id, fields, true);
    body.extend_from_slice(&entry);
    listpack::finish(&body, 4 + nfields + elems)
}

/// Integer `v` as a whole element into `out` (at most 10 bytes); its length.
pub fn int_elem(out: &mut [u8; 16], v: i64) -> usize {
    if (0..=127).contains(&v) {
        // The common case (a node's count): the 7-bit form and its one-byte backlen.
        out[0] = v as u8;
        out[1] = 1;
        return 2;
    }
    let mut tmp = Vec::with_capacity(10);
    listpack::push_int(&mut tmp, v);
    out[..tmp.len()].copy_from_slice(&tmp);
    tmp.len()
}

/// The header's element count after adding `n` elements (lpInsert's numele: it sticks at
/// "unknown").
pub fn numele_after(lp: &[u8], n: usize) -> u16 {
    match listpack::num_elements(lp).unwrap_or(NUMELE_UNKNOWN) {
        NUMELE_UNKNOWN => NUMELE_UNKNOWN,
        v => (usize::from(v) + n).min(usize::from(NUMELE_UNKNOWN)) as u16,
    }
}

/// Append an entry's elements (`bytes`, `elems` of them) at the end of `lp`.
pub fn append(lp: &mut Vec<u8>, bytes: &[u8], elems: usize) {
    let numele = numele_after(lp, elems);
    debug_assert_eq!(lp.last(), Some(&EOF));
    lp.pop();
    lp.extend_from_slice(bytes);
    lp.push(EOF);
    let total = lp.len() as u32;
    lp[..4].copy_from_slice(&total.to_le_bytes());
    lp[4..6].copy_from_slice(&numele.to_le_bytes());
}

/// Replace the integer element at `p` with `v` (lpReplaceInteger): the bytes after it move
/// when its size changes. Returns the change in bytes.
pub fn replace_int(lp: &mut Vec<u8>, p: usize, v: i64) -> isize {
    let old_end = listpack::elem(lp, p).map_or(p, |(_, n)| n);
    let mut new = Vec::with_capacity(10);
    listpack::push_int(&mut new, v);
    let delta = new.len() as isize - (old_end - p) as isize;
    lp.splice(p..old_end, new);
    let total = lp.len() as u32;
    lp[..4].copy_from_slice(&total.to_le_bytes());
    delta
}

/// What `validate` learned about a sound node.
#[derive(Clone, Debug)]
pub struct Summary {
    pub live: u64,
    pub deleted: u64,
    /// The first and last entries' IDs, tombstones included.
    pub first: StreamId,
    pub last: StreamId,
    /// The first and last live entries' IDs.
    pub first_live: Option<StreamId>,
    pub last_live: Option<StreamId>,
}

/// Check a node as Redis's `streamValidateListpackIntegrity` (deep) does, and what Daisy relies
/// on beyond it: flags are only DELETED and SAMEFIELDS, the master counts match the entries'
/// flags, IDs strictly ascend and the first is the master ID, and the node holds an entry.
pub fn validate(lp: &[u8], master_id: StreamId) -> Result<Summary, String> {
    let elems = listpack::elements(lp).ok_or_else(|| damaged("not a valid listpack"))?;
    if elems.is_empty() {
        return Err(damaged("empty listpack"));
    }
    let m = master(lp)?;
    let all = entries(lp, &m, master_id)?;
    if all.is_empty() {
        return Err(damaged("no entry"));
    }
    let mut s = Summary {
        live: 0,
        deleted: 0,
        first: all[0].id,
        last: all[all.len() - 1].id,
        first_live: None,
        last_live: None,
    };
    if s.first != master_id {
        return Err(damaged("the first entry's ID is not the master ID"));
    }
    for (i, e) in all.iter().enumerate() {
        if e.flags & !(F_DELETED | F_SAMEFIELDS) != 0 {
            return Err(damaged("unknown entry flags"));
        }
        if i > 0 && e.id <= all[i - 1].id {
            return Err(damaged("entry IDs do not ascend"));
        }
        if e.deleted() {
            s.deleted += 1;
        } else {
            s.live += 1;
            s.first_live.get_or_insert(e.id);
            s.last_live = Some(e.id);
        }
    }
    if s.live != m.count as u64 || s.deleted != m.deleted as u64 {
        return Err(damaged(&format!(
            "master entry counts {} live and {} deleted, the entries say {} and {}",
            m.count, m.deleted, s.live, s.deleted
        )));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f<'a>(v: &'a [&'a str]) -> Vec<&'a [u8]> {
        v.iter().map(|s| s.as_bytes()).collect()
    }

    #[test]
    fn a_node_grows_and_reads_back() {
        let m0 = StreamId::new(100, 5);
        let mut lp = new_node(m0, &f(&["a", "1", "b", "xyz"]));
        let m = master(&lp).unwrap();
        assert_eq!((m.count, m.deleted, m.nfields), (1, 0, 2));
        assert!(same_fields(&lp, &m, &f(&["a", "9", "b", "9"])));
        assert!(!same_fields(&lp, &m, &f(&["a", "9"])));
        // Same fields, then other fields, then an ID with a smaller sequence (negative diff).
        let ids = [StreamId::new(100, 6), StreamId::new(101, 0)];
        let (e, n) = entry_bytes(m0, ids[0], &f(&["a", "2", "b", "-7"]), true);
        append(&mut lp, &e, n);
        let (e, n) = entry_bytes(m0, ids[1], &f(&["c", "long value"]), false);
        append(&mut lp, &e, n);
        replace_int(&mut lp, HDR, 3);
        let s = validate(&lp, m0).unwrap();
        assert_eq!((s.live, s.first, s.last), (3, m0, ids[1]));
        let m = master(&lp).unwrap();
        let all = entries(&lp, &m, m0).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(fields_of(&lp, &m, &all[1]).unwrap()[1].1, b"-7".to_vec());
        assert_eq!(
            fields_of(&lp, &m, &all[2]).unwrap(),
            vec![(b"c".to_vec(), b"long value".to_vec())]
        );
        // The element count stays what lpAppend keeps.
        assert_eq!(
            listpack::num_elements(&lp).unwrap() as usize,
            listpack::elements(&lp).unwrap().len()
        );
        // Flag one deleted: the counts must follow, or validation fails.
        let p = all[1].flags_pos;
        replace_int(&mut lp, p, F_DELETED | F_SAMEFIELDS);
        assert!(validate(&lp, m0).is_err());
        let m = master(&lp).unwrap();
        replace_int(&mut lp, m.count_pos, 2);
        let m = master(&lp).unwrap();
        replace_int(&mut lp, m.deleted_pos, 1);
        let s = validate(&lp, m0).unwrap();
        assert_eq!((s.live, s.deleted), (2, 1));
        // The fast walk sees the same entries.
        let m = master(&lp).unwrap();
        let strict: Vec<(StreamId, i64, usize)> = entries(&lp, &m, m0)
            .unwrap()
            .iter()
            .map(|e| (e.id, e.flags, e.end))
            .collect();
        let fast: Vec<(StreamId, i64, usize)> = entries_fast(&lp, &m, m0)
            .unwrap()
            .iter()
            .map(|e| (e.id, e.flags, e.end))
            .collect();
        assert_eq!(fast, strict);
        // A count that needs two bytes moves everything after it.
        let before = lp.len();
        assert_eq!(replace_int(&mut lp, HDR, 200), 1);
        assert_eq!(lp.len(), before + 1);
        assert_eq!(master(&lp).unwrap().count, 200);
    }
}
