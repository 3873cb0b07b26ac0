//! [`PSeq`]: a persistent sequence (deque) of byte strings, as Redis's quicklist: a doubly
//! linked list of *chunks*, each chunk one allocated object holding many items packed back to
//! back in a window `[start, end)` of its data area, so that a push at either end logs the item
//! and one header word.
//!
//! # Format (sequence format version [`SEQ_FORMAT`]; docs/FORMAT.md section 8d)
//!
//! ```text
//! header (64-byte object, one cache line)
//!   0  u64 magic "DAISYSEQ"
//!   8  u32 format (1)            immutable
//!  12  u32 chunk_bytes           immutable: bytes of every chunk object (a size class,
//!                                128 ..= 32768)
//!  16  u32 crc                   crc32c of bytes 0..16
//!  20  u32 flags                 bit 0 FREEING: `free_step` started (the live chain is empty)
//!  24  u64 len                   items in the live chain
//!  32  u64 head                  first chunk (0: no chunk)
//!  40  u64 tail                  last chunk (0 exactly when head is 0)
//!  48  u64 chunks                chunks in the live chain
//!  56  u64 garbage               first chunk of the detached chain still to be freed (0: none)
//! chunk (chunk_bytes-byte object)
//!   0  u64 prev                  previous chunk (0 for the head)
//!   8  u64 next                  next chunk (0 for the tail); in the garbage chain: next to free
//!  16  u16 start, u16 end        the window [start, end): offsets from the chunk's start,
//!                                24 <= start <= end <= chunk_bytes
//!  20  u16 count, u16 tag        items in the window; tag 0x5153
//!  24  data area                 bytes outside the window are unspecified
//! item (back to back in the window)
//!   LEB128(v) payload reverse(LEB128(v))      v = len << 1 | big
//!   inline (big = 0): payload = the item's `len` bytes; len <= (chunk_bytes - 24) / 4
//!   out of line (big = 1): payload = u64 offset of an object holding the `len` bytes,
//!                          len > (chunk_bytes - 24) / 4
//! ```
//!
//! The trailing reversed length lets items be read from either end of a window (pops at the
//! back, reverse iteration), as Redis's listpack back-length.
//!
//! # Invariants (verified by [`PSeq::check`]; `daisy pool check` runs it on every sequence)
//!
//! 1. following `next` from `head` visits exactly `chunks` distinct chunks and ends at `tail`;
//!    each chunk's `prev` names the one before it (0 for the head); no chunk appears twice;
//! 2. every chunk is an allocated object of at least `chunk_bytes` bytes whose tag and window
//!    are valid; its window parses exactly into `count` items (lengths canonical, trailers equal
//!    to headers, inline items within the inline limit, out-of-line ones beyond it, each naming
//!    an allocated object that holds its bytes, no object named twice);
//! 3. only a sole chunk may be empty (an emptied sequence keeps its last chunk, so that a queue
//!    that drains and refills does not allocate and free a chunk per item); the counts sum to
//!    `len`;
//! 4. the garbage chain (linked by `next`) holds chunks detached by `trim`, `clear` or
//!    `free_step`, distinct from the live ones, each valid as in 2 (their `prev` is unused);
//! 5. FREEING set implies an empty live chain.
//!
//! # Crash reasoning
//!
//! Every operation is one transaction (the handle's own, or the caller's for `_tx` methods and
//! views), so after a crash it is wholly present or wholly absent:
//! * a push writes the encoded item past `end` (or before `start`) and the window word, and
//!   the header's `len`, all through the redo log (the bytes outside a window belong to no
//!   item, but an older record may still be replayed over them, so they are logged too);
//!   about 64 + item bytes of record;
//! * a full end chunk gets a new chunk: allocated by the transaction, so written in place and
//!   made durable no later than the record (tx/alloc.rs, FORMAT.md section 4); only the old
//!   end chunk's link word and the header's `head`/`tail`/`chunks` words are logged. (The
//!   canary `SeqLinkOutsideTx` stores that link word durably at once instead: a crash before
//!   the commit leaves the old tail naming a block that was never allocated);
//! * a pop logs the window word and `len`; an emptied chunk is unlinked (its neighbour's link
//!   and the header, logged) and freed in the same transaction;
//! * a middle edit (set, insert, remove) rewrites the smaller side of the window through the
//!   log (at most [`EDIT_LOG_MAX`] bytes), or moves the window's contents into a fresh chunk
//!   that replaces it; a full chunk splits: it keeps one part of its window (only its window
//!   word changes) and a fresh chunk takes the other;
//! * `trim` and `clear` unlink whole chunks by cutting two links and hanging the cut chain on
//!   the header's `garbage` in the same transaction (a few words of record whatever their
//!   number); garbage is then freed a bounded number of chunks per transaction
//!   ([`PSeq::collect_garbage_tx`]), each step freeing a chunk's out-of-line items and the
//!   chunk and advancing `garbage` (or, stopped inside a chunk, its window start) in one
//!   transaction, so a crash between steps leaves every object owned exactly once;
//! * `free_step` first detaches the live chain into the garbage and sets FREEING in one
//!   transaction, then frees garbage, then the header.
//!
//! Record sizes: single pushes, pops and gets log tens of bytes plus the item; middle edits at
//! most [`EDIT_LOG_MAX`] bytes plus a few words (a fresh chunk's contents are logged only when
//! the record has room, else flushed before it); trim and clear a few words plus the out-of-line
//! items freed from the two boundary chunks. `remove_value` logs up to a window rewrite per
//! chunk it changes (about `chunk_bytes / 2`, or ~100 bytes when it moves the chunk into a
//! fresh one): removals spread over many chunks make a large record, which continues in an
//! overflow extent when it outgrows its log slot (docs/FORMAT.md section 2.3), or fails with
//! `TxTooLargeForPool`, changing nothing, when the pool has no room for it.

use super::table::{MapCheck, Src};
use crate::error::{Error, Result};
use crate::layout::SIZE_CLASSES;
use crate::pool::Pool;
use crate::ptr::PPtr;
use crate::shared::PoolInner;
use crate::tx::Tx;
use bytemuck::{Pod, Zeroable};
use std::collections::HashSet;

/// Magic of a sequence header.
pub const SEQ_MAGIC: u64 = u64::from_le_bytes(*b"DAISYSEQ");
/// Sequence format version this build writes and reads.
pub const SEQ_FORMAT: u32 = 1;
/// Bytes of a sequence header object.
pub const SEQ_HEADER_BYTES: u64 = 64;
/// Bytes of a chunk's header (links and window word); items start after it.
pub const CHUNK_HEADER: u32 = 24;
/// Chunk size of [`PSeq::create_in`] (chosen by `daisy bench seq --chunk-bytes`: see
/// docs/FORMAT.md section 8d).
pub const DEFAULT_CHUNK_BYTES: u32 = 4096;
/// Smallest chunk size (tests use small chunks to cross chunk boundaries often).
pub const MIN_CHUNK_BYTES: u32 = 128;
/// Largest chunk size (window offsets are 16-bit).
pub const MAX_CHUNK_BYTES: u32 = 32768;
/// Largest item, in bytes.
pub const MAX_ITEM_LEN: usize = u32::MAX as usize;
/// Largest number of bytes a middle edit rewrites through the log; larger rewrites move the
/// window into a fresh chunk instead.
pub const EDIT_LOG_MAX: usize = 2048;

const CHUNK_TAG: u16 = 0x5153;
const FLAG_FREEING: u32 = 1;
/// A window this small is moved whole (logged) to make room at the end a push needs, instead
/// of allocating a chunk next to a mostly empty one.
const SHIFT_MAX: u32 = 512;
/// Whole chunks a trim frees at once (more are detached into the garbage chain).
const TRIM_DIRECT: usize = 4;
/// Redo record kept free while freeing garbage (a free, a window word, the header word).
const GARBAGE_RESERVE: usize = 256;

const WHAT: &str = "sequence";

/// The 64-byte header.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq)]
struct SeqHeader {
    magic: u64,
    format: u32,
    chunk_bytes: u32,
    crc: u32,
    flags: u32,
    len: u64,
    head: u64,
    tail: u64,
    chunks: u64,
    garbage: u64,
}

const _: () = assert!(std::mem::size_of::<SeqHeader>() == SEQ_HEADER_BYTES as usize);

impl SeqHeader {
    fn immutable_crc(&self) -> u32 {
        crate::checksum::crc32c_append(0, &bytemuck::bytes_of(self)[..16])
    }
    fn words(&self) -> [u64; 8] {
        bytemuck::cast(*self)
    }
}

/// Is `cb` an allowed chunk size (a size class within the limits)?
fn chunk_bytes_valid(cb: u32) -> bool {
    (MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&cb) && SIZE_CLASSES.contains(&cb)
}

// ---- item encoding ----

#[inline(always)]
fn leb_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn leb_bytes(mut v: u64) -> ([u8; 10], usize) {
    let mut b = [0u8; 10];
    let mut n = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            b[n] = byte;
            return (b, n + 1);
        }
        b[n] = byte | 0x80;
        n += 1;
    }
}

/// Decode a canonical LEB128 from `b` forward: (value, bytes).
fn get_leb(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        let part = (byte & 0x7f) as u64;
        if i == 9 && part > 1 {
            return None;
        }
        v |= part << (7 * i);
        if byte & 0x80 == 0 {
            // Canonical: no superfluous zero groups.
            return (leb_len(v) == i + 1).then_some((v, i + 1));
        }
    }
    None
}

/// Decode a reversed LEB128 ending at `b.len()`, reading backward.
fn get_leb_rev(b: &[u8]) -> Option<(u64, usize)> {
    let mut tmp = [0u8; 10];
    let n = b.len().min(10);
    for i in 0..n {
        tmp[i] = b[b.len() - 1 - i];
    }
    get_leb(&tmp[..n])
}

/// Payload length of an item whose header value is `v`.
#[inline(always)]
fn payload_len(v: u64) -> u64 {
    if v & 1 == 1 {
        8
    } else {
        v >> 1
    }
}

/// One parsed item: where it starts in its buffer, its header value and header length.
#[derive(Clone, Copy, Debug)]
struct Elem {
    at: usize,
    hlen: usize,
    v: u64,
}

impl Elem {
    #[inline(always)]
    fn plen(&self) -> usize {
        payload_len(self.v) as usize
    }
    #[inline(always)]
    fn total(&self) -> usize {
        2 * self.hlen + self.plen()
    }
    #[inline(always)]
    fn end(&self) -> usize {
        self.at + self.total()
    }
    #[inline(always)]
    fn big(&self) -> bool {
        self.v & 1 == 1
    }
    /// The item's length in bytes.
    #[inline(always)]
    fn len(&self) -> u64 {
        self.v >> 1
    }
    #[inline(always)]
    fn payload<'w>(&self, w: &'w [u8]) -> &'w [u8] {
        &w[self.at + self.hlen..self.at + self.hlen + self.plen()]
    }
    /// The out-of-line object (big items only).
    fn obj(&self, w: &[u8]) -> u64 {
        u64::from_le_bytes(self.payload(w).try_into().unwrap())
    }
}

/// The item starting at `at` in `w`, if it is well formed and ends inside `w`.
fn parse_fwd(w: &[u8], at: usize) -> Option<Elem> {
    let (v, h) = get_leb(w.get(at..)?)?;
    let plen = payload_len(v);
    let total = (2 * h as u64).checked_add(plen)?;
    if total > (w.len() - at) as u64 {
        return None;
    }
    let end = at + total as usize;
    let (v2, h2) = get_leb_rev(&w[end - h..end])?;
    (v2 == v && h2 == h).then_some(Elem { at, hlen: h, v })
}

/// The item ending at `end` in `w`.
fn parse_back(w: &[u8], end: usize) -> Option<Elem> {
    let (v, h) = get_leb_rev(&w[end.saturating_sub(10)..end])?;
    let total = (2 * h as u64).checked_add(payload_len(v))?;
    if total > end as u64 {
        return None;
    }
    let e = parse_fwd(&w[..end], end - total as usize)?;
    (e.v == v).then_some(e)
}

/// Every item of a window, in order; None when it does not parse exactly.
fn parse_all(w: &[u8]) -> Option<Vec<Elem>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < w.len() {
        let e = parse_fwd(w, at)?;
        at = e.end();
        out.push(e);
    }
    Some(out)
}

