//! `check`: every invariant of a tree (docs/FORMAT.md section 8c), read-only, reporting
//! problems instead of failing (damaged media gives a list, never a panic).

use super::free::walk;
use super::keys::*;
use super::node::*;
use super::ops::*;
use crate::collections::table::{MapCheck, Src};
use crate::shared::PoolInner;
use std::collections::HashSet;

pub const WHAT: &str = "ordered map";

struct Ctx<'a> {
    pool: &'a PoolInner,
    geo: Geo,
    r: MapCheck,
    seen: HashSet<u64>,
}

impl Ctx<'_> {
    fn problem(&mut self, at: u64, what: String) {
        if self.r.problems.len() < 100 {
            self.r.problems.push(format!("node {at:#x}: {what}"));
        }
    }

    /// An object the tree owns: allocated, at least `need` bytes.
    fn owned(&mut self, node: u64, obj: u64, need: u64, what: &str) -> bool {
        match self.pool.allocated_object(obj) {
            Ok(size) if size >= need => {
                self.r.objects.push(obj);
                true
            }
            Ok(size) => {
                self.problem(
                    node,
                    format!("{what} {obj:#x} has {size} bytes, needs {need}"),
                );
                false
            }
            Err(why) => {
                self.problem(
                    node,
                    format!("{what} {obj:#x} is not an allocated object: {why}"),
                );
                false
            }
        }
    }

    /// Check an outline key's object (allocated, lengths, prefix); the whole key on success.
    fn outline_key(&mut self, node: u64, k: &KeyRef, sep: bool) -> Option<Vec<u8>> {
        let KeyRef::Out { obj, klen, prefix } = *k else {
            return Some(k.known().to_vec());
        };
        let src = Src::Pool(self.pool);
        let (kl, vl) = match obj_lens(&src, obj) {
            Ok(l) => l,
            Err(e) => {
                self.problem(node, format!("item object {obj:#x}: {e}"));
                return None;
            }
        };
        if !self.owned(node, obj, OBJ_HDR + kl + vl, "item object") {
            return None;
        }
        if kl != klen {
            self.problem(
                node,
                format!("entry says key length {klen}, its object {kl}"),
            );
            return None;
        }
        if sep && vl != 0 {
            self.problem(node, format!("separator object {obj:#x} holds a value"));
        }
        let key = read_key(&src, k).ok()?;
        if key[..prefix.len()] != *prefix {
            self.problem(
                node,
                "an outline entry's prefix differs from its key".into(),
            );
        }
        Some(key)
    }

    /// Check the subtree at `node` (expected `level`), whose keys must lie in [lo, hi);
    /// returns its entries' count (None: too damaged to count).
    fn node(
        &mut self,
        node: u64,
        level: u64,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        root: bool,
    ) -> Option<u64> {
        if !self.seen.insert(node) {
            self.problem(node, "reached twice (a cycle or a shared node)".into());
            return None;
        }
        if !self.owned(node, node, self.geo.n as u64, "node") {
            return None;
        }
        self.r.segments += 1;
        let img = match Img::read(&Src::Pool(self.pool), node, self.geo, level) {
            Ok(i) => i,
            Err(e) => {
                self.problem(node, format!("unreadable at level {level}: {e}"));
                return None;
            }
        };
        let leaf = level == 0;
        let count = img.count();
        // Items: inside the heap, decodable, not overlapping.
        let mut spans = Vec::with_capacity(count);
        for i in 0..count {
            let at = img.b[NODE_HDR + i] as usize * 8;
            match (at >= img.heap(), item_size(&img.b, at, leaf)) {
                (true, Some(size)) => spans.push((at, at + size)),
                _ => {
                    self.problem(node, format!("item {i} at byte {at} is not a valid item"));
                    return None;
                }
            }
        }
        spans.sort_unstable();
        if spans.windows(2).any(|w| w[0].1 > w[1].0) {
            self.problem(node, "items overlap".into());
            return None;
        }
        let used: usize = count + spans.iter().map(|s| s.1 - s.0).sum::<usize>();
        if count == 0 {
            self.problem(node, "has no items".into());
            return None;
        }
        if !root && used < self.geo.min_fill() {
            self.problem(
                node,
                format!(
                    "uses {used} bytes, under the minimum fill {}",
                    self.geo.min_fill()
                ),
            );
        }
        if root && !leaf && count < 2 {
            self.problem(node, "internal root with a single child".into());
        }
        if leaf {
            let mut prev: Option<Vec<u8>> = None;
            for i in 0..count {
                let Ok((k, v)) = img.entry(i) else {
                    self.problem(node, format!("entry {i} is damaged"));
                    return None;
                };
                if let (KeyRef::In(kb), ValRef::In(v)) = (k, v) {
                    if 2 + kb.len() + v.len() > self.geo.inline_max() {
                        self.problem(node, format!("inline entry {i} exceeds the inline limit"));
                    }
                }
                let key = self.outline_key(node, &k, false)?;
                if let Some(p) = &prev {
                    if p >= &key {
                        self.problem(node, format!("entry {i} is not above the one before it"));
                    }
                }
                if lo.is_some_and(|lo| key.as_slice() < lo)
                    || hi.is_some_and(|hi| key.as_slice() >= hi)
                {
                    self.problem(
                        node,
                        format!("entry {i} lies outside its separators' range"),
                    );
                }
                prev = Some(key);
            }
            self.r.entries += count as u64;
            return Some(count as u64);
        }
        // Internal: separators ascending within [lo, hi), item 0's empty; children checked
        // with their bounds, their counts compared.
        let mut seps: Vec<Option<Vec<u8>>> = Vec::with_capacity(count);
        let mut kids = Vec::with_capacity(count);
        for i in 0..count {
            let Ok((child, c, k)) = img.child(i) else {
                self.problem(node, format!("item {i} is damaged"));
                return None;
            };
            kids.push((child, c));
            if i == 0 {
                if !matches!(k, KeyRef::In(b) if b.is_empty()) {
                    self.problem(node, "item 0 has a separator".into());
                }
                seps.push(None);
                continue;
            }
            let s = self.outline_key(node, &k, true)?;
            if let Some(Some(p)) = seps.last() {
                if p >= &s {
                    self.problem(
                        node,
                        format!("separator {i} is not above the one before it"),
                    );
                }
            }
            if lo.is_some_and(|lo| s.as_slice() < lo) || hi.is_some_and(|hi| s.as_slice() >= hi) {
                self.problem(node, format!("separator {i} lies outside the node's range"));
            }
            seps.push(Some(s));
        }
        let mut total = 0u64;
        for i in 0..count {
            let clo = if i == 0 { lo } else { seps[i].as_deref() };
            let chi = if i + 1 < count {
                seps[i + 1].as_deref()
            } else {
                hi
            };
            let (child, c) = kids[i];
            let real = self.node(child, level - 1, clo, chi, false)?;
            if real != c {
                self.problem(
                    node,
                    format!("item {i} counts {c} entries, its subtree holds {real}"),
                );
            }
            total += real;
        }
        Some(total)
    }
}

