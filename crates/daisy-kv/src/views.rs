//! Views of collections kept between the commands of one transaction.
//!
//! Why: a command on a big hash, set, list or sorted set opens a transaction-scoped view of
//! the value's map, sequence or ordered map; opening one reads and checks its header and
//! claims the collection (a lock and a set insert, undone when the view drops), about a tenth
//! of an HSET or LPUSH inside a group commit. A round of pipelined commands often works on the
//! same few collections (a queue, a leaderboard), so a command gives its view back here when
//! it is done and the next command on the same collection takes it instead of opening one.
//!
//! Why it is safe:
//! * A view is only valid inside the transaction that opened it (it was checked against what
//!   that transaction sees). Each entry remembers its transaction ([`daisy::Tx::serial`]); a
//!   later transaction never gets it, and the keyspace empties the cache at the end of every
//!   group (`Keyspace::committed`, `Keyspace::resync`) so that no claim outlives it.
//! * Within one transaction, an offset names one collection: an object freed by the
//!   transaction is not handed out again before its commit (FORMAT.md section 7, "Reuse after
//!   free"), so a view found under an offset is the view of the collection the caller read
//!   that offset from.
//! * A collection freed in the transaction (its record deleted or overwritten:
//!   `Keyspace::free_owned`) has its cached view dropped first: the free needs the claim, and
//!   nothing may use the view after.
//! * Views are taken out of the cache while in use, so two live views of one collection are
//!   as impossible as before (the second open is refused as the collection being in use).
//!
//! The cache holds a few views per kind; more are dropped oldest first.

use daisy::{BytesMapView, PBytesMap, PPtr, PSeq, PTreeMap, Pool, SeqView, TreeMapView, Tx};

/// Views of one kind kept at most.
const KEEP: usize = 4;

/// A transaction-scoped view that can be opened from a collection's offset.
pub trait Reusable: Sized {
    fn open(pool: &Pool, tx: &Tx, off: u64) -> daisy::Result<Self>;
}

impl Reusable for BytesMapView {
    fn open(pool: &Pool, tx: &Tx, off: u64) -> daisy::Result<Self> {
        PBytesMap::view(pool, tx, PPtr::from_offset(off))
    }
}

impl Reusable for SeqView {
    fn open(pool: &Pool, tx: &Tx, off: u64) -> daisy::Result<Self> {
        PSeq::view(pool, tx, PPtr::from_offset(off))
    }
}

impl Reusable for TreeMapView {
    fn open(pool: &Pool, tx: &Tx, off: u64) -> daisy::Result<Self> {
        PTreeMap::view(pool, tx, PPtr::from_offset(off))
    }
}

/// Kept views of one kind: (offset, view), oldest first, all of transaction `tx`.
struct Kept<V> {
    tx: u64,
    views: Vec<(u64, V)>,
}

impl<V: Reusable> Kept<V> {
    fn new() -> Self {
        Kept {
            tx: 0,
            views: Vec::new(),
        }
    }

    fn take(&mut self, pool: &Pool, tx: &Tx, off: u64) -> daisy::Result<V> {
        if self.tx == tx.serial() {
            if let Some(i) = self.views.iter().position(|(o, _)| *o == off) {
                return Ok(self.views.remove(i).1);
            }
        } else {
            // Another transaction's views: never used again (dropping releases the claims).
            self.views.clear();
        }
        V::open(pool, tx, off)
    }

    fn keep(&mut self, tx: &Tx, off: u64, view: V) {
        if self.tx != tx.serial() {
            self.views.clear();
            self.tx = tx.serial();
        }
        if self.views.len() == KEEP {
            self.views.remove(0);
        }
        self.views.push((off, view));
    }

    fn evict(&mut self, off: u64) {
        self.views.retain(|(o, _)| *o != off);
    }
}

/// The views kept for the running transaction's next commands (see the module comment).
pub struct ViewCache {
    maps: Kept<BytesMapView>,
    seqs: Kept<SeqView>,
    trees: Kept<TreeMapView>,
}

impl Default for ViewCache {
    fn default() -> Self {
        ViewCache {
            maps: Kept::new(),
            seqs: Kept::new(),
            trees: Kept::new(),
        }
    }
}