/// Append the encoding of an item with header value `v` and payload `p`.
fn encode_into(out: &mut Vec<u8>, v: u64, p: &[u8]) {
    let (b, n) = leb_bytes(v);
    out.extend_from_slice(&b[..n]);
    out.extend_from_slice(p);
    out.extend(b[..n].iter().rev());
}

// ---- chunks ----

#[derive(Clone, Copy, Debug)]
struct Chunk {
    off: u64,
    prev: u64,
    next: u64,
    start: u32,
    end: u32,
    count: u32,
}

impl Chunk {
    fn used(&self) -> u32 {
        self.end - self.start
    }
}

#[inline(always)]
fn win_word(start: u32, end: u32, count: u32) -> u64 {
    start as u64 | (end as u64) << 16 | (count as u64) << 32 | (CHUNK_TAG as u64) << 48
}

/// Where a fresh chunk puts its window: room at the front (a new head), at the back (a new
/// tail), or on both sides.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Front,
    Back,
    Middle,
}

fn place_start(cb: u32, used: u32, p: Place) -> u32 {
    match p {
        Place::Back => CHUNK_HEADER,
        Place::Front => cb - used,
        Place::Middle => CHUNK_HEADER + (cb - CHUNK_HEADER - used) / 2,
    }
}

/// A sequence's identity and geometry: what every operation needs.
#[derive(Clone, Copy, Debug)]
struct Core {
    hdr: u64,
    cb: u32,
}

fn inner_of<'a>(src: &'a Src) -> &'a PoolInner {
    match src {
        Src::Pool(p) => p,
        Src::Tx(tx) => tx.pool_inner(),
    }
}

impl Core {
    fn cap(&self) -> u32 {
        self.cb - CHUNK_HEADER
    }
    fn inline_max(&self) -> u64 {
        (self.cap() / 4) as u64
    }

    fn corrupt(&self, src: &Src, why: impl std::fmt::Display) -> Error {
        Error::corrupt(
            &inner_of(src).path,
            format!("sequence at {:#x}: {why}", self.hdr),
        )
    }

    fn header(&self, src: &Src) -> Result<SeqHeader> {
        let h: SeqHeader = src.read_pod(self.hdr)?;
        if (h.head == 0) != (h.tail == 0) {
            return Err(self.corrupt(src, "head and tail disagree"));
        }
        Ok(h)
    }

    fn write_header(&self, tx: &mut Tx, old: &SeqHeader, new: &SeqHeader) -> Result<()> {
        let (o, n) = (old.words(), new.words());
        for i in 2..8 {
            if o[i] != n[i] {
                tx.write_bytes(self.hdr + 8 * i as u64, &n[i].to_le_bytes())?;
            }
        }
        Ok(())
    }

    fn chunk(&self, src: &Src, off: u64) -> Result<Chunk> {
        let inner = inner_of(src);
        if off == 0
            || !off.is_multiple_of(16)
            || off < inner.hdr.heap_off
            || off
                .checked_add(self.cb as u64)
                .is_none_or(|e| e > inner.heap_end())
        {
            return Err(self.corrupt(src, format!("chunk pointer {off:#x} is not in the heap")));
        }
        let raw: [u64; 3] = src.read_pod(off)?;
        let w = raw[2];
        let (start, end, count, tag) = (
            (w & 0xffff) as u32,
            (w >> 16 & 0xffff) as u32,
            (w >> 32 & 0xffff) as u32,
            (w >> 48) as u16,
        );
        if tag != CHUNK_TAG
            || start < CHUNK_HEADER
            || start > end
            || end > self.cb
            || (count == 0) != (start == end)
            || count * 2 > end - start
        {
            return Err(self.corrupt(
                src,
                format!("chunk {off:#x} has an invalid header word {w:#x}"),
            ));
        }
        Ok(Chunk {
            off,
            prev: raw[0],
            next: raw[1],
            start,
            end,
            count,
        })
    }

    fn window(&self, src: &Src, c: &Chunk) -> Result<Vec<u8>> {
        let mut w = vec![0u8; c.used() as usize];
        src.read(c.off + c.start as u64, &mut w)?;
        Ok(w)
    }

    /// The window's items; their number must be the chunk's count.
    fn elems(&self, src: &Src, c: &Chunk, w: &[u8]) -> Result<Vec<Elem>> {
        match parse_all(w) {
            Some(e) if e.len() == c.count as usize => Ok(e),
            _ => Err(self.corrupt(src, format!("chunk {:#x}: items do not parse", c.off))),
        }
    }

    /// The item's value (reading an out-of-line item's object).
    fn value(&self, src: &Src, w: &[u8], e: &Elem) -> Result<Vec<u8>> {
        if !e.big() {
            return Ok(e.payload(w).to_vec());
        }
        let (obj, len) = (e.obj(w), e.len());
        let inner = inner_of(src);
        if obj < inner.hdr.heap_off
            || obj
                .checked_add(len)
                .is_none_or(|end| end > inner.heap_end())
        {
            return Err(self.corrupt(src, format!("item object {obj:#x}+{len} outside the heap")));
        }
        let mut v = vec![0u8; len as usize];
        src.read(obj, &mut v)?;
        Ok(v)
    }

    /// Does the item equal `value`?
    fn item_eq(&self, src: &Src, w: &[u8], e: &Elem, value: &[u8]) -> Result<bool> {
        if e.len() != value.len() as u64 {
            return Ok(false);
        }
        if !e.big() {
            return Ok(e.payload(w) == value);
        }
        let obj = e.obj(w);
        let mut buf = [0u8; 4096];
        let mut done = 0;
        while done < value.len() {
            let n = (value.len() - done).min(buf.len());
            src.read(obj + done as u64, &mut buf[..n])?;
            if buf[..n] != value[done..done + n] {
                return Ok(false);
            }
            done += n;
        }
        Ok(true)
    }

    /// Encode `item` (allocating its object when it goes out of line) into `out`.
    fn encode(&self, tx: &mut Tx, item: &[u8], out: &mut Vec<u8>) -> Result<()> {
        if item.len() > MAX_ITEM_LEN {
            return Err(Error::Unsupported(format!(
                "item of {} bytes is larger than a sequence's limit of {MAX_ITEM_LEN} bytes",
                item.len()
            )));
        }
        let len = item.len() as u64;
        if len <= self.inline_max() {
            encode_into(out, len << 1, item);
        } else {
            let obj = tx.alloc_bytes(item)?.offset();
            encode_into(out, len << 1 | 1, &obj.to_le_bytes());
        }
        Ok(())
    }

    /// Free the out-of-line objects of `elems` (items being removed).
    fn free_big(&self, tx: &mut Tx, w: &[u8], elems: &[Elem]) -> Result<()> {
        for e in elems.iter().filter(|e| e.big()) {
            tx.free(PPtr::<u8>::from_offset(e.obj(w)))?;
        }
        Ok(())
    }

    fn set_window(&self, tx: &mut Tx, c: u64, start: u32, end: u32, count: u32) -> Result<()> {
        tx.write_bytes(c + 16, &win_word(start, end, count).to_le_bytes())
    }

    fn set_link(&self, tx: &mut Tx, at: u64, to: u64) -> Result<()> {
        tx.write_bytes(at, &to.to_le_bytes())
    }

    /// A fresh chunk holding `content` (whole items, `count` of them) placed by `place`.
    fn fresh_chunk(
        &self,
        tx: &mut Tx,
        prev: u64,
        next: u64,
        content: &[u8],
        count: u32,
        place: Place,
    ) -> Result<u64> {
        debug_assert!(content.len() <= self.cap() as usize && count > 0);
        let off = tx.alloc_uninit(self.cb as u64)?;
        let start = place_start(self.cb, content.len() as u32, place);
        let end = start + content.len() as u32;
        let mut head = [0u8; 24];
        head[..8].copy_from_slice(&prev.to_le_bytes());
        head[8..16].copy_from_slice(&next.to_le_bytes());
        head[16..].copy_from_slice(&win_word(start, end, count).to_le_bytes());
        if start == CHUNK_HEADER {
            let mut img = Vec::with_capacity(24 + content.len());
            img.extend_from_slice(&head);
            img.extend_from_slice(content);
            tx.write_bytes(off, &img)?;
        } else {
            tx.write_bytes(off, &head)?;
            tx.write_bytes(off + start as u64, content)?;
        }
        Ok(off)
    }

    /// Unlink chunk `c` from the live chain and free it (its items are gone already).
    fn unlink_free(&self, tx: &mut Tx, h: &mut SeqHeader, c: &Chunk) -> Result<()> {
        if c.prev != 0 {
            self.set_link(tx, c.prev + 8, c.next)?;
        } else {
            h.head = c.next;
        }
        if c.next != 0 {
            self.set_link(tx, c.next, c.prev)?;
        } else {
            h.tail = c.prev;
        }
        h.chunks -= 1;
        tx.free(PPtr::<u8>::from_offset(c.off))
    }

    /// Chunk `c` lost all its items: unlink and free it, or keep it empty when it is the sole
    /// chunk (invariant 3).
    fn emptied(&self, tx: &mut Tx, h: &mut SeqHeader, c: &Chunk) -> Result<()> {
        if c.prev == 0 && c.next == 0 {
            self.set_window(tx, c.off, CHUNK_HEADER, CHUNK_HEADER, 0)
        } else {
            self.unlink_free(tx, h, c)
        }
    }

    /// Replace chunk `c` in the live chain by fresh chunk `f` (already linked to c's
    /// neighbours) and free `c`.
    fn replace(&self, tx: &mut Tx, h: &mut SeqHeader, c: &Chunk, f: u64) -> Result<()> {
        if c.prev != 0 {
            self.set_link(tx, c.prev + 8, f)?;
        } else {
            h.head = f;
        }
        if c.next != 0 {
            self.set_link(tx, c.next, f)?;
        } else {
            h.tail = f;
        }
        tx.free(PPtr::<u8>::from_offset(c.off))
    }

    /// Placement for a chunk taking `c`'s place in the chain.
    fn place_of(c: &Chunk) -> Place {
        match (c.prev == 0, c.next == 0) {
            (true, false) => Place::Front,
            (false, true) => Place::Back,
            _ => Place::Middle,
        }
    }

    // ---- reading ----

    /// The chunk holding item `idx` (< len) and the item's number in it, walking from the
    /// nearer end.
    fn locate(&self, src: &Src, h: &SeqHeader, idx: u64) -> Result<(Chunk, u32)> {
        let mut steps = 0u64;
        if idx < h.len / 2 {
            let (mut c, mut acc) = (h.head, 0u64);
            loop {
                if c == 0 || steps > h.chunks {
                    return Err(self.corrupt(src, "chain shorter than its length"));
                }
                let ch = self.chunk(src, c)?;
                if idx < acc + ch.count as u64 {
                    return Ok((ch, (idx - acc) as u32));
                }
                acc += ch.count as u64;
                c = ch.next;
                steps += 1;
            }
        } else {
            let (mut c, mut acc) = (h.tail, h.len);
            loop {
                if c == 0 || steps > h.chunks {
                    return Err(self.corrupt(src, "chain shorter than its length"));
                }
                let ch = self.chunk(src, c)?;
                acc = acc
                    .checked_sub(ch.count as u64)
                    .ok_or_else(|| self.corrupt(src, "chunk counts exceed the length"))?;
                if idx >= acc {
                    return Ok((ch, (idx - acc) as u32));
                }
                c = ch.prev;
                steps += 1;
            }
        }
    }

    fn get(&self, src: &Src, index: i64) -> Result<Option<Vec<u8>>> {
        let h = self.header(src)?;
        let Some(i) = norm_index(index, h.len) else {
            return Ok(None);
        };
        let (c, k) = self.locate(src, &h, i)?;
        let w = self.window(src, &c)?;
        let e = self.elems(src, &c, &w)?[k as usize];
        Ok(Some(self.value(src, &w, &e)?))
    }

