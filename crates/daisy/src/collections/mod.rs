//! Persistent collections built on pools and transactions.
//!
//! * [`PHashMap`]: fixed-size plain-old-data keys and values stored inline;
//! * [`PBytesMap`]: byte-string keys and values of any length;
//! * [`PTreeMap`]: an ordered map from byte strings to byte strings, with ranks;
//! * [`PSeq`]: a sequence (deque) of byte strings: pushes and pops at both ends, indexes,
//!   middle edits (Redis's lists);
//! * [`PBlockStore`]: an array of fixed-size blocks, each write atomic under power failure
//!   (block translation, as PMDK's libpmemblk), read and written by many threads at once.
//!
//! The hash maps are extendible hash tables (`table.rs`: format, invariants and crash
//! reasoning); the ordered map is a B+-tree with subtree counts (`tree/`: the same); the
//! sequence is a doubly linked list of chunks of packed items (`seq.rs`: the same); the block
//! store is a map of physical blocks switched one 8-byte word per write (`blocks.rs`).
//! Each has an exclusive handle (`open`, with self-durable operations and `_tx` ones that join
//! a caller's transaction), a transaction-scoped view (`view`), bounded destruction
//! (`free_step`), and a checker that `daisy pool check` runs on every one it finds
//! ([`check_all`]).

pub mod blocks;
pub mod bytesmap;
pub mod hashmap;
pub mod seq;
pub(crate) mod table;
pub mod tree;

pub use blocks::{block_store_objects, BlockReader, PBlockStore};
pub use bytesmap::{BytesMapView, PBytesMap};
pub use hashmap::{Batch, PHashMap};
pub use seq::{seq_items, seq_objects, PSeq, SeqIter, SeqView};
pub use table::MapCheck;
pub use tree::{PTreeMap, TreeIter, TreeMapView};

use crate::shared::PoolInner;
use table::*;

/// Every object the map at `hdr` owns: header, directory, segments and (byte-string maps)
/// entry objects. For leak checks that walk a layout from its root. Read-only.
pub fn map_objects(pool: &crate::Pool, hdr: u64) -> crate::Result<Vec<u64>> {
    let inner: &PoolInner = &pool.inner;
    let src = Src::Pool(inner);
    let h = src.header(hdr)?;
    // dir 0 and depth 0: a map being destroyed (table.rs, `destroy_step`).
    let destroying = h.dir == 0 && h.depth == 0;
    if h.magic != MAP_MAGIC
        || h.crc != h.immutable_crc()
        || (!destroying && !dir_fits(inner, h.dir, h.depth))
        || (h.garbage_dir != 0 && !dir_fits(inner, h.garbage_dir, h.garbage_depth as u64))
    {
        return Err(crate::Error::NotACollection {
            offset: hdr,
            what: "hash map",
            why: "no valid map header there".into(),
        });
    }
    let entries = h.kind == KIND_BYTES;
    let mut out = vec![hdr];
    if !destroying {
        out.push(h.dir);
        owned_by_dir(&src, h.dir, h.depth as u32, 0, entries, &mut out)?;
    }
    if h.garbage_dir != 0 {
        // An interrupted clear: the detached directory and what it still owns.
        out.push(h.garbage_dir);
        let (g, from) = (h.garbage_depth, h.garbage_pos as u64);
        owned_by_dir(&src, h.garbage_dir, g, from, entries, &mut out)?;
    }
    Ok(out)
}

/// Every (key, value) of the byte-string map at `hdr`, the entries a detached directory still
/// holds included (a `clear` or a [`PBytesMap::free_step`] in progress): for checkers that
/// follow what values own. Read-only.
pub fn bytes_map_entries(pool: &crate::Pool, hdr: u64) -> crate::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let inner: &PoolInner = &pool.inner;
    let src = Src::Pool(inner);
    let h = src.header(hdr)?;
    let bad = |why: &str| crate::Error::NotACollection {
        offset: hdr,
        what: "byte-string hash map",
        why: why.into(),
    };
    if h.magic != MAP_MAGIC || h.crc != h.immutable_crc() || h.kind != KIND_BYTES {
        return Err(bad("no byte-string map header there"));
    }
    let mut dirs = Vec::new();
    if !(h.dir == 0 && h.depth == 0) {
        if !dir_fits(inner, h.dir, h.depth) {
            return Err(bad("directory does not fit the pool"));
        }
        dirs.push((h.dir, h.depth as u32, 0));
    }
    if h.garbage_dir != 0 {
        if !dir_fits(inner, h.garbage_dir, h.garbage_depth as u64) {
            return Err(bad("detached directory does not fit the pool"));
        }
        dirs.push((h.garbage_dir, h.garbage_depth, h.garbage_pos as u64));
    }
    let mut out = Vec::new();
    let mut img = vec![0u8; SEG_BYTES];
    for (dir, depth, from) in dirs {
        let words = read_dir(&src, dir, depth)?;
        let spans = dir_spans(&words, depth, dir).map_err(|_| bad("inconsistent directory"))?;
        for (_, seg, _) in spans.into_iter().filter(|s| s.0 >= from) {
            src.read(seg, &mut img)?;
            for slot in img.chunks_exact(16) {
                let obj = u64::from_le_bytes(slot[8..16].try_into().unwrap());
                if obj != 0 {
                    out.push(bytesmap::read_entry(&src, obj)?);
                }
            }
        }
    }
    Ok(out)
}

