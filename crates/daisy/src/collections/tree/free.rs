//! Freeing trees in bounded steps (`clear`, `free_step`) and the walks checkers use
//! (`tree_objects`, `tree_entries`).
//!
//! A detached subtree (the header's `garbage_root`) is freed from its right edge: each step
//! descends along the last items to the deepest node, frees the outline objects of a leaf's
//! entries from its end (cutting the leaf's index as it goes, so the node records how far it
//! got), then the node, and cuts its item from the parent's index in the same transaction.
//! Every committed step leaves a smaller detached tree that owns exactly what is not freed
//! yet, so a crash between steps resumes where the last commit left it (docs/FORMAT.md
//! section 8c).

use super::keys::*;
use super::node::*;
use super::ops::*;
use crate::collections::table::Src;
use crate::error::{Error, Result};
use crate::shared::PoolInner;
use crate::tx::Tx;

/// Log bytes kept free before each free a step makes: the free itself, the cut of the
/// node's or its parent's index, the header's garbage words.
const STEP_RESERVE: usize = 512;

/// Objects freed per transaction by `clear` and an interrupted clear's completion.
pub const GARBAGE_BUDGET: u32 = 128;

/// One bounded step of freeing the detached subtree of the tree at `t.hdr`, inside `tx`;
/// true when nothing is left detached. Each free lowers `budget`; the room checks apply once
/// something was freed, so every call makes progress even with the smallest log slots.
pub fn garbage_step(tx: &mut Tx, t: &T, budget: &mut u32) -> Result<bool> {
    let mut progressed = false;
    loop {
        let h = read_header(&Src::Tx(tx), t.hdr)?;
        if h.garbage_root == 0 {
            return Ok(true);
        }
        if h.garbage_height == 0 || h.garbage_height > MAX_HEIGHT {
            return Err(damaged(t.hdr, "ordered map detached height out of range"));
        }
        let out_of_room = |tx: &Tx, budget: u32| budget == 0 || tx.log_room() < STEP_RESERVE;
        if progressed && out_of_room(tx, *budget) {
            return Ok(false);
        }
        // Down the right edge to a leaf, or to an internal node with no items left.
        let mut path: Vec<Img> = Vec::new();
        let mut node = h.garbage_root;
        let mut level = h.garbage_height - 1;
        let img = loop {
            let img = Img::read(&Src::Tx(tx), node, t.geo, level)?;
            if level == 0 || img.count() == 0 {
                break img;
            }
            node = img.child(img.count() - 1)?.0;
            path.push(img);
            level -= 1;
        };
        if img.leaf() {
            let mut n = img.count();
            while n > 0 {
                if let Some(o) = img.entry(n - 1)?.0.obj() {
                    if progressed && out_of_room(tx, *budget) {
                        break;
                    }
                    t.free(tx, o)?;
                    *budget = budget.saturating_sub(1);
                    progressed = true;
                }
                n -= 1;
            }
            if n > 0 {
                // Out of budget inside the leaf: record how far it got.
                let mut cut = img.clone();
                cut.truncate(n);
                write_diff(tx, t, img.off, img.off, &img.b, &cut.b)?;
                return Ok(false);
            }
        }
        t.free(tx, img.off)?;
        *budget = budget.saturating_sub(1);
        progressed = true;
        match path.last() {
            None => t.write(tx, t.hdr, t.hdr + H_GARBAGE, &[0u8; 16])?,
            Some(parent) => {
                let last = parent.count() - 1;
                if let Some(o) = parent.child(last)?.2.obj() {
                    t.free(tx, o)?;
                }
                let mut cut = parent.clone();
                cut.truncate(last);
                write_diff(tx, t, parent.off, parent.off, &parent.b, &cut.b)?;
            }
        }
    }
}