    /// Visit items from index `from` (forward or backward) until `f` returns false.
    fn visit(
        &self,
        src: &Src,
        from: u64,
        rev: bool,
        mut f: impl FnMut(u64, &[u8], &Elem) -> Result<bool>,
    ) -> Result<()> {
        let h = self.header(src)?;
        if from >= h.len {
            return Ok(());
        }
        let (mut c, k) = self.locate(src, &h, from)?;
        let mut idx = from;
        let mut first = Some(k as usize);
        let mut steps = 0u64;
        loop {
            let w = self.window(src, &c)?;
            let elems = self.elems(src, &c, &w)?;
            if rev {
                let top = first.take().map_or(elems.len(), |k| k + 1);
                for e in elems[..top].iter().rev() {
                    if !f(idx, &w, e)? || idx == 0 {
                        return Ok(());
                    }
                    idx -= 1;
                }
            } else {
                for e in &elems[first.take().unwrap_or(0)..] {
                    if !f(idx, &w, e)? {
                        return Ok(());
                    }
                    idx += 1;
                    if idx >= h.len {
                        return Ok(());
                    }
                }
            }
            let n = if rev { c.prev } else { c.next };
            steps += 1;
            if n == 0 || steps > h.chunks {
                return Err(self.corrupt(src, "chain shorter than its length"));
            }
            c = self.chunk(src, n)?;
        }
    }

    fn range(&self, src: &Src, start: i64, end: i64, rev: bool) -> Result<Vec<Vec<u8>>> {
        let h = self.header(src)?;
        let Some((s, e)) = redis_range(start, end, h.len) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity((e - s + 1).min(1 << 16) as usize);
        let (from, stop) = if rev { (e, s) } else { (s, e) };
        self.visit(src, from, rev, |i, w, el| {
            out.push(self.value(src, w, el)?);
            Ok(i != stop)
        })?;
        Ok(out)
    }

    /// [`range`](Self::range)'s items handed to `f` one by one, without a vector of copies:
    /// a small item as a slice of its chunk's window, a big one read into a reused buffer.
    fn range_each(
        &self,
        src: &Src,
        start: i64,
        end: i64,
        rev: bool,
        mut f: impl FnMut(&[u8]),
    ) -> Result<u64> {
        let h = self.header(src)?;
        let Some((s, e)) = redis_range(start, end, h.len) else {
            return Ok(0);
        };
        let (from, stop) = if rev { (e, s) } else { (s, e) };
        let mut big = Vec::new();
        self.visit(src, from, rev, |i, w, el| {
            if el.big() {
                big = self.value(src, w, el)?;
                f(&big);
            } else {
                f(el.payload(w));
            }
            Ok(i != stop)
        })?;
        Ok(e - s + 1)
    }

    fn position(
        &self,
        src: &Src,
        value: &[u8],
        rank: i64,
        count: u64,
        maxlen: u64,
    ) -> Result<Vec<u64>> {
        if rank == 0 {
            return Err(Error::Unsupported(
                "rank must be positive (from the head) or negative (from the tail), not 0".into(),
            ));
        }
        let h = self.header(src)?;
        if h.len == 0 {
            return Ok(Vec::new());
        }
        let rev = rank < 0;
        let mut skip = rank.unsigned_abs() - 1;
        let mut out = Vec::new();
        let mut seen = 0u64;
        self.visit(src, if rev { h.len - 1 } else { 0 }, rev, |i, w, e| {
            seen += 1;
            if self.item_eq(src, w, e, value)? {
                if skip > 0 {
                    skip -= 1;
                } else {
                    out.push(i);
                    if count != 0 && out.len() as u64 >= count {
                        return Ok(false);
                    }
                }
            }
            Ok(maxlen == 0 || seen < maxlen)
        })?;
        Ok(out)
    }

    // ---- pushes ----

    /// Push encoded items at the back: `enc` holds them back to back, `lens` their sizes, in
    /// their final order.
    fn append(&self, tx: &mut Tx, h: &mut SeqHeader, enc: &[u8], lens: &[usize]) -> Result<()> {
        let (mut i, mut pos) = (0usize, 0usize);
        let fit = |from: usize, room: usize| -> (usize, usize) {
            let (mut k, mut bytes) = (0, 0);
            while from + k < lens.len() && bytes + lens[from + k] <= room {
                bytes += lens[from + k];
                k += 1;
            }
            (k, bytes)
        };
        let mut last = 0;
        if h.tail != 0 {
            let mut t = self.chunk(&Src::Tx(tx), h.tail)?;
            if t.count == 0 {
                t.start = CHUNK_HEADER;
                t.end = CHUNK_HEADER;
            }
            let (mut k, mut bytes) = fit(0, (self.cb - t.end) as usize);
            if k == 0
                && t.count > 0
                && t.start > CHUNK_HEADER
                && t.used() <= SHIFT_MAX
                && (t.used() as usize + lens[0]) <= self.cap() as usize
            {
                // Little in the window: move it to the front of the data area.
                let w = self.window(&Src::Tx(tx), &t)?;
                tx.write_bytes(t.off + CHUNK_HEADER as u64, &w)?;
                t.end = CHUNK_HEADER + t.used();
                t.start = CHUNK_HEADER;
                (k, bytes) = fit(0, (self.cb - t.end) as usize);
            }
            if k > 0 {
                tx.write_bytes(t.off + t.end as u64, &enc[..bytes])?;
                self.set_window(tx, t.off, t.start, t.end + bytes as u32, t.count + k as u32)?;
                i = k;
                pos = bytes;
            }
            last = t.off;
        }
        let old_tail = last;
        while i < lens.len() {
            let (k, bytes) = fit(i, self.cap() as usize);
            debug_assert!(k > 0);
            let c = self.fresh_chunk(tx, last, 0, &enc[pos..pos + bytes], k as u32, Place::Back)?;
            if last == 0 {
                h.head = c;
            } else if last == old_tail {
                if sim_fault!(SeqLinkOutsideTx) {
                    tx.pool_inner().store_word_durable(last + 8, c)?;
                } else {
                    self.set_link(tx, last + 8, c)?;
                }
            } else {
                self.set_link(tx, last + 8, c)?;
            }
            last = c;
            h.chunks += 1;
            i += k;
            pos += bytes;
        }
        h.tail = last;
        h.len += lens.len() as u64;
        Ok(())
    }

    /// Push encoded items at the front; `enc`/`lens` in their final order (front first).
    fn prepend(&self, tx: &mut Tx, h: &mut SeqHeader, enc: &[u8], lens: &[usize]) -> Result<()> {
        // Fit items taken from the end of `lens` (those nearest the current head).
        let fit = |upto: usize, room: usize| -> (usize, usize) {
            let (mut k, mut bytes) = (0, 0);
            while k < upto && bytes + lens[upto - 1 - k] <= room {
                bytes += lens[upto - 1 - k];
                k += 1;
            }
            (k, bytes)
        };
        let (mut n, mut pos) = (lens.len(), enc.len()); // items [0, n) and bytes [0, pos) left
        let mut first = 0;
        if h.head != 0 {
            let mut t = self.chunk(&Src::Tx(tx), h.head)?;
            if t.count == 0 {
                t.start = self.cb;
                t.end = self.cb;
            }
            let (mut k, mut bytes) = fit(n, (t.start - CHUNK_HEADER) as usize);
            if k == 0
                && t.count > 0
                && t.end < self.cb
                && t.used() <= SHIFT_MAX
                && (t.used() as usize + lens[n - 1]) <= self.cap() as usize
            {
                let w = self.window(&Src::Tx(tx), &t)?;
                t.start = self.cb - t.used();
                t.end = self.cb;
                tx.write_bytes(t.off + t.start as u64, &w)?;
                (k, bytes) = fit(n, (t.start - CHUNK_HEADER) as usize);
            }
            if k > 0 {
                let s = t.start - bytes as u32;
                tx.write_bytes(t.off + s as u64, &enc[pos - bytes..pos])?;
                self.set_window(tx, t.off, s, t.end, t.count + k as u32)?;
                n -= k;
                pos -= bytes;
            }
            first = t.off;
        }
        let old_head = first;
        while n > 0 {
            let (k, bytes) = fit(n, self.cap() as usize);
            debug_assert!(k > 0);
            let c =
                self.fresh_chunk(tx, 0, first, &enc[pos - bytes..pos], k as u32, Place::Front)?;
            if first == 0 {
                h.tail = c;
            } else if first == old_head && sim_fault!(SeqLinkOutsideTx) {
                tx.pool_inner().store_word_durable(first, c)?;
            } else {
                self.set_link(tx, first, c)?;
            }
            first = c;
            h.chunks += 1;
            n -= k;
            pos -= bytes;
        }
        h.head = first;
        h.len += lens.len() as u64;
        Ok(())
    }

    fn push(&self, tx: &mut Tx, items: &[&[u8]], back: bool) -> Result<u64> {
        let src = Src::Tx(tx);
        let h0 = self.header(&src)?;
        self.live(&h0)?;
        let mut enc = Vec::with_capacity(items.iter().map(|i| i.len().min(64) + 4).sum());
        let mut lens = Vec::with_capacity(items.len());
        // Final order: as given at the back; reversed at the front (each item is pushed to
        // the head in turn, as LPUSH does).
        let mut add = |tx: &mut Tx, it: &[u8]| -> Result<()> {
            let before = enc.len();
            self.encode(tx, it, &mut enc)?;
            lens.push(enc.len() - before);
            Ok(())
        };
        if back {
            for it in items {
                add(tx, it)?;
            }
        } else {
            for it in items.iter().rev() {
                add(tx, it)?;
            }
        }
        let mut h = h0;
        if !lens.is_empty() {
            if back {
                self.append(tx, &mut h, &enc, &lens)?;
            } else {
                self.prepend(tx, &mut h, &enc, &lens)?;
            }
        }
        self.write_header(tx, &h0, &h)?;
        Ok(h.len)
    }

    /// Refuse a sequence that `free_step` has started to free.
    fn live(&self, h: &SeqHeader) -> Result<()> {
        if h.flags & FLAG_FREEING != 0 {
            return Err(Error::NotACollection {
                offset: self.hdr,
                what: WHAT,
                why: "the sequence is being freed".into(),
            });
        }
        Ok(())
    }

    // ---- pops ----

    /// Pop one item from the front or back (reads only that item, not the whole window).
    fn pop_one(&self, tx: &mut Tx, h: &mut SeqHeader, back: bool) -> Result<Option<Vec<u8>>> {
        if h.len == 0 {
            return Ok(None);
        }
        let src = Src::Tx(tx);
        let c = self.chunk(&src, if back { h.tail } else { h.head })?;
        if c.count == 0 {
            return Err(self.corrupt(&src, "an empty end chunk in a non-empty sequence"));
        }
        // A short read holds a small item whole; a longer one is read again in full.
        let used = c.used() as usize;
        let mut n = used.min(64);
        let (buf, e) = loop {
            let at = if back {
                c.end as usize - n
            } else {
                c.start as usize
            };
            let mut buf = vec![0u8; n];
            src.read(c.off + at as u64, &mut buf)?;
            let e = if back {
                parse_back(&buf, n)
            } else {
                parse_fwd(&buf, 0)
            };
            match e {
                Some(e) => break (buf, e),
                None if n < used => n = used,
                None => {
                    return Err(
                        self.corrupt(&src, format!("chunk {:#x}: items do not parse", c.off))
                    )
                }
            }
        };
        let value = self.value(&src, &buf, &e)?;
        let total = e.total() as u32;
        if e.big() {
            tx.free(PPtr::<u8>::from_offset(e.obj(&buf)))?;
        }
        if c.count == 1 {
            if total != c.used() {
                return Err(
                    self.corrupt(&Src::Tx(tx), format!("chunk {:#x}: count is wrong", c.off))
                );
            }
            self.emptied(tx, h, &c)?;
        } else if back {
            self.set_window(tx, c.off, c.start, c.end - total, c.count - 1)?;
        } else {
            self.set_window(tx, c.off, c.start + total, c.end, c.count - 1)?;
        }
        h.len -= 1;
        Ok(Some(value))
    }

    fn pop(&self, tx: &mut Tx, count: u64, back: bool) -> Result<Vec<Vec<u8>>> {
        let h0 = self.header(&Src::Tx(tx))?;
        self.live(&h0)?;
        let mut h = h0;
        let mut out = Vec::with_capacity(count.min(h.len).min(1 << 16) as usize);
        if count == 1 {
            out.extend(self.pop_one(tx, &mut h, back)?);
        }
        while (out.len() as u64) < count && h.len > 0 {
            let src = Src::Tx(tx);
            let c = self.chunk(&src, if back { h.tail } else { h.head })?;
            let w = self.window(&src, &c)?;
            let elems = self.elems(&src, &c, &w)?;
            if elems.is_empty() {
                return Err(self.corrupt(&src, "an empty end chunk in a non-empty sequence"));
            }
            let k = (count - out.len() as u64).min(elems.len() as u64) as usize;
            let taken: Vec<Elem> = if back {
                elems[elems.len() - k..].iter().rev().copied().collect()
            } else {
                elems[..k].to_vec()
            };
            for e in &taken {
                out.push(self.value(&src, &w, e)?);
            }
            self.free_big(tx, &w, &taken)?;
            let bytes: u32 = taken.iter().map(|e| e.total() as u32).sum();
            if k == elems.len() {
                self.emptied(tx, &mut h, &c)?;
            } else if back {
                self.set_window(tx, c.off, c.start, c.end - bytes, c.count - k as u32)?;
            } else {
                self.set_window(tx, c.off, c.start + bytes, c.end, c.count - k as u32)?;
            }
            h.len -= k as u64;
        }
        self.write_header(tx, &h0, &h)?;
        Ok(out)
    }

