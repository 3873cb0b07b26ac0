//! The ordered map's part of the kill torture and of the power-failure simulator's `tree`
//! workload ([`crate::crashtest::Mix::Tree`]): a [`PTreeMap`] of the smallest node size, so
//! that leaf and internal splits, merges, redistributions, node allocations and frees come
//! every few operations, driven by inserts (single and in bursts), removals, moves of an entry to a new key, pops at both
//! ends, key-range and rank-range removals and rank queries inside transactions; and the DRAM
//! model it is checked against after every kill and on every crash image.
//!
//! Keys are sorted-set shaped: the key number as an 8-byte big-endian score, then a member
//! (`m<k>`; every eleventh key's member is 40 bytes, so the entry lives in an item object);
//! values are mostly a few bytes inline, sometimes 20 to 90 bytes out of line.

use daisy::{PPtr, PTreeMap, Pool, Tx};
use rand::rngs::SmallRng;
use rand::Rng;
use std::collections::BTreeMap;
use std::ops::Bound;

/// Node size of the workload's tree: the smallest (256 bytes, about six entries a leaf and
/// eight children an internal node), so a tree of a hundred entries is three levels deep and
/// every few operations split or merge a node.
pub const NODE_SIZE: u32 = 256;

/// Key numbers of the power-failure `tree` workload: the tree settles around 150 entries
/// (three levels), small enough to compare on every crash image.
pub const TREE_KEYS: u32 = 360;

/// Key numbers of the kill torture's tree operations (a few hundred entries, up to four
/// levels).
pub const KILL_KEYS: u32 = 3000;

/// One transaction's operation on the tree (its plan: a pure function of the random stream;
/// rank positions are raw numbers taken modulo the length when it runs).
#[derive(Clone, Debug)]
pub enum TreeOp {
    /// Insert or overwrite (key, value length).
    Insert(Vec<(u32, u8)>),
    /// Insert keys `start..start + n` with values of this length: a burst of splits.
    Fill(u32, u32, u8),
    /// Remove these keys (absent ones are no-ops).
    Remove(Vec<u32>),
    /// Move the entry of key `from` to key `to` with a value of this length
    /// ([`daisy::TreeMapView::move_key`], ZADD giving a member a new score; nothing when
    /// `from` is absent).
    Move(Vec<(u32, u32, u8)>),
    /// Pop this many from the low end (true) or the high end.
    Pop(bool, u32),
    /// Remove every key number in `lo..hi` by score bounds (ZREMRANGEBYSCORE): whole leaves
    /// emptied and merged away.
    RemoveRange(u32, u32),
    /// Remove `n` entries from rank `raw % len` (ZREMRANGEBYRANK).
    RemoveRanks(u64, u32),
    /// Read the rank of a key and the key at rank `raw % len` inside the transaction and
    /// store both in the root ([`probe_word`]).
    Probe(u32, u64),
}

/// The key of key number `k`.
pub fn key(k: u32) -> Vec<u8> {
    let mut v = (k as u64).to_be_bytes().to_vec();
    if k.is_multiple_of(11) {
        v.extend_from_slice(format!("{k:m>40}").as_bytes());
    } else {
        v.extend_from_slice(format!("m{k}").as_bytes());
    }
    v
}

/// The key number a key starts with.
pub fn key_number(key: &[u8]) -> u64 {
    key.get(..8)
        .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
        .unwrap_or(u64::MAX)
}

/// The value transaction `id` writes for key `k`.
pub fn value(id: u64, k: u32, len: u8) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (id.wrapping_mul(37) ^ (k as u64).wrapping_mul(101) ^ i) as u8)
        .collect()
}

fn value_len(rng: &mut SmallRng) -> u8 {
    if rng.gen_ratio(1, 6) {
        rng.gen_range(20..=90)
    } else {
        rng.gen_range(0..=12)
    }
}