/// One bounded step of destroying the tree at `t.hdr` (the caller unlinked it); true when
/// it is gone, header included. States, each left by a committed step:
/// 1. live, perhaps with a `clear`'s detached subtree, which is freed first;
/// 2. being freed: `state` 1, the root moved to the detached slot (`root`, `len`, `height`
///    zero), in one logged write;
/// 3. the detached subtree freed by [`garbage_step`]s;
/// 4. the header freed.
pub fn destroy_step(tx: &mut Tx, t: &T, budget: &mut u32) -> Result<bool> {
    while *budget > 0 {
        let h = read_header(&Src::Tx(tx), t.hdr)?;
        if h.garbage_root != 0 {
            if !garbage_step(tx, t, budget)? {
                return Ok(false);
            }
            continue;
        }
        if h.state == STATE_LIVE {
            // [state, root, len, height, garbage_root, garbage_height] from byte 20.
            let mut w = [0u8; 44];
            w[..4].copy_from_slice(&STATE_FREEING.to_le_bytes());
            w[28..36].copy_from_slice(&h.root.to_le_bytes());
            w[36..44].copy_from_slice(&h.height.to_le_bytes());
            t.write(tx, t.hdr, t.hdr + H_STATE, &w)?;
            continue;
        }
        t.free(tx, t.hdr)?;
        return Ok(true);
    }
    Ok(false)
}

/// Walk every node of the subtree at `root` (of `height` levels), calling `f` on each (its
/// image); nodes are checked for their tag and level, and a node met twice is an error (a
/// cycle or a shared node), so the walk always ends.
pub fn walk(
    src: &Src,
    geo: Geo,
    root: u64,
    height: u64,
    seen: &mut std::collections::HashSet<u64>,
    f: &mut dyn FnMut(&Img) -> Result<()>,
) -> Result<()> {
    if root == 0 {
        return Ok(());
    }
    if height == 0 || height > MAX_HEIGHT {
        return Err(damaged(root, "ordered map height out of range"));
    }
    let mut stack = vec![(root, height - 1)];
    while let Some((node, level)) = stack.pop() {
        if !seen.insert(node) {
            return Err(damaged(node, "ordered map node reached twice"));
        }
        let img = Img::read(src, node, geo, level)?;
        f(&img)?;
        if level > 0 {
            for i in (0..img.count()).rev() {
                stack.push((img.child(i)?.0, level - 1));
            }
        }
    }
    Ok(())
}

fn not_a_tree(hdr: u64, why: String) -> Error {
    Error::NotACollection {
        offset: hdr,
        what: "ordered map",
        why,
    }
}

/// The header at `hdr` if it is a tree header, with its geometry.
pub fn tree_at(src: &Src, hdr: u64) -> Result<(TreeHeader, T<'static>)> {
    let h = read_header(src, hdr).map_err(|_| not_a_tree(hdr, "offset outside the heap".into()))?;
    let geo = header_problem(&h).map_err(|why| not_a_tree(hdr, why))?;
    Ok((h, T::plain(hdr, geo)))
}

/// Every object the tree at `hdr` owns: header, nodes, item objects (outline entries and
/// separators), those of a detached subtree still being freed included. Read-only.
pub fn tree_objects(pool: &PoolInner, hdr: u64) -> Result<Vec<u64>> {
    let src = Src::Pool(pool);
    let (h, t) = tree_at(&src, hdr)?;
    let mut out = vec![hdr];
    let mut seen = std::collections::HashSet::new();
    for (root, height) in [(h.root, h.height), (h.garbage_root, h.garbage_height)] {
        walk(&src, t.geo, root, height, &mut seen, &mut |img| {
            out.push(img.off);
            for i in 0..img.count() {
                let obj = if img.leaf() {
                    img.entry(i)?.0.obj()
                } else {
                    img.child(i)?.2.obj()
                };
                out.extend(obj);
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// Every (key, value) of the tree at `hdr`, in key order, then those a detached subtree
/// still holds (a `clear` or `free_step` in progress): for checkers that follow what values
/// own. Read-only.
pub fn tree_entries(pool: &PoolInner, hdr: u64) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let src = Src::Pool(pool);
    let (h, t) = tree_at(&src, hdr)?;
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (root, height) in [(h.root, h.height), (h.garbage_root, h.garbage_height)] {
        walk(&src, t.geo, root, height, &mut seen, &mut |img| {
            if img.leaf() {
                for i in 0..img.count() {
                    let (k, v) = img.entry(i)?;
                    out.push((read_key(&src, &k)?, read_val(&src, &v)?));
                }
            }
            Ok(())
        })?;
    }
    Ok(out)
}