    // ---- middle edits ----

    /// Give chunk `c` (window `w`) the window contents `nc` (`count` items, at most a chunk's
    /// capacity): the bytes that differ are rewritten through the log, keeping the window's
    /// start or its end in place (whichever logs less), or re-centred; or, when that would log
    /// more than [`EDIT_LOG_MAX`] bytes or than the record has room for, a fresh chunk takes
    /// `c`'s place. Returns the chunk as it now is (None: replaced).
    fn rewrite(
        &self,
        tx: &mut Tx,
        h: &mut SeqHeader,
        c: &Chunk,
        w: &[u8],
        nc: &[u8],
        count: u32,
    ) -> Result<Option<Chunk>> {
        debug_assert!(nc.len() <= self.cap() as usize && count > 0);
        let (ol, nl) = (w.len(), nc.len());
        let p = w.iter().zip(nc).take_while(|(a, b)| a == b).count();
        let q = w
            .iter()
            .rev()
            .zip(nc.iter().rev())
            .take_while(|(a, b)| a == b)
            .count()
            .min(ol - p)
            .min(nl - p);
        let same = ol == nl;
        // (new start, bytes of nc to write [a, b), cost)
        let mut best: Option<(u32, usize, usize)> = None;
        let mut consider = |start: i64, a: usize, b: usize| {
            if start >= CHUNK_HEADER as i64 && start + nl as i64 <= self.cb as i64 {
                let cost = b.saturating_sub(a);
                if best.is_none_or(|x| cost < x.2 - x.1) {
                    best = Some((start as u32, a, a + cost));
                }
            }
        };
        // Keep the start: the common prefix stays; the suffix too if the length is the same.
        consider(c.start as i64, p, if same { nl - q } else { nl });
        // Keep the end.
        consider(c.end as i64 - nl as i64, if same { p } else { 0 }, nl - q);
        // Re-centre.
        consider(place_start(self.cb, nl as u32, Place::Middle) as i64, 0, nl);
        if let Some((start, a, b)) = best {
            let cost = b - a;
            if cost <= EDIT_LOG_MAX && cost + GARBAGE_RESERVE <= tx.log_room() {
                if b > a {
                    tx.write_bytes(c.off + (start as usize + a) as u64, &nc[a..b])?;
                }
                let end = start + nl as u32;
                self.set_window(tx, c.off, start, end, count)?;
                return Ok(Some(Chunk {
                    start,
                    end,
                    count,
                    ..*c
                }));
            }
        }
        let f = self.fresh_chunk(tx, c.prev, c.next, nc, count, Core::place_of(c))?;
        self.replace(tx, h, c, f)?;
        Ok(None)
    }

    /// Replace the item bytes `[at, at + old_len)` of chunk `c`'s window `w` by `new` (one
    /// encoded item or nothing), changing its count by `dcount`. Splits a chunk that would
    /// overflow. Returns the chunk and its new window when it stays in place.
    #[allow(clippy::too_many_arguments)]
    fn edit(
        &self,
        tx: &mut Tx,
        h: &mut SeqHeader,
        c: &Chunk,
        w: &[u8],
        at: usize,
        old_len: usize,
        new: &[u8],
        dcount: i32,
    ) -> Result<Option<(Chunk, Vec<u8>)>> {
        let mut nc = Vec::with_capacity(w.len() - old_len + new.len());
        nc.extend_from_slice(&w[..at]);
        nc.extend_from_slice(new);
        nc.extend_from_slice(&w[at + old_len..]);
        let count = (c.count as i64 + dcount as i64) as u32;
        if nc.len() <= self.cap() as usize {
            return Ok(self.rewrite(tx, h, c, w, &nc, count)?.map(|c| (c, nc)));
        }
        // Split: `c` keeps a part of its current window (only its window word changes) and a
        // fresh chunk next to it takes the rest, the new item included.
        let src = Src::Tx(tx);
        let elems =
            parse_all(&nc).ok_or_else(|| self.corrupt(&src, "edited items do not parse"))?;
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(elems.iter().map(|e| e.end()))
            .collect();
        let (nl, cap, half) = (nc.len(), self.cap() as usize, nc.len() / 2);
        let closest = |lo: usize, hi: usize| -> Option<usize> {
            bounds
                .iter()
                .copied()
                .filter(|&b| b >= lo && b <= hi)
                .min_by_key(|&b| b.abs_diff(half))
        };
        if at >= w.len() / 2 {
            // Keep the prefix nc[..s] == w[..s] in `c`; the fresh chunk after it takes nc[s..].
            let s = closest(nl.saturating_sub(cap), at)
                .ok_or_else(|| self.corrupt(&src, "no split point"))?;
            let kept = bounds.iter().filter(|&&b| b > 0 && b <= s).count() as u32;
            let place = if c.next == 0 {
                Place::Back
            } else {
                Place::Middle
            };
            let f = self.fresh_chunk(tx, c.off, c.next, &nc[s..], count - kept, place)?;
            self.set_window(tx, c.off, c.start, c.start + s as u32, kept)?;
            self.set_link(tx, c.off + 8, f)?;
            if c.next != 0 {
                self.set_link(tx, c.next, f)?;
            } else {
                h.tail = f;
            }
        } else {
            // Keep the suffix nc[s..] (a suffix of w) in `c`; the fresh chunk before it takes
            // nc[..s].
            let s = closest(at + new.len(), cap.min(nl))
                .ok_or_else(|| self.corrupt(&src, "no split point"))?;
            let moved = bounds.iter().filter(|&&b| b > 0 && b <= s).count() as u32;
            let place = if c.prev == 0 {
                Place::Front
            } else {
                Place::Middle
            };
            let f = self.fresh_chunk(tx, c.prev, c.off, &nc[..s], moved, place)?;
            self.set_window(tx, c.off, c.end - (nl - s) as u32, c.end, count - moved)?;
            self.set_link(tx, c.off, f)?;
            if c.prev != 0 {
                self.set_link(tx, c.prev + 8, f)?;
            } else {
                h.head = f;
            }
        }
        h.chunks += 1;
        Ok(None)
    }

    /// After a removal left chunk `c` (window `w`) small: move its items into a neighbour
    /// that has room next to it (logged, at most a quarter chunk), then unlink and free it.
    fn maybe_merge(&self, tx: &mut Tx, h: &mut SeqHeader, c: &Chunk, w: &[u8]) -> Result<()> {
        if c.used() * 4 >= self.cap() || tx.log_room() < w.len() + 2 * GARBAGE_RESERVE {
            return Ok(());
        }
        let used = c.used();
        if c.prev != 0 {
            let p = self.chunk(&Src::Tx(tx), c.prev)?;
            if p.end + used <= self.cb {
                tx.write_bytes(p.off + p.end as u64, w)?;
                self.set_window(tx, p.off, p.start, p.end + used, p.count + c.count)?;
                return self.unlink_free(tx, h, c);
            }
        }
        if c.next != 0 {
            let n = self.chunk(&Src::Tx(tx), c.next)?;
            if n.start >= CHUNK_HEADER + used {
                tx.write_bytes(n.off + (n.start - used) as u64, w)?;
                self.set_window(tx, n.off, n.start - used, n.end, n.count + c.count)?;
                return self.unlink_free(tx, h, c);
            }
        }
        Ok(())
    }

    fn set(&self, tx: &mut Tx, index: i64, item: &[u8]) -> Result<()> {
        let h0 = self.header(&Src::Tx(tx))?;
        self.live(&h0)?;
        let i = norm_index(index, h0.len).ok_or(Error::IndexOutOfRange { index, len: h0.len })?;
        let (c, k) = self.locate(&Src::Tx(tx), &h0, i)?;
        let w = self.window(&Src::Tx(tx), &c)?;
        let e = self.elems(&Src::Tx(tx), &c, &w)?[k as usize];
        let mut enc = Vec::new();
        self.encode(tx, item, &mut enc)?;
        self.free_big(tx, &w, &[e])?;
        let mut h = h0;
        self.edit(tx, &mut h, &c, &w, e.at, e.total(), &enc, 0)?;
        self.write_header(tx, &h0, &h)
    }

    fn insert_at(&self, tx: &mut Tx, index: u64, item: &[u8]) -> Result<u64> {
        let h0 = self.header(&Src::Tx(tx))?;
        self.live(&h0)?;
        if index > h0.len {
            return Err(Error::IndexOutOfRange {
                index: i64::try_from(index).unwrap_or(i64::MAX),
                len: h0.len,
            });
        }
        if index == h0.len {
            return self.push(tx, &[item], true);
        }
        if index == 0 {
            return self.push(tx, &[item], false);
        }
        let (c, k) = self.locate(&Src::Tx(tx), &h0, index)?;
        let mut enc = Vec::new();
        self.encode(tx, item, &mut enc)?;
        let mut h = h0;
        h.len += 1;
        if k == 0 && c.prev != 0 {
            // Before the first item of a chunk: at the end of the previous one, if it has room.
            let p = self.chunk(&Src::Tx(tx), c.prev)?;
            if p.end as usize + enc.len() <= self.cb as usize {
                tx.write_bytes(p.off + p.end as u64, &enc)?;
                self.set_window(tx, p.off, p.start, p.end + enc.len() as u32, p.count + 1)?;
                self.write_header(tx, &h0, &h)?;
                return Ok(h.len);
            }
        }
        let w = self.window(&Src::Tx(tx), &c)?;
        let elems = self.elems(&Src::Tx(tx), &c, &w)?;
        self.edit(tx, &mut h, &c, &w, elems[k as usize].at, 0, &enc, 1)?;
        self.write_header(tx, &h0, &h)?;
        Ok(h.len)
    }

    fn remove_at(&self, tx: &mut Tx, index: i64) -> Result<Vec<u8>> {
        let h0 = self.header(&Src::Tx(tx))?;
        self.live(&h0)?;
        let i = norm_index(index, h0.len).ok_or(Error::IndexOutOfRange { index, len: h0.len })?;
        let mut h = h0;
        if i == 0 || i == h.len - 1 {
            let v = self.pop_one(tx, &mut h, i != 0)?;
            self.write_header(tx, &h0, &h)?;
            return v.ok_or_else(|| self.corrupt(&Src::Tx(tx), "length without items"));
        }
        let (c, k) = self.locate(&Src::Tx(tx), &h0, i)?;
        let w = self.window(&Src::Tx(tx), &c)?;
        let e = self.elems(&Src::Tx(tx), &c, &w)?[k as usize];
        let value = self.value(&Src::Tx(tx), &w, &e)?;
        self.free_big(tx, &w, &[e])?;
        if c.count == 1 {
            self.emptied(tx, &mut h, &c)?;
        } else if let Some((c2, w2)) = self.edit(tx, &mut h, &c, &w, e.at, e.total(), &[], -1)? {
            self.maybe_merge(tx, &mut h, &c2, &w2)?;
        }
        h.len -= 1;
        self.write_header(tx, &h0, &h)?;
        Ok(value)
    }