/// Verify the invariants of the tree at `hdr` (read-only); the report lists every object the
/// tree owns.
pub fn check_tree(pool: &PoolInner, hdr: u64) -> MapCheck {
    let mut r = MapCheck {
        header: hdr,
        kind: WHAT,
        ..Default::default()
    };
    r.objects.push(hdr);
    let src = Src::Pool(pool);
    let h = match read_header(&src, hdr) {
        Ok(h) => h,
        Err(e) => {
            r.problems.push(format!("header unreadable: {e}"));
            return r;
        }
    };
    let geo = match header_problem(&h) {
        Ok(g) => g,
        Err(e) => {
            r.problems.push(format!("header: {e}"));
            return r;
        }
    };
    r.depth = h.height as u32;
    let mut c = Ctx {
        pool,
        geo,
        r,
        seen: HashSet::new(),
    };
    if h.state == STATE_FREEING && (h.root != 0 || h.len != 0) {
        c.r.problems.push(format!(
            "tree being freed still has root {:#x}, len {}",
            h.root, h.len
        ));
    }
    if h.root != 0 {
        if let Some(n) = c.node(h.root, h.height - 1, None, None, true) {
            if n != h.len {
                c.r.problems.push(format!(
                    "header len is {} but {n} entries are stored",
                    h.len
                ));
            }
        }
    } else if h.len != 0 {
        c.r.problems
            .push(format!("header len is {} but the tree has no root", h.len));
    }
    // A detached subtree being freed: its nodes and objects belong to the tree; only its
    // structure is checked (freeing cuts it from the right, so fill and counts no longer
    // hold).
    if h.garbage_root != 0 {
        let mut seen = std::mem::take(&mut c.seen);
        let pool = c.pool;
        let mut objs = Vec::new();
        let mut bad = Vec::new();
        let r = walk(
            &src,
            geo,
            h.garbage_root,
            h.garbage_height,
            &mut seen,
            &mut |img| {
                match pool.allocated_object(img.off) {
                    Ok(s) if s >= geo.n as u64 => objs.push(img.off),
                    _ => bad.push(format!(
                        "detached node {:#x} is not an allocated node",
                        img.off
                    )),
                }
                for i in 0..img.count() {
                    let k = if img.leaf() {
                        img.entry(i)?.0
                    } else {
                        img.child(i)?.2
                    };
                    if let Some(o) = k.obj() {
                        match pool.allocated_object(o) {
                            Ok(_) => objs.push(o),
                            Err(why) => bad.push(format!("detached item object {o:#x}: {why}")),
                        }
                    }
                }
                Ok(())
            },
        );
        if let Err(e) = r {
            bad.push(format!("detached subtree: {e}"));
        }
        c.r.objects.extend(objs);
        c.r.problems.extend(bad);
    }
    let mut objs = c.r.objects.clone();
    objs.sort_unstable();
    if let Some(w) = objs.windows(2).find(|w| w[0] == w[1]) {
        c.r.problems
            .push(format!("object {:#x} is owned twice", w[0]));
    }
    c.r
}