/// The plan of one tree transaction over key numbers `0..keys`.
pub fn plan(rng: &mut SmallRng, keys: u32) -> TreeOp {
    let some = |rng: &mut SmallRng, n: u32| -> Vec<u32> {
        (0..rng.gen_range(1..=n))
            .map(|_| rng.gen_range(0..keys))
            .collect()
    };
    match rng.gen_range(0..100) {
        0..=29 | 88..=99 => {
            let ks = some(rng, 3);
            TreeOp::Insert(ks.into_iter().map(|k| (k, value_len(rng))).collect())
        }
        30..=37 => {
            let start = rng.gen_range(0..keys);
            let n = rng.gen_range(8..=40).min(keys - start);
            TreeOp::Fill(start, n, value_len(rng))
        }
        38..=51 => TreeOp::Remove(some(rng, 3)),
        52..=59 => TreeOp::Pop(rng.gen_bool(0.5), rng.gen_range(1..=4)),
        60..=67 => {
            let lo = rng.gen_range(0..keys);
            let w = rng.gen_range(1..=keys / 12);
            TreeOp::RemoveRange(lo, lo.saturating_add(w).min(keys))
        }
        68..=73 => TreeOp::RemoveRanks(rng.gen(), rng.gen_range(1..=20)),
        74..=80 => TreeOp::Probe(rng.gen_range(0..keys), rng.gen()),
        _ => {
            let n = rng.gen_range(1..=3);
            TreeOp::Move(
                (0..n)
                    .map(|_| {
                        (
                            rng.gen_range(0..keys),
                            rng.gen_range(0..keys),
                            value_len(rng),
                        )
                    })
                    .collect(),
            )
        }
    }
}

/// What [`TreeOp::Probe`] stores: `[rank << 1 | found, key number at the rank + 1 (0: empty
/// tree)]`.
pub type Probe = [u64; 2];

fn probe_word(rank: u64, found: bool, at: Option<u64>) -> Probe {
    [rank << 1 | found as u64, at.map_or(0, |k| k + 1)]
}

/// Run `op` on the tree `tree` inside `tx` (through a transaction-scoped view), storing a
/// probe's result at `probe`.
pub fn run(
    pool: &Pool,
    tx: &mut Tx<'_>,
    tree: PPtr<PTreeMap>,
    probe: PPtr<Probe>,
    op: TreeOp,
    id: u64,
) -> daisy::Result<()> {
    let mut v = PTreeMap::view(pool, tx, tree)?;
    match op {
        TreeOp::Insert(kv) => {
            for (k, len) in kv {
                v.insert(tx, &key(k), &value(id, k, len))?;
            }
        }
        TreeOp::Fill(start, n, len) => {
            for k in start..start + n {
                v.insert(tx, &key(k), &value(id, k, len))?;
            }
        }
        TreeOp::Remove(ks) => {
            for k in ks {
                v.remove(tx, &key(k))?;
            }
        }
        TreeOp::Move(moves) => {
            for (from, to, len) in moves {
                v.move_key(tx, &key(from), &key(to), &value(id, to, len))?;
            }
        }
        TreeOp::Pop(low, n) => {
            for _ in 0..n {
                if low {
                    v.pop_first(tx)?;
                } else {
                    v.pop_last(tx)?;
                }
            }
        }
        TreeOp::RemoveRange(lo, hi) => {
            let (lo, hi) = ((lo as u64).to_be_bytes(), (hi as u64).to_be_bytes());
            v.remove_range(tx, Bound::Included(&lo), Bound::Excluded(&hi))?;
        }
        TreeOp::RemoveRanks(raw, n) => {
            let len = v.len(tx)?;
            if len > 0 {
                let s = raw % len;
                v.remove_range_by_rank(tx, s, s + n as u64 - 1)?;
            }
        }
        TreeOp::Probe(k, raw) => {
            let (rank, found) = v.rank(tx, &key(k))?;
            let len = v.len(tx)?;
            let at = if len == 0 {
                None
            } else {
                v.entry_at_rank(tx, raw % len)?.map(|(k, _)| key_number(&k))
            };
            drop(v);
            return tx.write(probe, &probe_word(rank, found, at));
        }
    }
    Ok(())
}

/// The DRAM model of the tree and the last probe.
#[derive(Clone, Debug, Default)]
pub struct TreeModel {
    pub map: BTreeMap<Vec<u8>, Vec<u8>>,
    pub probe: Probe,
}