    fn remove_value(&self, tx: &mut Tx, value: &[u8], count: i64) -> Result<u64> {
        let h0 = self.header(&Src::Tx(tx))?;
        self.live(&h0)?;
        let mut h = h0;
        let rev = count < 0;
        let limit = if count == 0 {
            u64::MAX
        } else {
            count.unsigned_abs()
        };
        let mut removed = 0u64;
        let mut c = if rev { h.tail } else { h.head };
        let mut steps = 0u64;
        while c != 0 && removed < limit {
            steps += 1;
            if steps > h0.chunks + 1 {
                return Err(self.corrupt(&Src::Tx(tx), "chain longer than its chunk count"));
            }
            let src = Src::Tx(tx);
            let ch = self.chunk(&src, c)?;
            let w = self.window(&src, &ch)?;
            let elems = self.elems(&src, &ch, &w)?;
            let mut hit = vec![false; elems.len()];
            let mut n = 0u64;
            let order: Box<dyn Iterator<Item = usize>> = if rev {
                Box::new((0..elems.len()).rev())
            } else {
                Box::new(0..elems.len())
            };
            for i in order {
                if removed + n >= limit {
                    break;
                }
                if self.item_eq(&src, &w, &elems[i], value)? {
                    hit[i] = true;
                    n += 1;
                }
            }
            let next = if rev { ch.prev } else { ch.next };
            if n > 0 {
                let gone: Vec<Elem> = (0..elems.len())
                    .filter(|&i| hit[i])
                    .map(|i| elems[i])
                    .collect();
                self.free_big(tx, &w, &gone)?;
                if n as usize == elems.len() {
                    self.emptied(tx, &mut h, &ch)?;
                } else {
                    let mut nc = Vec::with_capacity(w.len());
                    for (i, e) in elems.iter().enumerate() {
                        if !hit[i] {
                            nc.extend_from_slice(&w[e.at..e.end()]);
                        }
                    }
                    self.rewrite(tx, &mut h, &ch, &w, &nc, ch.count - n as u32)?;
                }
                removed += n;
                h.len -= n;
            }
            c = next;
        }
        self.write_header(tx, &h0, &h)?;
        Ok(removed)
    }

    // ---- trim, clear, garbage ----

    /// Hang the live chain `first ..= last` (linked by `next`) on the garbage chain.
    fn hang_on_garbage(&self, tx: &mut Tx, h: &mut SeqHeader, last: u64, first: u64) -> Result<()> {
        self.set_link(tx, last + 8, h.garbage)?;
        h.garbage = first;
        Ok(())
    }

    /// Detach every live chunk into the garbage chain.
    fn detach_all(&self, tx: &mut Tx, h: &mut SeqHeader) -> Result<()> {
        if h.head != 0 {
            self.hang_on_garbage(tx, h, h.tail, h.head)?;
        }
        h.head = 0;
        h.tail = 0;
        h.len = 0;
        h.chunks = 0;
        Ok(())
    }

    /// Remove `k` items from the front (`back`: from the back), `k` < len.
    fn drop_end(&self, tx: &mut Tx, h: &mut SeqHeader, k: u64, back: bool) -> Result<()> {
        if k == 0 {
            return Ok(());
        }
        let mut whole: Vec<Chunk> = Vec::new();
        let mut left = k;
        let mut c = if back { h.tail } else { h.head };
        loop {
            let ch = self.chunk(&Src::Tx(tx), c)?;
            if ch.count as u64 > left {
                // The boundary chunk: drop `left` items from its end.
                if left > 0 {
                    let src = Src::Tx(tx);
                    let w = self.window(&src, &ch)?;
                    let elems = self.elems(&src, &ch, &w)?;
                    let n = left as usize;
                    let gone: Vec<Elem> = if back {
                        elems[elems.len() - n..].to_vec()
                    } else {
                        elems[..n].to_vec()
                    };
                    self.free_big(tx, &w, &gone)?;
                    let bytes: u32 = gone.iter().map(|e| e.total() as u32).sum();
                    let (s, e) = if back {
                        (ch.start, ch.end - bytes)
                    } else {
                        (ch.start + bytes, ch.end)
                    };
                    self.set_window(tx, ch.off, s, e, ch.count - n as u32)?;
                }
                // Cut the link to the whole chunks dropped before it.
                if !whole.is_empty() {
                    if back {
                        self.set_link(tx, ch.off + 8, 0)?;
                        h.tail = ch.off;
                    } else {
                        self.set_link(tx, ch.off, 0)?;
                        h.head = ch.off;
                    }
                }
                break;
            }
            left -= ch.count as u64;
            whole.push(ch);
            c = if back { ch.prev } else { ch.next };
            if c == 0 || whole.len() as u64 > h.chunks {
                return Err(self.corrupt(&Src::Tx(tx), "chain shorter than its length"));
            }
        }
        h.chunks -= whole.len() as u64;
        h.len -= k;
        if whole.is_empty() {
            // Only the boundary chunk lost items (a transaction with little log room left
            // would otherwise take the garbage path below with nothing to hang).
            return Ok(());
        }
        if whole.len() <= TRIM_DIRECT && tx.log_room() > 4096 {
            for ch in &whole {
                let src = Src::Tx(tx);
                let w = self.window(&src, ch)?;
                let elems = self.elems(&src, ch, &w)?;
                self.free_big(tx, &w, &elems)?;
                tx.free(PPtr::<u8>::from_offset(ch.off))?;
            }
        } else if back {
            // whole[0] is the old tail (next = 0); the chain runs from the last one, by next.
            let first = whole.last().expect("whole chunks").off;
            self.hang_on_garbage(tx, h, whole[0].off, first)?;
        } else {
            let last = whole.last().expect("whole chunks").off;
            self.hang_on_garbage(tx, h, last, whole[0].off)?;
        }
        Ok(())
    }

    fn trim(&self, tx: &mut Tx, start: i64, end: i64) -> Result<()> {
        let h0 = self.header(&Src::Tx(tx))?;
        self.live(&h0)?;
        let mut h = h0;
        match redis_range(start, end, h.len) {
            None => self.detach_all(tx, &mut h)?,
            Some((s, e)) => {
                let back = h.len - 1 - e;
                self.drop_end(tx, &mut h, s, false)?;
                self.drop_end(tx, &mut h, back, true)?;
            }
        }
        self.write_header(tx, &h0, &h)
    }

    fn clear(&self, tx: &mut Tx) -> Result<()> {
        let h0 = self.header(&Src::Tx(tx))?;
        self.live(&h0)?;
        let mut h = h0;
        self.detach_all(tx, &mut h)?;
        self.write_header(tx, &h0, &h)
    }

    /// Free garbage: at most about `budget` objects, keeping [`GARBAGE_RESERVE`] bytes of the
    /// record free once something was freed. True when no garbage is left.
    fn garbage_step(&self, tx: &mut Tx, budget: &mut u32) -> Result<bool> {
        let mut progressed = false;
        loop {
            let h = self.header(&Src::Tx(tx))?;
            if h.garbage == 0 {
                return Ok(true);
            }
            let low = |tx: &Tx, budget: u32| budget == 0 || tx.log_room() < GARBAGE_RESERVE;
            if progressed && low(tx, *budget) {
                return Ok(false);
            }
            let src = Src::Tx(tx);
            let ch = self.chunk(&src, h.garbage)?;
            let w = self.window(&src, &ch)?;
            let elems = self.elems(&src, &ch, &w)?;
            let mut consumed = 0u32;
            for (i, e) in elems.iter().enumerate() {
                if e.big() {
                    if progressed && low(tx, *budget) {
                        // Record how far this chunk got: its window starts after the items
                        // whose objects are freed.
                        self.set_window(
                            tx,
                            ch.off,
                            ch.start + consumed,
                            ch.end,
                            ch.count - i as u32,
                        )?;
                        return Ok(false);
                    }
                    tx.free(PPtr::<u8>::from_offset(e.obj(&w)))?;
                    *budget = budget.saturating_sub(1);
                    progressed = true;
                }
                consumed += e.total() as u32;
            }
            tx.free(PPtr::<u8>::from_offset(ch.off))?;
            tx.write_bytes(self.hdr + 56, &ch.next.to_le_bytes())?;
            *budget = budget.saturating_sub(1);
            progressed = true;
        }
    }
}

/// Index `i` (negative: from the end) as a position below `len`.
fn norm_index(i: i64, len: u64) -> Option<u64> {
    let p = if i < 0 {
        len.checked_sub(i.unsigned_abs())?
    } else {
        i as u64
    };
    (p < len).then_some(p)
}

/// Redis's LRANGE/LTRIM bounds: the inclusive range `[start, end]` they select (negative
/// indexes count from the end; out-of-range ends are clamped), or None when it is empty.
fn redis_range(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = i128::from(len);
    let (mut s, mut e) = (i128::from(start), i128::from(end));
    if s < 0 {
        s += len;
    }
    if e < 0 {
        e += len;
    }
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as u64, e as u64))
}

/// The header at `hdr` if it is a sequence of this format (what `open`, `view`, `free_step`
/// and the checkers validate before trusting anything sized from the media).
fn valid_header(src: &Src, hdr: u64) -> Result<SeqHeader> {
    let not = |why: String| Error::NotACollection {
        offset: hdr,
        what: WHAT,
        why,
    };
    let h: SeqHeader = src
        .read_pod(hdr)
        .map_err(|_| not("offset outside the heap".into()))?;
    if h.magic != SEQ_MAGIC || h.crc != h.immutable_crc() {
        return Err(not(
            "no sequence header there (bad magic or checksum)".into()
        ));
    }
    if h.format != SEQ_FORMAT {
        return Err(not(format!(
            "sequence format version {} (this build reads {SEQ_FORMAT})",
            h.format
        )));
    }
    if !chunk_bytes_valid(h.chunk_bytes) {
        return Err(not(format!("invalid chunk size {}", h.chunk_bytes)));
    }
    if h.flags & !FLAG_FREEING != 0 {
        return Err(not(format!("invalid header flags {:#x}", h.flags)));
    }
    if (h.head == 0) != (h.tail == 0) {
        return Err(not("head and tail disagree".into()));
    }
    Ok(h)
}

impl std::fmt::Debug for PSeq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PSeq@{:#x}", self.core.hdr)
    }
}

/// A persistent sequence (deque) of byte strings: O(1) pushes and pops at both ends, indexed
/// access, middle edits, Redis's list operations (see the module docs for the format and the
/// crash reasoning).
///
/// Durability modes, as [`super::PBytesMap`]'s: the methods without a transaction argument
/// are each one transaction, durable when they return; the `_tx` methods (and a
/// [`SeqView`]'s) join the caller's transaction. A handle is exclusive: while it lives no
/// other handle or view can use the sequence.
pub struct PSeq {
    pool: Pool,
    core: Core,
}

impl PSeq {
    /// Chunk size of [`create_in`](Self::create_in).
    pub const DEFAULT_CHUNK_BYTES: u32 = DEFAULT_CHUNK_BYTES;
    /// Smallest chunk size [`create_in_with`](Self::create_in_with) accepts.
    pub const MIN_CHUNK_BYTES: u32 = MIN_CHUNK_BYTES;
    /// Largest chunk size.
    pub const MAX_CHUNK_BYTES: u32 = MAX_CHUNK_BYTES;
    /// Largest item, in bytes.
    pub const MAX_ITEM_LEN: usize = MAX_ITEM_LEN;
    /// Most bytes a middle edit rewrites through the redo log (larger rewrites move the
    /// window into a fresh chunk).
    pub const EDIT_LOG_MAX: usize = EDIT_LOG_MAX;

    /// Create an empty sequence inside `tx` with the default chunk size; store the pointer
    /// somewhere reachable in the same transaction.
    pub fn create_in(tx: &mut Tx) -> Result<PPtr<PSeq>> {
        Self::create_in_with(tx, DEFAULT_CHUNK_BYTES)
    }

    /// An empty sequence whose chunks are `chunk_bytes` bytes (a size class from
    /// `MIN_CHUNK_BYTES` to `MAX_CHUNK_BYTES`: 128, 256, 512, 1024, 2048, 4096, ...).
    /// Items over a quarter of a chunk's data area go out of line, in objects of their own.
    pub fn create_in_with(tx: &mut Tx, chunk_bytes: u32) -> Result<PPtr<PSeq>> {
        if !chunk_bytes_valid(chunk_bytes) {
            return Err(Error::Unsupported(format!(
                "chunk size {chunk_bytes} is not a size class from {MIN_CHUNK_BYTES} to \
                 {MAX_CHUNK_BYTES}"
            )));
        }
        let mut h = SeqHeader {
            magic: SEQ_MAGIC,
            format: SEQ_FORMAT,
            chunk_bytes,
            ..SeqHeader::zeroed()
        };
        h.crc = h.immutable_crc();
        Ok(PPtr::from_offset(
            tx.alloc_bytes(bytemuck::bytes_of(&h))?.offset(),
        ))
    }