/// Every object the ordered map at `hdr` owns: header, nodes, item objects (long entries and
/// separators), and those of a detached subtree a `clear` or [`PTreeMap::free_step`] is still
/// freeing. For leak checks that walk a layout from its root. Read-only.
pub fn tree_objects(pool: &crate::Pool, hdr: u64) -> crate::Result<Vec<u64>> {
    tree::tree_objects(&pool.inner, hdr)
}

/// Every (key, value) of the ordered map at `hdr` in key order, then those a detached subtree
/// still holds (a `clear` or [`PTreeMap::free_step`] in progress): for checkers that follow
/// what values own. Read-only.
pub fn tree_entries(pool: &crate::Pool, hdr: u64) -> crate::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    tree::tree_entries(&pool.inner, hdr)
}

/// Find every hash map, ordered map, sequence and block store in the pool (objects that start with a valid
/// header of one) and check each one's invariants. Read-only; used by `daisy pool check`.
/// A sequence's report has kind "sequence", its items as `entries` and its chunks as
/// `segments`; a block store's has kind "block store", the blocks holding data as `entries`
/// and its physical blocks as `segments`.
pub fn check_all(pool: &crate::Pool) -> crate::Result<Vec<MapCheck>> {
    let inner: &PoolInner = &pool.inner;
    let mut out = Vec::new();
    for o in pool.objects()? {
        if o.size >= tree::TREE_HEADER_BYTES as u64
            && Src::Pool(inner).read_pod::<u64>(o.off).ok() == Some(tree::TREE_MAGIC)
        {
            let mut h = [0u8; 16];
            if Src::Pool(inner).read(o.off, &mut h).is_ok()
                && Src::Pool(inner).read_pod::<u32>(o.off + 16).ok()
                    == Some(crate::checksum::crc32c_append(0, &h))
            {
                out.push(tree::check_tree(inner, o.off));
            }
            continue;
        }
        if o.size >= blocks::BLK_HEADER_BYTES && blocks::looks_like_block_store(inner, o.off) {
            out.push(blocks::check_block_store(inner, o.off));
            continue;
        }
        if o.size >= seq::SEQ_HEADER_BYTES && seq::looks_like_seq(inner, o.off) {
            out.push(seq::check_seq(inner, o.off));
            continue;
        }
        if o.size < HEADER_BYTES as u64 {
            continue;
        }
        let Ok(h) = Src::Pool(inner).header(o.off) else {
            continue;
        };
        if h.magic != MAP_MAGIC || h.crc != h.immutable_crc() {
            continue;
        }
        let mut c = match h.kind {
            KIND_FIXED
                if h.key_size >= 1 && h.key_size as u64 + h.val_size as u64 <= BUCKET as u64 =>
            {
                hashmap::check_fixed(inner, o.off, h.key_size as usize, h.val_size as usize)
            }
            KIND_BYTES => bytesmap::check_bytes(inner, o.off),
            _ => MapCheck {
                header: o.off,
                kind: "hash map",
                problems: vec![format!(
                    "unknown map kind {} with {}-byte keys and {}-byte values",
                    h.kind, h.key_size, h.val_size
                )],
                ..Default::default()
            },
        };
        if h.format != MAP_FORMAT && h.format != MAP_FORMAT_OLD {
            c.problems.push(format!(
                "map format version {} is not {MAP_FORMAT_OLD} or {MAP_FORMAT}",
                h.format
            ));
        }
        out.push(c);
    }
    Ok(out)
}