impl TreeModel {
    pub fn apply(&mut self, op: TreeOp, id: u64) {
        let m = &mut self.map;
        match op {
            TreeOp::Insert(kv) => {
                for (k, len) in kv {
                    m.insert(key(k), value(id, k, len));
                }
            }
            TreeOp::Fill(start, n, len) => {
                for k in start..start + n {
                    m.insert(key(k), value(id, k, len));
                }
            }
            TreeOp::Remove(ks) => {
                for k in ks {
                    m.remove(&key(k));
                }
            }
            TreeOp::Move(moves) => {
                for (from, to, len) in moves {
                    if m.remove(&key(from)).is_some() {
                        m.insert(key(to), value(id, to, len));
                    }
                }
            }
            TreeOp::Pop(low, n) => {
                for _ in 0..n {
                    if low {
                        m.pop_first();
                    } else {
                        m.pop_last();
                    }
                }
            }
            TreeOp::RemoveRange(lo, hi) => {
                m.retain(|k, _| !(lo as u64..hi as u64).contains(&key_number(k)));
            }
            TreeOp::RemoveRanks(raw, n) => {
                let len = m.len() as u64;
                if len > 0 {
                    let s = raw % len;
                    let doomed: Vec<Vec<u8>> = m
                        .keys()
                        .skip(s as usize)
                        .take(n as usize)
                        .cloned()
                        .collect();
                    for k in doomed {
                        m.remove(&k);
                    }
                }
            }
            TreeOp::Probe(k, raw) => {
                let key = key(k);
                let rank = m.range(..key.clone()).count() as u64;
                let len = m.len() as u64;
                let at = (len > 0)
                    .then(|| key_number(m.keys().nth((raw % len) as usize).expect("in range")));
                self.probe = probe_word(rank, m.contains_key(&key), at);
            }
        }
    }
}

/// Compare the tree at `tree` (and the stored probe) with the model: the tree's invariants
/// (`check`), its entries in order, ranks and selections at a few ranks through the
/// descents by rank and by key, and the probe. Differences go to `bad`; returns the objects
/// the tree owns (for the reachability check).
pub fn verify(
    pool: &Pool,
    tree: PPtr<PTreeMap>,
    probe: Probe,
    model: &TreeModel,
    bad: &mut Vec<String>,
) -> daisy::Result<Vec<u64>> {
    if tree.is_null() {
        bad.push("the ordered map is missing".into());
        return Ok(vec![]);
    }
    let m = PTreeMap::open(pool, tree)?;
    let c = m.check();
    bad.extend(c.problems.iter().map(|p| format!("ordered map check: {p}")));
    let len = m.len()?;
    if len != model.map.len() as u64 || c.entries != len {
        bad.push(format!(
            "ordered map: len {len}, {} entries found, model {}",
            c.entries,
            model.map.len()
        ));
    }
    let mut it = model.map.iter();
    for (i, e) in m.iter()?.enumerate() {
        let (k, v) = e?;
        match it.next() {
            Some((mk, mv)) if *mk == k && *mv == v => {}
            Some((mk, _)) if *mk == k => {
                bad.push(format!(
                    "ordered map entry {i} (key number {}): value differs from the model",
                    key_number(&k)
                ));
                break;
            }
            other => {
                bad.push(format!(
                    "ordered map entry {i}: key number {} where the model has {:?}",
                    key_number(&k),
                    other.map(|(mk, _)| key_number(mk))
                ));
                break;
            }
        }
    }
    let n = model.map.len();
    for r in [0, n / 3, n / 2, n.saturating_sub(1)] {
        let Some((mk, mv)) = model.map.iter().nth(r) else {
            continue;
        };
        match m.entry_at_rank(r as u64)? {
            Some((k, v)) if k == *mk && v == *mv => {}
            got => bad.push(format!(
                "ordered map: rank {r} holds key number {:?}, model {}",
                got.map(|(k, _)| key_number(&k)),
                key_number(mk)
            )),
        }
        let rank = m.rank(mk)?;
        if rank != (r as u64, true) {
            bad.push(format!(
                "ordered map: key number {} has rank {rank:?}, model {r}",
                key_number(mk)
            ));
        }
    }
    if probe != model.probe {
        bad.push(format!(
            "ordered map probe {probe:?} != model {:?}",
            model.probe
        ));
    }
    Ok(c.objects)
}