    /// Open the sequence at `id` (an exclusive handle); frees garbage a `trim` or `clear`
    /// left (a crash may have interrupted that).
    pub fn open(pool: &Pool, id: PPtr<PSeq>) -> Result<PSeq> {
        let h = valid_header(&Src::Pool(&pool.inner), id.offset())?;
        if h.flags & FLAG_FREEING != 0 {
            return Err(Error::NotACollection {
                offset: id.offset(),
                what: WHAT,
                why: "the sequence is being freed".into(),
            });
        }
        let s = Self::claim(pool, id.offset(), h.chunk_bytes)?;
        if h.garbage != 0 {
            s.finish_garbage()?;
        }
        Ok(s)
    }

    fn claim(pool: &Pool, hdr: u64, cb: u32) -> Result<PSeq> {
        if !pool.inner.claim_object(hdr) {
            return Err(Error::CollectionInUse {
                offset: hdr,
                what: WHAT,
            });
        }
        Ok(PSeq {
            pool: pool.clone(),
            core: Core { hdr, cb },
        })
    }

    /// A transaction-scoped view of the sequence at `id`: every operation runs in `tx` (of
    /// `pool`) and sees its earlier writes; the sequence may be one `tx` created. Cheap (the
    /// header is validated, nothing else read or repaired). While it lives the sequence is
    /// claimed as by [`open`](Self::open).
    pub fn view(pool: &Pool, tx: &Tx, id: PPtr<PSeq>) -> Result<SeqView> {
        if !std::ptr::eq(tx.pool_inner(), &*pool.inner) {
            return Err(Error::InvalidPointer {
                offset: id.offset(),
                why: "the transaction belongs to another pool than the sequence",
            });
        }
        let h = valid_header(&Src::Tx(tx), id.offset())?;
        if h.flags & FLAG_FREEING != 0 {
            return Err(Error::NotACollection {
                offset: id.offset(),
                what: WHAT,
                why: "the sequence is being freed".into(),
            });
        }
        Ok(SeqView(Self::claim(pool, id.offset(), h.chunk_bytes)?))
    }

    /// The header pointer (what to store to find the sequence again).
    pub fn id(&self) -> PPtr<PSeq> {
        PPtr::from_offset(self.core.hdr)
    }

    /// Bytes of each chunk.
    pub fn chunk_bytes(&self) -> u32 {
        self.core.cb
    }

    fn src(&self) -> Src<'_, 'static> {
        Src::Pool(&self.pool.inner)
    }

    fn same_pool(&self, tx: &Tx) -> Result<()> {
        if std::ptr::eq(tx.pool_inner(), &*self.pool.inner) {
            Ok(())
        } else {
            Err(Error::InvalidPointer {
                offset: self.core.hdr,
                why: "the transaction belongs to another pool than the sequence",
            })
        }
    }

    fn run<R>(&mut self, f: impl FnOnce(&Core, &mut Tx) -> Result<R>) -> Result<R> {
        let core = self.core;
        self.pool.transaction(|tx| f(&core, tx))
    }

    // ---- reads (committed state) ----

    /// Number of items.
    pub fn len(&self) -> Result<u64> {
        Ok(self.core.header(&self.src())?.len)
    }

    /// Whether the sequence has no item.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The item at `index` (negative: from the end, -1 the last), None when out of range
    /// (Redis's LINDEX).
    pub fn get(&self, index: i64) -> Result<Option<Vec<u8>>> {
        self.core.get(&self.src(), index)
    }

    /// The items from `start` to `end` inclusive, Redis's LRANGE bounds (negative indexes
    /// from the end, ends clamped, empty when start > end).
    pub fn range(&self, start: i64, end: i64) -> Result<Vec<Vec<u8>>> {
        self.core.range(&self.src(), start, end, false)
    }

    /// [`range`](Self::range)'s items, last first.
    pub fn range_rev(&self, start: i64, end: i64) -> Result<Vec<Vec<u8>>> {
        self.core.range(&self.src(), start, end, true)
    }

    /// Iterate from the item at `from` (negative: from the end) towards the tail, or towards
    /// the head when `rev`. Empty when `from` is out of range.
    pub fn iter(&self, from: i64, rev: bool) -> Result<SeqIter<'_, 'static>> {
        SeqIter::new(self.src(), self.core, from, rev)
    }

    /// Redis's LPOS: indexes (from the head) of items equal to `value`. `rank` n > 0 starts
    /// at the n-th match from the head, n < 0 at the |n|-th from the tail (0 is refused);
    /// `count` matches at most (0: all); `maxlen` items compared at most (0: all).
    pub fn position(&self, value: &[u8], rank: i64, count: u64, maxlen: u64) -> Result<Vec<u64>> {
        self.core.position(&self.src(), value, rank, count, maxlen)
    }

    /// Verify the sequence's invariants (read-only).
    pub fn check(&self) -> MapCheck {
        check_seq(&self.pool.inner, self.core.hdr)
    }

    // ---- reads inside a transaction ----

    /// Number of items as `tx` sees it.
    pub fn len_tx(&self, tx: &Tx) -> Result<u64> {
        self.same_pool(tx)?;
        Ok(self.core.header(&Src::Tx(tx))?.len)
    }

    /// [`get`](Self::get) as `tx` sees the sequence.
    pub fn get_tx(&self, tx: &Tx, index: i64) -> Result<Option<Vec<u8>>> {
        self.same_pool(tx)?;
        self.core.get(&Src::Tx(tx), index)
    }

    /// [`range`](Self::range) as `tx` sees the sequence (`rev`: last first).
    pub fn range_tx(&self, tx: &Tx, start: i64, end: i64, rev: bool) -> Result<Vec<Vec<u8>>> {
        self.same_pool(tx)?;
        self.core.range(&Src::Tx(tx), start, end, rev)
    }

    /// Items from `start` to `end` (LRANGE's bounds) as `tx` sees them, handed to `f` in turn
    /// (last first when `rev`) without copying each into a vector of its own (a reply can be
    /// written straight from the chunks); returns how many were handed over. A damaged chunk
    /// ends the walk with an error after the items before it.
    pub fn range_each_tx(
        &self,
        tx: &Tx,
        start: i64,
        end: i64,
        rev: bool,
        f: impl FnMut(&[u8]),
    ) -> Result<u64> {
        self.same_pool(tx)?;
        self.core.range_each(&Src::Tx(tx), start, end, rev, f)
    }

    /// [`iter`](Self::iter) as `tx` sees the sequence.
    pub fn iter_tx<'a, 'p>(&self, tx: &'a Tx<'p>, from: i64, rev: bool) -> Result<SeqIter<'a, 'p>> {
        self.same_pool(tx)?;
        SeqIter::new(Src::Tx(tx), self.core, from, rev)
    }

    /// [`position`](Self::position) as `tx` sees the sequence.
    pub fn position_tx(
        &self,
        tx: &Tx,
        value: &[u8],
        rank: i64,
        count: u64,
        maxlen: u64,
    ) -> Result<Vec<u64>> {
        self.same_pool(tx)?;
        self.core.position(&Src::Tx(tx), value, rank, count, maxlen)
    }

    // ---- self-durable writes ----

    /// Push `item` at the tail (RPUSH); returns the new length. Durable when it returns.
    pub fn push_back(&mut self, item: &[u8]) -> Result<u64> {
        self.run(|c, tx| c.push(tx, &[item], true))
    }

    /// Push `item` at the head (LPUSH); returns the new length.
    pub fn push_front(&mut self, item: &[u8]) -> Result<u64> {
        self.run(|c, tx| c.push(tx, &[item], false))
    }

    /// Push `items` at the tail in order, in one transaction; returns the new length.
    pub fn push_back_many(&mut self, items: &[&[u8]]) -> Result<u64> {
        self.run(|c, tx| c.push(tx, items, true))
    }

    /// Push `items` at the head one after the other (so the last ends up first, as LPUSH
    /// a b c), in one transaction; returns the new length.
    pub fn push_front_many(&mut self, items: &[&[u8]]) -> Result<u64> {
        self.run(|c, tx| c.push(tx, items, false))
    }

    /// Remove and return the first item (LPOP); None when empty.
    pub fn pop_front(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(self.run(|c, tx| c.pop(tx, 1, false))?.pop())
    }

    /// Remove and return the last item (RPOP).
    pub fn pop_back(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(self.run(|c, tx| c.pop(tx, 1, true))?.pop())
    }

    /// Remove and return up to `count` items from the head, first first (LPOP key count).
    pub fn pop_front_n(&mut self, count: u64) -> Result<Vec<Vec<u8>>> {
        self.run(|c, tx| c.pop(tx, count, false))
    }

    /// Remove and return up to `count` items from the tail, last first (RPOP key count).
    pub fn pop_back_n(&mut self, count: u64) -> Result<Vec<Vec<u8>>> {
        self.run(|c, tx| c.pop(tx, count, true))
    }

    /// Replace the item at `index` (LSET); [`Error::IndexOutOfRange`] when there is none.
    pub fn set(&mut self, index: i64, item: &[u8]) -> Result<()> {
        self.run(|c, tx| c.set(tx, index, item))
    }

    /// Insert `item` so that it becomes the item at position `index` (0 ..= len: 0 the
    /// head, len the tail); returns the new length.
    pub fn insert_at(&mut self, index: u64, item: &[u8]) -> Result<u64> {
        self.run(|c, tx| c.insert_at(tx, index, item))
    }

    /// Insert `item` before the item at `index` (negative: from the end), as LINSERT BEFORE
    /// once the pivot's index is known; returns the new length.
    pub fn insert_before(&mut self, index: i64, item: &[u8]) -> Result<u64> {
        self.run(|c, tx| c.insert_rel(tx, index, item, false))
    }

    /// Insert `item` after the item at `index`.
    pub fn insert_after(&mut self, index: i64, item: &[u8]) -> Result<u64> {
        self.run(|c, tx| c.insert_rel(tx, index, item, true))
    }

    /// Remove and return the item at `index`.
    pub fn remove_at(&mut self, index: i64) -> Result<Vec<u8>> {
        self.run(|c, tx| c.remove_at(tx, index))
    }

    /// Redis's LREM: remove items equal to `value`, `count` > 0 of them from the head, < 0
    /// from the tail, 0 all; returns how many were removed.
    pub fn remove_value(&mut self, value: &[u8], count: i64) -> Result<u64> {
        self.run(|c, tx| c.remove_value(tx, value, count))
    }

    /// Redis's LTRIM: keep the items from `start` to `end` inclusive (LRANGE's bounds),
    /// remove the others; whole chunks are unlinked at once and freed afterwards, a bounded
    /// number per transaction.
    pub fn trim(&mut self, start: i64, end: i64) -> Result<()> {
        self.run(|c, tx| c.trim(tx, start, end))?;
        self.finish_garbage()
    }

    /// Remove every item (its chunks freed in bounded transactions).
    pub fn clear(&mut self) -> Result<()> {
        self.run(|c, tx| c.clear(tx))?;
        self.finish_garbage()
    }

    fn finish_garbage(&self) -> Result<()> {
        let core = self.core;
        loop {
            let done = self.pool.transaction(|tx| {
                let mut budget = 128;
                core.garbage_step(tx, &mut budget)
            })?;
            if done {
                return Ok(());
            }
        }
    }

    // ---- writes inside the caller's transaction ----