impl ViewCache {
    /// A view of the byte-string map at `off`: the one a command of `tx` gave back, or a new one.
    pub fn map(&mut self, pool: &Pool, tx: &Tx, off: u64) -> daisy::Result<BytesMapView> {
        self.maps.take(pool, tx, off)
    }

    /// Give a map's view back for the next command of `tx`.
    pub fn keep_map(&mut self, tx: &Tx, view: BytesMapView) {
        self.maps.keep(tx, view.id().offset(), view)
    }

    /// A view of the sequence at `off` (see [`ViewCache::map`]).
    pub fn seq(&mut self, pool: &Pool, tx: &Tx, off: u64) -> daisy::Result<SeqView> {
        self.seqs.take(pool, tx, off)
    }

    pub fn keep_seq(&mut self, tx: &Tx, view: SeqView) {
        self.seqs.keep(tx, view.id().offset(), view)
    }

    /// A view of the ordered map at `off` (see [`ViewCache::map`]).
    pub fn tree(&mut self, pool: &Pool, tx: &Tx, off: u64) -> daisy::Result<TreeMapView> {
        self.trees.take(pool, tx, off)
    }

    /// The kept view of the ordered map at `off`, if a command of `tx` gave one back (none is
    /// opened: for maps a command may not need).
    pub fn kept_tree(&mut self, tx: &Tx, off: u64) -> Option<TreeMapView> {
        let k = &mut self.trees;
        if k.tx != tx.serial() {
            return None;
        }
        let i = k.views.iter().position(|(o, _)| *o == off)?;
        Some(k.views.remove(i).1)
    }

    pub fn keep_tree(&mut self, tx: &Tx, view: TreeMapView) {
        self.trees.keep(tx, view.id().offset(), view)
    }

    /// Drop the kept view of the collection at `off`, if any (it is about to be freed).
    pub fn evict(&mut self, off: u64) {
        self.maps.evict(off);
        self.seqs.evict(off);
        self.trees.evict(off);
    }

    /// Drop every kept view (the transaction ended).
    pub fn clear(&mut self) {
        self.maps.views.clear();
        self.seqs.views.clear();
        self.trees.views.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use daisy::PoolOptions;

    /// A kept view is handed out again only within its transaction, never to a later one;
    /// a view taken out leaves nothing behind (a second open of the collection is refused as
    /// in use, as without the cache); an evicted view releases its claim.
    #[test]
    fn views_are_reused_within_their_transaction_only() {
        let path = std::env::temp_dir().join(format!("daisy-views-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let pool = Pool::create(&path, &PoolOptions::new("views")).unwrap();
        let mut cache = ViewCache::default();
        let id = pool.transaction(PBytesMap::create_in).unwrap().offset();
        let first_serial = pool
            .transaction(|tx| {
                let mut v = cache.map(&pool, tx, id)?;
                v.insert(tx, b"k", b"1")?;
                cache.keep_map(tx, v);
                // Taken again: the same view (the claim is still held by it, so a fresh open
                // would be refused).
                let v = cache.map(&pool, tx, id)?;
                assert!(PBytesMap::view(&pool, tx, PPtr::from_offset(id)).is_err());
                assert_eq!(v.get(tx, b"k")?.as_deref(), Some(&b"1"[..]));
                cache.keep_map(tx, v);
                cache.evict(id);
                // Evicted: its claim is gone, a new view opens.
                drop(PBytesMap::view(&pool, tx, PPtr::from_offset(id))?);
                let v = cache.map(&pool, tx, id)?;
                cache.keep_map(tx, v);
                Ok::<_, daisy::Error>(tx.serial())
            })
            .unwrap();
        pool.transaction(|tx| {
            assert_ne!(tx.serial(), first_serial);
            // The previous transaction's view is dropped, not reused: its claim is released.
            let v = cache.map(&pool, tx, id)?;
            assert!(cache.maps.views.is_empty());
            assert_eq!(v.len(tx)?, 1);
            Ok::<_, daisy::Error>(())
        })
        .unwrap();
        cache.clear();
        drop(pool);
        let _ = std::fs::remove_file(&path);
    }
}
