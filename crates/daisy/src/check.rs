//! `pool check`: everything the allocator metadata, the logs and a layout's walker can tell
//! about a pool's consistency, read-only (docs/FORMAT.md section 9).

use crate::layout::*;
use crate::log::{self, SlotState, TargetBounds};
use crate::shared::PoolInner;
use std::sync::atomic::Ordering;

/// Result of [`Pool::check`](crate::Pool::check).
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// What does not hold (empty: the pool is sound).
    pub problems: Vec<String>,
    /// Allocated objects.
    pub objects: u64,
    /// Bytes in allocated objects.
    pub used: u64,
    /// Valid log records.
    pub log_records: usize,
    /// Whether reachability was verified (it needs a walker that knows the layout).
    pub reachability_checked: bool,
    /// Objects the walker reached.
    pub reachable: u64,
}

impl CheckReport {
    /// Whether no problem was found.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl PoolInner {
    pub fn check(&self, reachable: Option<&[u64]>) -> CheckReport {
        let mut r = CheckReport::default();
        let st = self.state();
        let chunks = self.heap_chunks();
        // Allocator metadata.
        for (c, entry) in self.chunks() {
            match entry {
                Some(ChunkEntry::Free) => {}
                Some(ChunkEntry::Large { chunks: n }) => {
                    if c + n as u64 > chunks {
                        r.problems.push(format!(
                            "chunk {c}: large object of {n} chunks runs past the heap end"
                        ));
                        continue;
                    }
                    for k in 1..n as u64 {
                        if self.chunk_entry(c + k) != Some(ChunkEntry::Free) {
                            r.problems.push(format!(
                                "chunk {}: covered by the large object at chunk {c} but not FREE",
                                c + k
                            ));
                        }
                    }
                }
                Some(ChunkEntry::Run { class }) => {
                    let (n, data_off) = run_geometry(class as usize);
                    let base = self.geo.chunk_start(c);
                    let words = data_off as u64 / 8;
                    for w in 0..words {
                        let bits: u64 = self.map.read(base + w * 8);
                        let first = w * 64;
                        let valid = if first >= n as u64 {
                            0
                        } else if n as u64 - first >= 64 {
                            u64::MAX
                        } else {
                            (1u64 << (n as u64 - first)) - 1
                        };
                        if bits & !valid != 0 {
                            r.problems.push(format!(
                                "chunk {c}: run bitmap word {w} has bits set beyond block {n}"
                            ));
                        }
                    }
                }
                None => r.problems.push(format!(
                    "chunk {c}: chunk table entry has an invalid encoding"
                )),
            }
        }
        for c2 in chunks..self.geo.max_chunks {
            let w: u64 = self.map.read(self.geo.chunk_entry_off(c2));
            if w != CHUNK_FREE {
                r.problems
                    .push(format!("chunk {c2}: beyond the heap end but not FREE"));
                break;
            }
        }
        // Logs: every slot is validated here (open reads only the records that can matter:
        // recovery.rs, `scan`): a slot that is neither empty nor a valid record, other than the
        // one a lane may have been writing (after its newest record), is damage.
        let bounds = TargetBounds {
            chunk_table_off: self.hdr.chunk_table_off,
            data_end: st.heap_end,
        };
        let k = self.hdr.slots_per_lane as usize;
        let mut seen = std::collections::HashSet::new();
        for lane in 0..self.hdr.lane_count as usize {
            let mut seqs = vec![0u64; k];
            let mut invalid = vec![];
            // Overflow records recovery would replay whose extent does not hold their payload:
            // (slot, seq, why).
            let mut torn_overflow = vec![];
            for (slot, seq) in seqs.iter_mut().enumerate() {
                let off = log::slot_offset(&self.hdr, lane, slot);
                match log::parse_slot(&self.map, off, self.hdr.slot_size, bounds) {
                    SlotState::Valid(mut rec) => {
                        // An overflow record that recovery would replay must find its payload;
                        // a retired one's extent may hold other objects by now.
                        if rec.seq > st.watermark {
                            if let Err(why) = log::load_overflow(&self.map, &mut rec, bounds) {
                                torn_overflow.push((slot, rec.seq, why));
                            }
                        }
                        r.log_records += 1;
                        *seq = rec.seq;
                        if !seen.insert(rec.seq) {
                            r.problems.push(format!(
                                "log lane {lane} slot {slot}: a second record with sequence number {}",
                                rec.seq
                            ));
                        }
                        if rec.seq > st.watermark
                            && self.lanes.next_seq.load(Ordering::SeqCst) <= rec.seq
                        {
                            r.problems.push(format!(
                                "log lane {lane} slot {slot}: record {} is newer than any committed transaction",
                                rec.seq
                            ));
                        }
                    }
                    SlotState::Invalid(why) => invalid.push((slot, why)),
                    SlotState::Empty => {}
                }
            }
            // As recovery judges them (recovery.rs, `scan`): the lane's newest record may have
            // been torn before its commit fence (slot and extent share it), and recovery
            // dropped it; its slot is the lane's next to write. Anywhere else it is damage.
            let newest_seq = seqs.iter().copied().max().unwrap_or(0);
            for (slot, seq, why) in torn_overflow {
                if seq == newest_seq {
                    seqs[slot] = 0;
                } else {
                    r.problems.push(format!(
                        "log lane {lane} slot {slot}: {why} (not the lane's newest record)"
                    ));
                }
            }
            let newest = (0..k).filter(|&s| seqs[s] != 0).max_by_key(|&s| seqs[s]);
            let in_flight = newest.map(|s| (s + 1) % k).unwrap_or(0);
            for (slot, why) in invalid {
                if slot != in_flight {
                    r.problems
                        .push(format!("log lane {lane} slot {slot}: {why}"));
                }
            }
        }
        let objs = match self.allocated_objects() {
            Ok(o) => o,
            Err(e) => {
                r.problems.push(e.to_string());
                return r;
            }
        };
        r.objects = objs.len() as u64;
        r.used = objs.iter().map(|o| o.size).sum();
        if st.root_off != 0 && objs.binary_search_by_key(&st.root_off, |o| o.off).is_err() {
            r.problems.push(format!(
                "root object {:#x} is not an allocated object",
                st.root_off
            ));
        }
        if let Some(reach) = reachable {
            r.reachability_checked = true;
            let mut reach: Vec<u64> = reach.to_vec();
            reach.sort_unstable();
            reach.dedup();
            r.reachable = reach.len() as u64;
            for &o in &reach {
                if objs.binary_search_by_key(&o, |x| x.off).is_err() {
                    r.problems.push(format!(
                        "dangling pointer: reachable object {o:#x} is not allocated"
                    ));
                }
            }
            let mut leaks = 0;
            for o in &objs {
                if reach.binary_search(&o.off).is_err() {
                    leaks += 1;
                    if leaks <= 5 {
                        r.problems.push(format!(
                            "leak: object {:#x} ({} bytes) is allocated but unreachable",
                            o.off, o.size
                        ));
                    }
                }
            }
            if leaks > 5 {
                r.problems
                    .push(format!("... {} leaked objects in all", leaks));
            }
        }
        r
    }
}