    /// [`push_back`](Self::push_back) inside `tx`.
    pub fn push_back_tx(&mut self, tx: &mut Tx, item: &[u8]) -> Result<u64> {
        self.same_pool(tx)?;
        self.core.push(tx, &[item], true)
    }
    /// [`push_front`](Self::push_front) inside `tx`.
    pub fn push_front_tx(&mut self, tx: &mut Tx, item: &[u8]) -> Result<u64> {
        self.same_pool(tx)?;
        self.core.push(tx, &[item], false)
    }
    /// [`push_back_many`](Self::push_back_many) inside `tx`.
    pub fn push_back_many_tx(&mut self, tx: &mut Tx, items: &[&[u8]]) -> Result<u64> {
        self.same_pool(tx)?;
        self.core.push(tx, items, true)
    }
    /// [`push_front_many`](Self::push_front_many) inside `tx`.
    pub fn push_front_many_tx(&mut self, tx: &mut Tx, items: &[&[u8]]) -> Result<u64> {
        self.same_pool(tx)?;
        self.core.push(tx, items, false)
    }
    /// [`pop_front`](Self::pop_front) inside `tx`.
    pub fn pop_front_tx(&mut self, tx: &mut Tx) -> Result<Option<Vec<u8>>> {
        self.same_pool(tx)?;
        Ok(self.core.pop(tx, 1, false)?.pop())
    }
    /// [`pop_back`](Self::pop_back) inside `tx`.
    pub fn pop_back_tx(&mut self, tx: &mut Tx) -> Result<Option<Vec<u8>>> {
        self.same_pool(tx)?;
        Ok(self.core.pop(tx, 1, true)?.pop())
    }
    /// [`pop_front_n`](Self::pop_front_n) inside `tx`.
    pub fn pop_front_n_tx(&mut self, tx: &mut Tx, count: u64) -> Result<Vec<Vec<u8>>> {
        self.same_pool(tx)?;
        self.core.pop(tx, count, false)
    }
    /// [`pop_back_n`](Self::pop_back_n) inside `tx`.
    pub fn pop_back_n_tx(&mut self, tx: &mut Tx, count: u64) -> Result<Vec<Vec<u8>>> {
        self.same_pool(tx)?;
        self.core.pop(tx, count, true)
    }
    /// [`set`](Self::set) inside `tx`.
    pub fn set_tx(&mut self, tx: &mut Tx, index: i64, item: &[u8]) -> Result<()> {
        self.same_pool(tx)?;
        self.core.set(tx, index, item)
    }
    /// [`insert_at`](Self::insert_at) inside `tx`.
    pub fn insert_at_tx(&mut self, tx: &mut Tx, index: u64, item: &[u8]) -> Result<u64> {
        self.same_pool(tx)?;
        self.core.insert_at(tx, index, item)
    }
    /// [`insert_before`](Self::insert_before) inside `tx`.
    pub fn insert_before_tx(&mut self, tx: &mut Tx, index: i64, item: &[u8]) -> Result<u64> {
        self.same_pool(tx)?;
        self.core.insert_rel(tx, index, item, false)
    }
    /// [`insert_after`](Self::insert_after) inside `tx`.
    pub fn insert_after_tx(&mut self, tx: &mut Tx, index: i64, item: &[u8]) -> Result<u64> {
        self.same_pool(tx)?;
        self.core.insert_rel(tx, index, item, true)
    }
    /// [`remove_at`](Self::remove_at) inside `tx`.
    pub fn remove_at_tx(&mut self, tx: &mut Tx, index: i64) -> Result<Vec<u8>> {
        self.same_pool(tx)?;
        self.core.remove_at(tx, index)
    }
    /// [`remove_value`](Self::remove_value) inside `tx`.
    pub fn remove_value_tx(&mut self, tx: &mut Tx, value: &[u8], count: i64) -> Result<u64> {
        self.same_pool(tx)?;
        self.core.remove_value(tx, value, count)
    }
    /// [`trim`](Self::trim) inside `tx`. Whole chunks beyond the first few are left in the
    /// garbage chain: free them with [`collect_garbage_tx`](Self::collect_garbage_tx) in
    /// later transactions (or they are freed when a handle next opens the sequence).
    pub fn trim_tx(&mut self, tx: &mut Tx, start: i64, end: i64) -> Result<()> {
        self.same_pool(tx)?;
        self.core.trim(tx, start, end)
    }
    /// [`clear`](Self::clear) inside `tx`: the chunks go to the garbage chain (see
    /// [`trim_tx`](Self::trim_tx)).
    pub fn clear_tx(&mut self, tx: &mut Tx) -> Result<()> {
        self.same_pool(tx)?;
        self.core.clear(tx)
    }
    /// Free garbage left by `trim`/`clear`, at most about `budget` objects and within what the
    /// record has room for; true when none is left.
    pub fn collect_garbage_tx(&mut self, tx: &mut Tx, budget: u32) -> Result<bool> {
        self.same_pool(tx)?;
        let mut b = budget.max(1);
        self.core.garbage_step(tx, &mut b)
    }
    /// Whether garbage waits to be freed, as `tx` sees it.
    pub fn has_garbage_tx(&self, tx: &Tx) -> Result<bool> {
        self.same_pool(tx)?;
        Ok(self.core.header(&Src::Tx(tx))?.garbage != 0)
    }

    /// Free the sequence at `id`, a bounded amount of work per call, inside the caller's
    /// transaction: true once it is gone (header included). The first call moves every chunk
    /// into the garbage chain and marks the sequence as being freed (open and view then refuse
    /// it); each call frees at most about `budget` objects and stops while the record still
    /// has room, so a sequence of any size is freed by calls in successive transactions,
    /// resuming after a crash where the last committed call stopped. Nothing may use the
    /// sequence any more (the caller has unlinked it; one with a handle or view is refused).
    pub fn free_step(pool: &Pool, tx: &mut Tx, id: PPtr<PSeq>, budget: u32) -> Result<bool> {
        let hdr = id.offset();
        if !std::ptr::eq(tx.pool_inner(), &*pool.inner) {
            return Err(Error::InvalidPointer {
                offset: hdr,
                why: "the transaction belongs to another pool than the sequence",
            });
        }
        let h0 = valid_header(&Src::Tx(tx), hdr)?;
        if !pool.inner.claim_object(hdr) {
            return Err(Error::CollectionInUse {
                offset: hdr,
                what: WHAT,
            });
        }
        let core = Core {
            hdr,
            cb: h0.chunk_bytes,
        };
        let r = (|| {
            if h0.flags & FLAG_FREEING == 0 {
                let mut h = h0;
                core.detach_all(tx, &mut h)?;
                h.flags |= FLAG_FREEING;
                // One logged word sets FREEING (it shares its word with the crc).
                core.write_header(tx, &h0, &h)?;
            }
            let mut b = budget.max(1);
            if !core.garbage_step(tx, &mut b)? {
                return Ok(false);
            }
            tx.free(PPtr::<u8>::from_offset(hdr))?;
            Ok(true)
        })();
        pool.inner.release_object(hdr);
        r
    }
}

impl Core {
    fn insert_rel(&self, tx: &mut Tx, index: i64, item: &[u8], after: bool) -> Result<u64> {
        let len = self.header(&Src::Tx(tx))?.len;
        let i = norm_index(index, len).ok_or(Error::IndexOutOfRange { index, len })?;
        self.insert_at(tx, i + after as u64, item)
    }
}

impl Drop for PSeq {
    fn drop(&mut self) {
        self.pool.inner.release_object(self.core.hdr);
    }
}

/// A transaction-scoped view of a [`PSeq`], from [`PSeq::view`]: the sequence's operations
/// in the caller's transaction, nothing that runs a transaction of its own. Drop it before
/// the sequence is freed.
#[derive(Debug)]
pub struct SeqView(PSeq);

impl SeqView {
    /// The header pointer.
    pub fn id(&self) -> PPtr<PSeq> {
        self.0.id()
    }
    /// Number of items as `tx` sees it.
    pub fn len(&self, tx: &Tx) -> Result<u64> {
        self.0.len_tx(tx)
    }
    /// Whether the sequence is empty, as `tx` sees it.
    pub fn is_empty(&self, tx: &Tx) -> Result<bool> {
        Ok(self.0.len_tx(tx)? == 0)
    }
    /// The item at `index` (see [`PSeq::get`]).
    pub fn get(&self, tx: &Tx, index: i64) -> Result<Option<Vec<u8>>> {
        self.0.get_tx(tx, index)
    }
    /// Items from `start` to `end` (see [`PSeq::range`]); `rev`: last first.
    pub fn range(&self, tx: &Tx, start: i64, end: i64, rev: bool) -> Result<Vec<Vec<u8>>> {
        self.0.range_tx(tx, start, end, rev)
    }
    /// Items from `start` to `end` handed to `f` (see [`PSeq::range_each_tx`]).
    pub fn range_each(
        &self,
        tx: &Tx,
        start: i64,
        end: i64,
        rev: bool,
        f: impl FnMut(&[u8]),
    ) -> Result<u64> {
        self.0.range_each_tx(tx, start, end, rev, f)
    }
    /// Iterate from `from` (see [`PSeq::iter`]).
    pub fn iter<'a, 'p>(&self, tx: &'a Tx<'p>, from: i64, rev: bool) -> Result<SeqIter<'a, 'p>> {
        self.0.iter_tx(tx, from, rev)
    }
    /// Redis's LPOS (see [`PSeq::position`]).
    pub fn position(
        &self,
        tx: &Tx,
        value: &[u8],
        rank: i64,
        count: u64,
        maxlen: u64,
    ) -> Result<Vec<u64>> {
        self.0.position_tx(tx, value, rank, count, maxlen)
    }
    /// Push at the tail; returns the new length.
    pub fn push_back(&mut self, tx: &mut Tx, item: &[u8]) -> Result<u64> {
        self.0.push_back_tx(tx, item)
    }
    /// Push at the head; returns the new length.
    pub fn push_front(&mut self, tx: &mut Tx, item: &[u8]) -> Result<u64> {
        self.0.push_front_tx(tx, item)
    }
    /// Push several at the tail (see [`PSeq::push_back_many`]).
    pub fn push_back_many(&mut self, tx: &mut Tx, items: &[&[u8]]) -> Result<u64> {
        self.0.push_back_many_tx(tx, items)
    }
    /// Push several at the head (see [`PSeq::push_front_many`]).
    pub fn push_front_many(&mut self, tx: &mut Tx, items: &[&[u8]]) -> Result<u64> {
        self.0.push_front_many_tx(tx, items)
    }
    /// Remove and return the first item.
    pub fn pop_front(&mut self, tx: &mut Tx) -> Result<Option<Vec<u8>>> {
        self.0.pop_front_tx(tx)
    }
    /// Remove and return the last item.
    pub fn pop_back(&mut self, tx: &mut Tx) -> Result<Option<Vec<u8>>> {
        self.0.pop_back_tx(tx)
    }
    /// Remove and return up to `count` items from the head.
    pub fn pop_front_n(&mut self, tx: &mut Tx, count: u64) -> Result<Vec<Vec<u8>>> {
        self.0.pop_front_n_tx(tx, count)
    }
    /// Remove and return up to `count` items from the tail, last first.
    pub fn pop_back_n(&mut self, tx: &mut Tx, count: u64) -> Result<Vec<Vec<u8>>> {
        self.0.pop_back_n_tx(tx, count)
    }
    /// Replace the item at `index` (see [`PSeq::set`]).
    pub fn set(&mut self, tx: &mut Tx, index: i64, item: &[u8]) -> Result<()> {
        self.0.set_tx(tx, index, item)
    }
    /// Insert at position `index` (see [`PSeq::insert_at`]).
    pub fn insert_at(&mut self, tx: &mut Tx, index: u64, item: &[u8]) -> Result<u64> {
        self.0.insert_at_tx(tx, index, item)
    }
    /// Insert before the item at `index` (see [`PSeq::insert_before`]).
    pub fn insert_before(&mut self, tx: &mut Tx, index: i64, item: &[u8]) -> Result<u64> {
        self.0.insert_before_tx(tx, index, item)
    }
    /// Insert after the item at `index`.
    pub fn insert_after(&mut self, tx: &mut Tx, index: i64, item: &[u8]) -> Result<u64> {
        self.0.insert_after_tx(tx, index, item)
    }
    /// Remove and return the item at `index`.
    pub fn remove_at(&mut self, tx: &mut Tx, index: i64) -> Result<Vec<u8>> {
        self.0.remove_at_tx(tx, index)
    }
    /// Redis's LREM (see [`PSeq::remove_value`]).
    pub fn remove_value(&mut self, tx: &mut Tx, value: &[u8], count: i64) -> Result<u64> {
        self.0.remove_value_tx(tx, value, count)
    }
    /// Redis's LTRIM (see [`PSeq::trim_tx`]: garbage may be left to collect).
    pub fn trim(&mut self, tx: &mut Tx, start: i64, end: i64) -> Result<()> {
        self.0.trim_tx(tx, start, end)
    }
    /// Remove every item (see [`PSeq::clear_tx`]).
    pub fn clear(&mut self, tx: &mut Tx) -> Result<()> {
        self.0.clear_tx(tx)
    }
    /// Free garbage (see [`PSeq::collect_garbage_tx`]); true when none is left.
    pub fn collect_garbage(&mut self, tx: &mut Tx, budget: u32) -> Result<bool> {
        self.0.collect_garbage_tx(tx, budget)
    }
    /// Whether garbage waits to be freed.
    pub fn has_garbage(&self, tx: &Tx) -> Result<bool> {
        self.0.has_garbage_tx(tx)
    }
}

