//! [`Tx::add_range`]: declared ranges that the program stores into directly, kept durably
//! for undo (the format and the rules: `crate::undo`, docs/FORMAT.md section 2.5).

use super::Tx;
use crate::error::{Error, Result};
use crate::layout::*;
use crate::undo::{range_header, range_size, store_word, UndoHeader, RANGE_HEADER, UNDO_HEADER};
use std::sync::atomic::Ordering;

/// A transaction's undo extent and what it declared.
pub(crate) struct UndoLog {
    /// The extent: first chunk and number of chunks (FREE in the chunk table, held here).
    chunk: u64,
    chunks: u64,
    /// Bytes of the extent in use (header and ranges; the terminator follows).
    used: u64,
    base: u64,
    gen: u64,
    /// Declared ranges: (offset, bytes when declared), in declaration order.
    pub ranges: Vec<(u64, Vec<u8>)>,
}

impl<'p> Tx<'p> {
    /// Declare `[off, off + len)` for direct stores (PMDK's `pmemobj_tx_add_range`): until
    /// this transaction ends, the program may store into those bytes directly through
    /// [`Pool::direct`](crate::Pool::direct), and the stores commit atomically with the rest
    /// of the transaction. Before this returns, the bytes' current contents are durable in
    /// the pool's undo area: after a crash before the commit point, opening the pool puts
    /// them back (the stores are gone, as the rest of the transaction); an error or an abort
    /// puts them back at once. At commit each range that changed is logged whole.
    ///
    /// Cost: one fence per call (two for the first of a transaction, and one more at its
    /// commit), and a copy of the range. Ranges may be declared more than once (the first
    /// declaration's bytes win); they must not overlap bytes written with
    /// [`Tx::write_bytes`] in the same transaction. Bytes of an object this transaction
    /// allocated need no undo (it does not exist after a crash) and take none.
    ///
    /// Errors: [`Error::InvalidPointer`] outside the heap; [`Error::PoolFull`] when no room
    /// is left for the undo area; I/O errors of the fences.
    pub fn add_range(&mut self, off: u64, len: u64) -> Result<()> {
        self.check_user_range(off, len)?;
        if self.pool.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned {
                path: self.pool.path.clone(),
            });
        }
        if len == 0 {
            return Ok(());
        }
        if self.fresh_contains(off, len) {
            // Written in place and made durable before the commit record (`persist_fresh`),
            // like the transaction's own writes into it.
            self.note_fresh_dirty(off, len);
            return Ok(());
        }
        let mut data = vec![0u8; len as usize];
        self.pool.map.read_bytes(off, &mut data);
        let need = range_size(len) + RANGE_HEADER;
        match self.st.buf.undo.take() {
            None => self.attach_undo(off, data)?,
            Some(mut u) => {
                let r = if u.used + need <= u.chunks * CHUNK_SIZE {
                    self.append_range(&mut u, off, &data)
                } else {
                    self.grow_undo(&mut u, need)
                        .and_then(|()| self.append_range(&mut u, off, &data))
                };
                if r.is_ok() {
                    u.ranges.push((off, data));
                }
                self.st.buf.undo = Some(u);
                r?;
            }
        }
        Ok(())
    }

    /// The first range of the transaction: a new extent with it, durable, then named in the
    /// lane's table word (durable).
    fn attach_undo(&mut self, off: u64, data: Vec<u8>) -> Result<()> {
        let pool = self.pool;
        let table = self.undo_table()?;
        let len = data.len() as u64;
        let need = UNDO_HEADER + range_size(len) + RANGE_HEADER;
        let n = need.div_ceil(CHUNK_SIZE);
        let chunk = self.take_chunks(n, need)?;
        // Read while this transaction holds its lane: every record the lane wrote is older.
        let base = pool.lanes.next_seq.load(Ordering::Acquire);
        let mut u = UndoLog {
            chunk,
            chunks: n,
            used: UNDO_HEADER,
            base,
            gen: undo_gen(pool),
            ranges: Vec::new(),
        };
        let ext = pool.geo.chunk_start(chunk);
        let h = UndoHeader::new(base, u.gen, n * CHUNK_SIZE);
        pool.persist
            .copy_nodrain(&pool.map, ext, bytemuck::bytes_of(&h));
        if let Err(e) = self.append_range(&mut u, off, &data) {
            self.give_back_undo(u);
            return Err(e);
        }
        let word = table + self.lane_index() as u64 * 8;
        if !sim_fault!(UndoNotNamed) {
            if let Err(e) = store_word(&pool.map, &pool.persist, word, ext) {
                self.give_back_undo(u);
                return Err(pool.io_err("persist", e));
            }
        }
        u.ranges.push((off, data));
        self.st.buf.undo = Some(Box::new(u));
        Ok(())
    }

    /// Write one range (and a terminator after it) at the extent's end; durable on return.
    fn append_range(&mut self, u: &mut UndoLog, off: u64, data: &[u8]) -> Result<()> {
        let pool = self.pool;
        let at = pool.geo.chunk_start(u.chunk) + u.used;
        let mut rec = Vec::with_capacity((range_size(data.len() as u64) + RANGE_HEADER) as usize);
        rec.extend_from_slice(&range_header(off, data, u.gen));
        rec.extend_from_slice(data);
        rec.resize((range_size(data.len() as u64) + RANGE_HEADER) as usize, 0);
        pool.persist.copy_nodrain(&pool.map, at, &rec);
        pool.persist
            .fence()
            .map_err(|e| pool.io_err("persist", e))?;
        u.used += range_size(data.len() as u64);
        Ok(())
    }

    /// Move the undo log to an extent with room for `need` more bytes: copy it, make it
    /// durable, name it in the table word (durable), give the old one back.
    fn grow_undo(&mut self, u: &mut UndoLog, need: u64) -> Result<()> {
        let pool = self.pool;
        let cap = (u.used + need).max(2 * u.chunks * CHUNK_SIZE);
        let n = cap.div_ceil(CHUNK_SIZE);
        let chunk = self.take_chunks(n, cap)?;
        let (old, new) = (pool.geo.chunk_start(u.chunk), pool.geo.chunk_start(chunk));
        let mut bytes = vec![0u8; u.used as usize];
        pool.map.read_bytes(old, &mut bytes);
        let h = UndoHeader::new(u.base, u.gen, n * CHUNK_SIZE);
        bytes[..UNDO_HEADER as usize].copy_from_slice(bytemuck::bytes_of(&h));
        bytes.resize((u.used + RANGE_HEADER) as usize, 0);
        pool.persist.copy_nodrain(&pool.map, new, &bytes);
        let word = self.undo_table()? + self.lane_index() as u64 * 8;
        let r = pool
            .persist
            .fence()
            .and_then(|()| store_word(&pool.map, &pool.persist, word, new));
        if let Err(e) = r {
            let mut h = pool.heap.lock().unwrap_or_else(|e| e.into_inner());
            h.insert_extent(chunk, n);
            return Err(pool.io_err("persist", e));
        }
        let mut h = pool.heap.lock().unwrap_or_else(|e| e.into_inner());
        h.insert_extent(u.chunk, u.chunks);
        (u.chunk, u.chunks) = (chunk, n);
        Ok(())
    }

    /// The session's undo table, created (zeroed, durable, then named in the state page,
    /// durable) by the first `add_range` after open.
    fn undo_table(&mut self) -> Result<u64> {
        let pool = self.pool;
        let mut t = pool.undo_table.lock().unwrap_or_else(|e| e.into_inner());
        if *t != 0 {
            return Ok(*t);
        }
        let bytes = pool.hdr.lane_count as u64 * 8;
        let n = bytes.div_ceil(CHUNK_SIZE);
        let chunk = self.take_chunks(n, bytes)?;
        let off = pool.geo.chunk_start(chunk);
        pool.persist
            .copy_nodrain(&pool.map, off, &vec![0u8; bytes as usize]);
        let r = pool
            .persist
            .fence()
            .and_then(|()| store_word(&pool.map, &pool.persist, STATE_UNDO_TABLE, off));
        if let Err(e) = r {
            return Err(pool.io_err("persist", e));
        }
        // Its chunks stay out of the heap index for the rest of the session.
        *t = off;
        Ok(off)
    }

    /// Log every declared range that changed (at commit, before the record is built). The
    /// direct stores stay in memory; applying the record writes the same bytes again.
    pub(super) fn log_direct_stores(&mut self) -> Result<()> {
        let Some(u) = self.st.buf.undo.take() else {
            return Ok(());
        };
        let mut now = Vec::new();
        let mut r = Ok(());
        for (off, snap) in &u.ranges {
            now.resize(snap.len(), 0);
            self.pool.map.read_bytes(*off, &mut now);
            if now != *snap {
                r = self.log_copy(*off, &now);
                if r.is_err() {
                    break;
                }
            }
        }
        self.st.buf.undo = Some(u);
        r
    }

    /// After the commit point: the lane's table word is cleared (durable), then the extent's
    /// chunks are free again.
    pub(super) fn release_undo_committed(&mut self) {
        if let Some(u) = self.st.buf.undo.take() {
            let pool = self.pool;
            let table = *pool.undo_table.lock().unwrap_or_else(|e| e.into_inner());
            let word = table + self.lane_index() as u64 * 8;
            match store_word(&pool.map, &pool.persist, word, 0) {
                Ok(()) => self.give_back_undo(*u),
                // The word may still name the extent: keep its chunks out of use (the
                // transaction is committed; recovery will see its record and undo nothing).
                Err(e) => drop(pool.io_err("persist", e)),
            }
        }
    }

    /// An abort (or a failed commit): the declared ranges get their old bytes back, durably,
    /// then the lane's table word is cleared (durably) and the extent's chunks are free again.
    /// A poisoned pool is left alone: recovery does the same at the next open.
    pub(super) fn undo_direct_stores(&mut self) {
        let Some(u) = self.st.buf.undo.take() else {
            return;
        };
        let pool = self.pool;
        if pool.poisoned.load(Ordering::Acquire) {
            return;
        }
        for (off, snap) in u.ranges.iter().rev() {
            pool.map.write_bytes(*off, snap);
            pool.persist
                .flush(pool.map.at(*off, snap.len()), snap.len());
        }
        let table = *pool.undo_table.lock().unwrap_or_else(|e| e.into_inner());
        let word = table + self.lane_index() as u64 * 8;
        let r = pool
            .persist
            .fence()
            .and_then(|()| store_word(&pool.map, &pool.persist, word, 0));
        match r {
            Ok(()) => self.give_back_undo(*u),
            Err(e) => drop(pool.io_err("persist", e)),
        }
    }

    fn give_back_undo(&self, u: UndoLog) {
        let mut h = self.pool.heap.lock().unwrap_or_else(|e| e.into_inner());
        h.insert_extent(u.chunk, u.chunks);
    }
}

/// A random number for a new undo extent (its ranges repeat it, so bytes left in its chunks
/// by an earlier use never pass for ranges): the clock, the pool's address and a counter,
/// mixed (splitmix64).
fn undo_gen(pool: &crate::shared::PoolInner) -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut z = t
        ^ (pool as *const _ as u64).rotate_left(32)
        ^ COUNTER
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .rotate_left(17);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
