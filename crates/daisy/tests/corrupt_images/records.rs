//! Damage to the redo log: records edited or forged, their checksums made valid again.

use super::templates::Template;
use super::*;

/// Rewrite a record's header fields or one entry, then fix its checksum.
pub(crate) fn edit_record(rng: &mut StdRng, t: &Template, img: &mut [u8]) -> String {
    let slot = t.records[rng.gen_range(0..t.records.len())];
    let mut lh: LogHeader =
        bytemuck::pod_read_unaligned(&img[slot as usize..slot as usize + LOG_HEADER_SIZE]);
    let max_payload = t.hdr.slot_size as usize - LOG_HEADER_SIZE;
    let what;
    match rng.gen_range(0..6) {
        0 => {
            lh.seq = interesting(rng, lh.seq);
            what = format!("seq = {:#x}", lh.seq);
        }
        1 => {
            lh.claim = interesting(rng, lh.claim);
            what = format!("claim = {:#x}", lh.claim);
        }
        2 => {
            lh.payload_len = interesting(rng, lh.payload_len as u64) as u32;
            what = format!("payload_len = {}", lh.payload_len);
        }
        3 => {
            lh.n_entries = interesting(rng, lh.n_entries as u64) as u32;
            what = format!("n_entries = {}", lh.n_entries);
        }
        _ => {
            // One word of the payload (entry targets, kind/length words, data).
            let words = (lh.payload_len as u64 / 8).max(1);
            let o = slot + LOG_HEADER_SIZE as u64 + rng.gen_range(0..words) * 8;
            let v = interesting(rng, get_u64(img, o));
            put_u64(img, o, v);
            // Make it replay: a record the watermark covers is never applied.
            lh.seq = lh.seq.max(t.watermark + 1 + rng.gen_range(0..4));
            what = format!("payload word {o:#x} = {v:#x}, seq {}", lh.seq);
        }
    }
    let plen = (lh.payload_len as usize).min(max_payload);
    let payload = &img[slot as usize + LOG_HEADER_SIZE..slot as usize + LOG_HEADER_SIZE + plen];
    lh.checksum = daisy::internals::record_checksum(&lh, payload);
    img[slot as usize..slot as usize + LOG_HEADER_SIZE].copy_from_slice(bytemuck::bytes_of(&lh));
    format!("record at {slot:#x}: {what} (checksum recomputed)")
}

/// Write a new, checksummed record whose entries change metadata: the state page words, chunk
/// table entries, bitmaps, or targets at the edges of (or outside) the data area.
pub(crate) fn forge_record(rng: &mut StdRng, t: &Template, img: &mut [u8]) -> String {
    let h = &t.hdr;
    let max_chunks = (h.max_size - h.heap_off) / CHUNK_SIZE;
    let heap_chunks = (t.heap_end - h.heap_off) / CHUNK_SIZE;
    let slot = t.slot_off(rng.gen_range(0..t.slot_count()));
    let mut payload = Vec::new();
    let mut what = Vec::new();
    let n = rng.gen_range(1..=3);
    for _ in 0..n {
        let (target, kind, data): (u64, EntryKind, Vec<u8>) = match rng.gen_range(0..7) {
            0 => {
                let off = [
                    STATE_WATERMARK,
                    STATE_HEAP_END,
                    STATE_ROOT_OFF,
                    STATE_ROOT_SIZE,
                ][rng.gen_range(0..4)];
                let base =
                    [get_u64(img, off), h.heap_off, t.heap_end, h.max_size][rng.gen_range(0..4)];
                (
                    off,
                    EntryKind::Copy,
                    interesting(rng, base).to_le_bytes().to_vec(),
                )
            }
            1 => {
                // Several state words at once, at an unaligned start.
                let off = STATE_OFF + rng.gen_range(0..24);
                let mut d = vec![0u8; rng.gen_range(1..=24)];
                rng.fill(&mut d[..]);
                (off, EntryKind::Copy, d)
            }
            2 => {
                let c = rng.gen_range(0..max_chunks);
                let w = random_chunk_word(rng, max_chunks);
                (
                    h.chunk_table_off + c * 8,
                    EntryKind::Copy,
                    w.to_le_bytes().to_vec(),
                )
            }
            3 => {
                let (start, bitmap, _) = t.runs[rng.gen_range(0..t.runs.len())];
                let o = start + rng.gen_range(0..bitmap / 8) * 8;
                let k = if rng.gen_bool(0.5) {
                    EntryKind::Or
                } else {
                    EntryKind::AndNot
                };
                (o, k, rng.gen::<u64>().to_le_bytes().to_vec())
            }
            4 => {
                // Right at the end of the heap (or just past it).
                let len = rng.gen_range(1..64);
                let o = t.heap_end - len + rng.gen_range(0..2);
                (o, EntryKind::Copy, vec![0xee; len as usize])
            }
            5 => {
                // The header or the lanes: never a legal target.
                let o = if rng.gen_bool(0.5) {
                    rng.gen_range(0..HEADER_SIZE)
                } else {
                    h.lanes_off + rng.gen_range(0..h.chunk_table_off - h.lanes_off)
                };
                (o, EntryKind::Copy, vec![0x11; 8])
            }
            _ => {
                // Into a heap chunk, possibly a run's data or a covered chunk.
                let o = h.heap_off + rng.gen_range(0..heap_chunks * CHUNK_SIZE - 8);
                (o, EntryKind::Copy, rng.gen::<u64>().to_le_bytes().to_vec())
            }
        };
        let eh = EntryHeader::new(target, kind, data.len() as u64);
        payload.extend_from_slice(bytemuck::bytes_of(&eh));
        payload.extend_from_slice(&data);
        payload.resize(payload.len().next_multiple_of(8), 0);
        what.push(format!("{kind:?} {target:#x}+{}", data.len()));
    }
    debug_assert!(payload.len() + LOG_HEADER_SIZE <= h.slot_size as usize);
    let seq = match rng.gen_range(0..4) {
        0 => u64::MAX,
        1 => t.watermark.max(1), // covered by the watermark: never replayed
        _ => t.watermark + 1 + rng.gen_range(0..40),
    };
    let claim = if rng.gen_bool(0.8) {
        rng.gen_range(0..seq)
    } else {
        interesting(rng, seq)
    };
    let mut lh = LogHeader {
        checksum: 0,
        magic: LOG_MAGIC,
        seq,
        claim,
        payload_len: payload.len() as u32,
        n_entries: n,
    };
    lh.checksum = daisy::internals::record_checksum(&lh, &payload);
    let s = slot as usize;
    img[s..s + LOG_HEADER_SIZE].copy_from_slice(bytemuck::bytes_of(&lh));
    img[s + LOG_HEADER_SIZE..s + LOG_HEADER_SIZE + payload.len()].copy_from_slice(&payload);
    format!(
        "forged record at {slot:#x} seq={seq:#x} claim={claim:#x}: {}",
        what.join(", ")
    )
}