/// An iterator over a sequence's items from a starting index, forward or backward, from
/// [`PSeq::iter`] or [`SeqView::iter`]. Reads one chunk's window at a time. An error (a
/// damaged chunk) ends the iteration after it is returned.
pub struct SeqIter<'a, 'p> {
    src: Src<'a, 'p>,
    core: Core,
    rev: bool,
    /// The current chunk's window, its items, and the next one to yield.
    chunk: Option<Chunk>,
    win: Vec<u8>,
    elems: Vec<Elem>,
    pos: usize,
    /// Items left to yield (bounds the walk on damaged chains).
    left: u64,
    chunks_left: u64,
}

impl<'a, 'p> SeqIter<'a, 'p> {
    fn new(src: Src<'a, 'p>, core: Core, from: i64, rev: bool) -> Result<Self> {
        let h = core.header(&src)?;
        let mut it = SeqIter {
            src,
            core,
            rev,
            chunk: None,
            win: Vec::new(),
            elems: Vec::new(),
            pos: 0,
            left: 0,
            chunks_left: h.chunks,
        };
        let Some(i) = norm_index(from, h.len) else {
            return Ok(it);
        };
        let (c, k) = core.locate(&it.src, &h, i)?;
        it.left = if rev { i + 1 } else { h.len - i };
        it.load(c)?;
        it.pos = if rev { k as usize + 1 } else { k as usize };
        Ok(it)
    }

    fn load(&mut self, c: Chunk) -> Result<()> {
        self.win = self.core.window(&self.src, &c)?;
        self.elems = self.core.elems(&self.src, &c, &self.win)?;
        self.pos = if self.rev { self.elems.len() } else { 0 };
        self.chunk = Some(c);
        Ok(())
    }

    fn step(&mut self) -> Result<Option<Vec<u8>>> {
        if self.left == 0 {
            return Ok(None);
        }
        loop {
            let c = self.chunk.expect("a chunk while items are left");
            let have = if self.rev {
                self.pos > 0
            } else {
                self.pos < self.elems.len()
            };
            if have {
                let e = if self.rev {
                    self.pos -= 1;
                    self.elems[self.pos]
                } else {
                    self.pos += 1;
                    self.elems[self.pos - 1]
                };
                self.left -= 1;
                return Ok(Some(self.core.value(&self.src, &self.win, &e)?));
            }
            let n = if self.rev { c.prev } else { c.next };
            if n == 0 || self.chunks_left == 0 {
                return Err(self
                    .core
                    .corrupt(&self.src, "chain shorter than its length"));
            }
            self.chunks_left -= 1;
            let next = self.core.chunk(&self.src, n)?;
            self.load(next)?;
        }
    }
}

impl Iterator for SeqIter<'_, '_> {
    type Item = Result<Vec<u8>>;
    fn next(&mut self) -> Option<Self::Item> {
        match self.step() {
            Ok(v) => v.map(Ok),
            Err(e) => {
                self.left = 0;
                Some(Err(e))
            }
        }
    }
}

// ---- checkers ----

/// What a walk of a sequence found: its objects and problems.
struct Walk {
    objects: Vec<u64>,
    items: Vec<Vec<u8>>,
    problems: Vec<String>,
    count: u64,
    chunks: u64,
    /// Objects met so far (the header, chunks, item objects): each may be owned once.
    seen: HashSet<u64>,
}

/// Walk the sequence at `hdr` read-only, checking every invariant (module docs). With
/// `want_items`, the live items are collected too. Never panics on damaged media.
fn walk(inner: &PoolInner, hdr: u64, want_items: bool) -> std::result::Result<Walk, String> {
    let src = Src::Pool(inner);
    let h = valid_header(&src, hdr).map_err(|e| e.to_string())?;
    let core = Core {
        hdr,
        cb: h.chunk_bytes,
    };
    let mut r = Walk {
        objects: vec![hdr],
        items: Vec::new(),
        problems: Vec::new(),
        count: 0,
        chunks: 0,
        seen: HashSet::from([hdr]),
    };
    let max_steps = inner.heap_end() / core.cb as u64 + 1;
    if h.flags & FLAG_FREEING != 0 && (h.head != 0 || h.len != 0 || h.chunks != 0) {
        r.problems
            .push("sequence being freed still has live items or chunks".into());
    }
    // One chunk: its allocation, header and items (the chunk, or why it is unusable).
    let chunk_items = |c: u64, r: &mut Walk, live: bool| -> std::result::Result<Chunk, String> {
        let size = inner
            .allocated_object(c)
            .map_err(|why| format!("chunk {c:#x} is not an allocated object: {why}"))?;
        if size < core.cb as u64 {
            return Err(format!(
                "chunk {c:#x} is a {size}-byte object, smaller than a chunk"
            ));
        }
        let ch = core.chunk(&src, c).map_err(|e| e.to_string())?;
        let w = core.window(&src, &ch).map_err(|e| e.to_string())?;
        let Some(elems) = parse_all(&w) else {
            return Err(format!("chunk {c:#x}: items do not parse exactly"));
        };
        if elems.len() != ch.count as usize {
            return Err(format!(
                "chunk {c:#x}: count {} but {} items",
                ch.count,
                elems.len()
            ));
        }
        for e in &elems {
            if e.big() {
                let obj = e.obj(&w);
                if e.len() <= core.inline_max() {
                    r.problems.push(format!(
                        "chunk {c:#x}: a {}-byte item out of line (limit {})",
                        e.len(),
                        core.inline_max()
                    ));
                }
                match inner.allocated_object(obj) {
                    Ok(sz) if sz >= e.len() => {}
                    Ok(sz) => r.problems.push(format!(
                        "chunk {c:#x}: item object {obj:#x} of {sz} bytes holds {} bytes",
                        e.len()
                    )),
                    Err(why) => r.problems.push(format!(
                        "chunk {c:#x}: item object {obj:#x} is not an allocated object: {why}"
                    )),
                }
                if !r.seen.insert(obj) {
                    r.problems
                        .push(format!("chunk {c:#x}: item object {obj:#x} owned twice"));
                } else {
                    r.objects.push(obj);
                }
            } else if e.len() > core.inline_max() {
                r.problems.push(format!(
                    "chunk {c:#x}: a {}-byte item inline (limit {})",
                    e.len(),
                    core.inline_max()
                ));
            }
            if live && want_items {
                match core.value(&src, &w, e) {
                    Ok(v) => r.items.push(v),
                    Err(err) => r.problems.push(format!("chunk {c:#x}: {err}")),
                }
            }
        }
        Ok(ch)
    };
    // The live chain.
    let (mut c, mut prev) = (h.head, 0u64);
    while c != 0 {
        if r.chunks >= max_steps || !r.seen.insert(c) {
            r.problems.push(format!(
                "chunk {c:#x} appears twice (a cycle or a shared chunk)"
            ));
            break;
        }
        r.objects.push(c);
        let ch = match chunk_items(c, &mut r, true) {
            Ok(ch) => ch,
            Err(e) => {
                r.problems.push(e);
                break;
            }
        };
        r.chunks += 1;
        r.count += ch.count as u64;
        if ch.prev != prev {
            r.problems.push(format!(
                "chunk {c:#x}: prev is {:#x}, the chunk before it is {prev:#x}",
                ch.prev
            ));
        }
        if ch.count == 0 && !(h.head == c && h.tail == c) {
            r.problems
                .push(format!("chunk {c:#x} is empty but not the sole chunk"));
        }
        if ch.next == 0 && c != h.tail {
            r.problems.push(format!(
                "the chain ends at {c:#x}, the tail is {:#x}",
                h.tail
            ));
        }
        prev = c;
        c = ch.next;
    }
    if r.count != h.len {
        r.problems.push(format!(
            "header len is {} but the chunks hold {} items",
            h.len, r.count
        ));
    }
    if r.chunks != h.chunks {
        r.problems.push(format!(
            "header counts {} chunks, the chain has {}",
            h.chunks, r.chunks
        ));
    }
    // The garbage chain.
    let (mut g, mut steps) = (h.garbage, 0u64);
    while g != 0 {
        steps += 1;
        if steps > max_steps || !r.seen.insert(g) {
            r.problems.push(format!(
                "garbage chunk {g:#x} appears twice (a cycle or a live chunk)"
            ));
            break;
        }
        r.objects.push(g);
        match chunk_items(g, &mut r, false) {
            Ok(ch) => g = ch.next,
            Err(e) => {
                r.problems.push(format!("garbage: {e}"));
                break;
            }
        }
    }
    Ok(r)
}

/// Check the sequence at `hdr` (read-only); `daisy pool check` runs this on every sequence.
pub(crate) fn check_seq(inner: &PoolInner, hdr: u64) -> MapCheck {
    let mut out = MapCheck {
        header: hdr,
        kind: WHAT,
        ..Default::default()
    };
    match walk(inner, hdr, false) {
        Ok(w) => {
            out.entries = w.count;
            out.segments = w.chunks;
            out.problems = w.problems;
            out.objects = w.objects;
        }
        Err(e) => {
            out.objects = vec![hdr];
            out.problems.push(e);
        }
    }
    out
}

/// Every object the sequence at `hdr` owns: header, chunks (live and garbage) and out-of-line
/// items. For leak checks that walk a layout from its root. Errors when the sequence is
/// damaged (a broken chain, an invalid chunk). Read-only.
pub fn seq_objects(pool: &Pool, hdr: u64) -> Result<Vec<u64>> {
    let w = walk(&pool.inner, hdr, false).map_err(|why| Error::NotACollection {
        offset: hdr,
        what: WHAT,
        why,
    })?;
    match w.problems.first() {
        Some(p) => Err(Error::corrupt(
            &pool.inner.path,
            format!("sequence at {hdr:#x}: {p}"),
        )),
        None => Ok(w.objects),
    }
}

/// Every item of the sequence at `hdr`, head first (for checkers that compare contents).
/// Errors when the sequence is damaged. Read-only.
pub fn seq_items(pool: &Pool, hdr: u64) -> Result<Vec<Vec<u8>>> {
    let w = walk(&pool.inner, hdr, true).map_err(|why| Error::NotACollection {
        offset: hdr,
        what: WHAT,
        why,
    })?;
    match w.problems.first() {
        Some(p) => Err(Error::corrupt(
            &pool.inner.path,
            format!("sequence at {hdr:#x}: {p}"),
        )),
        None => Ok(w.items),
    }
}

/// Whether the object at `off` starts with a sequence header of any format (for `check_all`).
pub(crate) fn looks_like_seq(inner: &PoolInner, off: u64) -> bool {
    Src::Pool(inner)
        .read_pod::<SeqHeader>(off)
        .is_ok_and(|h| h.magic == SEQ_MAGIC && h.crc == h.immutable_crc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leb_round_trips_both_ways() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u32::MAX as u64 * 2 + 1,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            encode_into(&mut out, v, &[]);
            let (a, n) = get_leb(&out).unwrap();
            assert_eq!((a, n), (v, leb_len(v)));
            let (b, m) = get_leb_rev(&out).unwrap();
            assert_eq!((b, m), (v, n));
        }
        // Overlong encodings are refused (one encoding per value).
        assert!(get_leb(&[0x80, 0x00]).is_none());
    }

    #[test]
    fn items_parse_from_both_ends() {
        let mut w = Vec::new();
        encode_into(&mut w, 3 << 1, b"abc");
        encode_into(&mut w, 0, b"");
        encode_into(&mut w, 200 << 1, &[7u8; 200]);
        let all = parse_all(&w).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].payload(&w), b"abc");
        let last = parse_back(&w, w.len()).unwrap();
        assert_eq!(last.at, all[2].at);
        let mid = parse_back(&w, all[1].end()).unwrap();
        assert_eq!(mid.len(), 0);
        // A damaged trailer is refused.
        let n = w.len();
        w[n - 1] ^= 1;
        assert!(parse_all(&w).is_none());
    }

    #[test]
    fn redis_ranges() {
        assert_eq!(redis_range(0, -1, 5), Some((0, 4)));
        assert_eq!(redis_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(redis_range(3, 1, 5), None);
        assert_eq!(redis_range(5, 10, 5), None);
        assert_eq!(redis_range(-2, -1, 5), Some((3, 4)));
        assert_eq!(redis_range(0, 0, 0), None);
        assert_eq!(redis_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(norm_index(-1, 3), Some(2));
        assert_eq!(norm_index(-4, 3), None);
        assert_eq!(norm_index(3, 3), None);
    }
}
