//! The kinds of damage, and what opening a damaged image must do.

use super::records::{edit_record, forge_record};
use super::templates::Template;
use super::*;

// ---------------------------------------------------------------------------------------------
// Mutations

/// What an image must do when opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Open must fail.
    Refused,
    /// Open must fail, or `check` / `objects` must report the damage.
    Detected,
    /// Anything but a panic (the damage may be harmless, or undetectable by design).
    Any,
}

pub(crate) struct Image {
    pub(crate) bytes: Vec<u8>,
    pub(crate) what: String,
    pub(crate) expect: Expect,
}

pub(crate) const KINDS: u64 = 11;

pub(crate) fn mutate(rng: &mut StdRng, t: &Template, kind: u64) -> Image {
    let mut img = t.bytes.clone();
    let h = &t.hdr;
    let max_chunks = (h.max_size - h.heap_off) / CHUNK_SIZE;
    let heap_chunks = (t.heap_end - h.heap_off) / CHUNK_SIZE;
    let (what, expect) = match kind {
        // Header bytes: all of them are covered by the magic, the version or the checksum.
        0 => {
            let n = rng.gen_range(1..=4);
            (
                flip_bytes(rng, &mut img, 0, HEADER_BYTES as u64, n),
                Expect::Refused,
            )
        }
        // Header geometry with a valid checksum: exercises the range checks themselves.
        1 => {
            let mut hdr = *h;
            let mut what = Vec::new();
            for _ in 0..rng.gen_range(1..=2) {
                match rng.gen_range(0..10) {
                    0 => hdr.max_size = interesting(rng, hdr.max_size),
                    1 => hdr.lanes_off = interesting(rng, hdr.lanes_off),
                    2 => hdr.chunk_table_off = interesting(rng, hdr.chunk_table_off),
                    3 => hdr.heap_off = interesting(rng, hdr.heap_off),
                    4 => hdr.lane_count = interesting(rng, hdr.lane_count as u64) as u32,
                    5 => hdr.slots_per_lane = interesting(rng, hdr.slots_per_lane as u64) as u32,
                    6 => hdr.slot_size = interesting(rng, hdr.slot_size as u64) as u32,
                    7 => hdr.chunk_size = interesting(rng, hdr.chunk_size as u64) as u32,
                    8 => {
                        // Shift the heap and table consistently (aligned, plausible values).
                        let d = rng.gen_range(1..64u64) * 4096;
                        if rng.gen_bool(0.5) {
                            hdr.heap_off += d;
                            hdr.max_size += d;
                        } else {
                            hdr.chunk_table_off += d;
                            hdr.heap_off += d;
                        }
                    }
                    _ => hdr.max_size = hdr.heap_off + rng.gen_range(0..40) * CHUNK_SIZE,
                }
            }
            hdr.checksum = hdr.compute_checksum();
            img[..HEADER_BYTES].copy_from_slice(bytemuck::bytes_of(&hdr));
            what.push(format!(
                "header max_size={:#x} lanes_off={:#x} chunk_table_off={:#x} heap_off={:#x} \
                 lanes={} slots={} slot_size={} chunk_size={} (checksum recomputed)",
                hdr.max_size,
                hdr.lanes_off,
                hdr.chunk_table_off,
                hdr.heap_off,
                hdr.lane_count,
                hdr.slots_per_lane,
                hdr.slot_size,
                hdr.chunk_size
            ));
            (what.join("; "), Expect::Any)
        }
        // State page words.
        2 => {
            let field = rng.gen_range(0..5);
            if field == 4 {
                let n = rng.gen_range(1..=3);
                (
                    flip_bytes(rng, &mut img, STATE_OFF, STATE_OFF + 32, n),
                    Expect::Any,
                )
            } else {
                let off = [
                    STATE_WATERMARK,
                    STATE_HEAP_END,
                    STATE_ROOT_OFF,
                    STATE_ROOT_SIZE,
                ][field];
                let old = get_u64(&img, off);
                let base = match rng.gen_range(0..4) {
                    0 => old,
                    1 => h.heap_off,
                    2 => t.heap_end,
                    _ => h.max_size,
                };
                let v = interesting(rng, base);
                put_u64(&mut img, off, v);
                let expect = if field == 1
                    && (v < h.heap_off + CHUNK_SIZE
                        || v > t.bytes.len() as u64
                        || !(v - h.heap_off).is_multiple_of(CHUNK_SIZE))
                {
                    Expect::Refused
                } else {
                    Expect::Any
                };
                (format!("state word {off:#x}: {old:#x} -> {v:#x}"), expect)
            }
        }
        // Log area: flips and word overwrites, mostly in slots that hold records.
        3 => {
            let mut what = Vec::new();
            for _ in 0..rng.gen_range(1..=3) {
                let slot = if rng.gen_bool(0.7) {
                    t.records[rng.gen_range(0..t.records.len())]
                } else {
                    t.slot_off(rng.gen_range(0..t.slot_count()))
                };
                let span = if rng.gen_bool(0.6) { 64 } else { 512 };
                if rng.gen_bool(0.5) {
                    what.push(flip_bytes(rng, &mut img, slot, slot + span, 1));
                } else {
                    let o = slot + rng.gen_range(0..span / 8) * 8;
                    let v = interesting(rng, get_u64(&img, o));
                    put_u64(&mut img, o, v);
                    what.push(format!("log word {o:#x} = {v:#x}"));
                }
            }
            (what.join("; "), Expect::Any)
        }
        // A checksummed record with bad contents: edit an existing record, or forge a new one.
        4 => {
            let what = if rng.gen_bool(0.5) {
                edit_record(rng, t, &mut img)
            } else {
                forge_record(rng, t, &mut img)
            };
            (what, Expect::Any)
        }
        // Chunk table entries.
        5 => {
            let mut what = Vec::new();
            let mut expect = Expect::Any;
            for _ in 0..rng.gen_range(1..=3) {
                let c = match rng.gen_range(0..5) {
                    0 | 1 => t.live_chunks[rng.gen_range(0..t.live_chunks.len())],
                    2 | 3 => rng.gen_range(0..heap_chunks),
                    _ => rng.gen_range(0..max_chunks),
                };
                let off = h.chunk_table_off + c * 8;
                if rng.gen_bool(0.3) {
                    what.push(flip_bytes(rng, &mut img, off, off + 8, 1));
                } else {
                    let v = random_chunk_word(rng, max_chunks);
                    put_u64(&mut img, off, v);
                    what.push(format!("chunk {c} entry = {v:#x}"));
                }
            }
            // An invalid encoding inside the heap must always be noticed (check walks every
            // entry); later edits may hide one behind a LARGE head, so look at the final image.
            // (Not in the crashed template: replay may legitimately overwrite the entry.)
            if t.name == "clean" && invalid_entry_visible(&img, h, heap_chunks) {
                expect = Expect::Detected;
            }
            (what.join("; "), expect)
        }
        // Run bitmaps.
        6 => {
            let (start, bitmap, blocks) = t.runs[rng.gen_range(0..t.runs.len())];
            match rng.gen_range(0..3) {
                0 => {
                    let n = rng.gen_range(1..=4);
                    (
                        flip_bytes(rng, &mut img, start, start + bitmap, n),
                        Expect::Any,
                    )
                }
                1 => {
                    let o = start + rng.gen_range(0..bitmap / 8) * 8;
                    let v = if rng.gen_bool(0.5) {
                        u64::MAX
                    } else {
                        rng.gen()
                    };
                    put_u64(&mut img, o, v);
                    (format!("bitmap word {o:#x} = {v:#x}"), Expect::Any)
                }
                _ => {
                    // Set every bit of the bitmap: check must notice bits past the last block.
                    img[start as usize..(start + bitmap) as usize].fill(0xff);
                    let expect = if bitmap * 8 > blocks {
                        Expect::Detected
                    } else {
                        Expect::Any
                    };
                    (format!("bitmap at {start:#x} all ones"), expect)
                }
            }
        }
        // Truncation.
        7 => {
            let len = t.bytes.len() as u64;
            let cuts = [
                0,
                1,
                7,
                8,
                11,
                12,
                HEADER_BYTES as u64 - 1,
                HEADER_BYTES as u64,
                HEADER_SIZE,
                STATE_OFF + 16,
                h.lanes_off,
                h.chunk_table_off,
                h.heap_off,
                h.heap_off + CHUNK_SIZE - 1,
                t.heap_end - 1,
            ];
            let cut = if rng.gen_bool(0.4) {
                cuts[rng.gen_range(0..cuts.len())]
            } else {
                rng.gen_range(0..len)
            };
            img.truncate(cut as usize);
            (format!("truncated to {cut} bytes"), Expect::Refused)
        }
        // Foreign files: empty, random junk, junk behind a magic (and version), zeros.
        8 => {
            let len = rng.gen_range(0..128 << 10);
            let mut junk = vec![0u8; len];
            rng.fill(&mut junk[..]);
            let (what, expect) = match rng.gen_range(0..6) {
                0 => {
                    junk.clear();
                    ("empty file".to_string(), Expect::Refused)
                }
                1 => (format!("{len} random bytes"), Expect::Refused),
                2 => {
                    let n = len.min(8);
                    junk[..n].copy_from_slice(&t.bytes[..n]);
                    (format!("magic + {len} random bytes"), Expect::Refused)
                }
                3 => {
                    let n = len.min(12);
                    junk[..n].copy_from_slice(&t.bytes[..n]);
                    (
                        format!("magic, version + {len} random bytes"),
                        Expect::Refused,
                    )
                }
                4 => {
                    let n = len.min(HEADER_SIZE as usize);
                    junk[..n].copy_from_slice(&t.bytes[..n]);
                    (
                        format!("valid header + {len} random bytes"),
                        Expect::Refused,
                    )
                }
                _ => {
                    junk = vec![0u8; t.bytes.len()];
                    ("all zeros".to_string(), Expect::Refused)
                }
            };
            img = junk;
            (what, expect)
        }
        // Bytes nobody reads (header padding, the rest of the state page), and junk appended
        // past the heap end: must be harmless.
        9 => {
            let what = match rng.gen_range(0..3) {
                0 => flip_bytes(rng, &mut img, HEADER_BYTES as u64, HEADER_SIZE, 4),
                1 => flip_bytes(rng, &mut img, STATE_OFF + 32, STATE_OFF + STATE_SIZE, 4),
                _ => {
                    let n = rng.gen_range(1..3 * CHUNK_SIZE as usize);
                    let mut junk = vec![0u8; n];
                    rng.fill(&mut junk[..]);
                    img.extend_from_slice(&junk);
                    format!("{n} junk bytes appended")
                }
            };
            (what, Expect::Any)
        }
        // Several metadata regions at once.
        _ => {
            let mut what = Vec::new();
            for _ in 0..rng.gen_range(2..=3) {
                let k = [2, 3, 4, 5, 6][rng.gen_range(0..5)];
                let sub = mutate(rng, t, k);
                // Apply the sub-mutation's changes on top of ours (all keep the length).
                for (i, (a, b)) in sub.bytes.iter().zip(t.bytes.iter()).enumerate() {
                    if a != b {
                        img[i] = *a;
                    }
                }
                what.push(sub.what);
            }
            (what.join(" + "), Expect::Any)
        }
    };
    // A third of the images of the other kinds carry the previous format's header (version 2,
    // checksum recomputed). It is read like version 3 and marked 3 only by an open that gets
    // past every check, so a refused open must leave it unchanged like any other image.
    let mut what = what;
    if kind > 1 && img.len() >= HEADER_BYTES && rng.gen_ratio(1, 3) {
        let mut hdr: Header = bytemuck::pod_read_unaligned(&img[..HEADER_BYTES]);
        hdr.format_version = 2;
        hdr.checksum = hdr.compute_checksum();
        img[..HEADER_BYTES].copy_from_slice(bytemuck::bytes_of(&hdr));
        what.push_str(" (version-2 header)");
    }
    Image {
        bytes: img,
        what,
        expect,
    }
}

/// Whether the image has a chunk table entry with an invalid encoding that a walk from chunk 0
/// reaches (one inside a LARGE object's span is skipped by design).
fn invalid_entry_visible(img: &[u8], h: &Header, heap_chunks: u64) -> bool {
    let mut c = 0;
    while c < heap_chunks {
        match ChunkEntry::decode(get_u64(img, h.chunk_table_off + c * 8)) {
            None => return true,
            Some(ChunkEntry::Large { chunks }) => c += chunks as u64,
            Some(_) => c += 1,
        }
    }
    false
}
