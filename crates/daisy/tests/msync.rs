//! msync mode: the pages a thread flushed are synced by that pool's own fence, and by no other
//! pool's. (Issue 16, bug 1: the pending pages used to be one list per thread, shared by every
//! pool the thread used, so a pool dropped with pages still pending poisoned the next pool the
//! thread committed on, after that pool's own pages, its commit record included, were synced.)

use daisy::{Error, ModeChoice, Pool, PoolOptions};

const MIB: u64 = 1 << 20;

fn msync_pool(dir: &std::path::Path, name: &str) -> Pool {
    Pool::create(
        dir.join(name),
        &PoolOptions::new("msync-test")
            .size(4 * MIB)
            .max_size(16 * MIB)
            .lanes(2)
            .mode(ModeChoice::Msync),
    )
    .unwrap()
}

fn tmp_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

/// A transaction on pool A copies 2 KiB into an object it allocated (the copy is written back
/// at once: its pages wait for the commit's msync), then aborts; A is dropped with nothing left
/// to make durable, so no fence runs. The same thread then commits on pool B: that commit must
/// succeed, and so must the ones after it.
#[test]
fn an_aborted_transaction_on_a_dropped_pool_does_not_poison_another_pool() {
    let d = tmp_dir();
    let a = msync_pool(d.path(), "a.pool");
    let b = msync_pool(d.path(), "b.pool");
    assert_eq!(a.mode(), daisy::Mode::Msync);
    let root_b = b.root::<[u64; 4]>().unwrap();
    a.drain().unwrap();
    let aborted = a.transaction(|tx| {
        tx.alloc_bytes(&[7u8; 2048])?;
        Err::<(), _>(Error::Aborted("changed my mind".into()))
    });
    assert!(matches!(aborted, Err(Error::Aborted(_))), "{aborted:?}");
    drop(a);

    b.transaction(|tx| tx.write(root_b, &[1, 2, 3, 4]))
        .expect("a commit on pool B must not sync pool A's pages");
    b.transaction(|tx| tx.update(root_b, |r| r[0] = 10))
        .expect("pool B must stay usable");
    let path = b.path().to_path_buf();
    b.close().unwrap();
    let b = Pool::open(&path, "msync-test").unwrap();
    assert_eq!(b.read(b.root::<[u64; 4]>().unwrap()), [10, 2, 3, 4]);
}

/// Two pools used by one thread each sync their own pages: a commit on one does not make the
/// other's pending pages part of its fence, and an aborted transaction's pages are forgotten
/// (its pool's next commit does not sync them).
#[test]
fn each_pool_syncs_only_its_own_pages() {
    let d = tmp_dir();
    let a = msync_pool(d.path(), "a.pool");
    let b = msync_pool(d.path(), "b.pool");
    let (ra, rb) = (a.root::<u64>().unwrap(), b.root::<u64>().unwrap());
    a.drain().unwrap();
    b.drain().unwrap();
    daisy::counters::enable(true);
    let _ = daisy::counters::take();
    // An aborted transaction on A whose 2 KiB copy was written back at once.
    let _ = a.transaction(|tx| {
        tx.alloc_bytes(&[1u8; 2048])?;
        Err::<(), _>(Error::Aborted("no".into()))
    });
    // A one-word commit on B syncs one page of B: one msync call, nothing of A's.
    b.transaction(|tx| tx.write(rb, &5)).unwrap();
    let on_b = daisy::counters::take();
    // And A's next commit syncs A's new page only, not the aborted transaction's pages.
    a.transaction(|tx| tx.write(ra, &6)).unwrap();
    let on_a = daisy::counters::take();
    daisy::counters::enable(false);
    assert_eq!(on_b.msyncs, 1, "B's commit: {on_b:?}");
    assert_eq!(on_a.msyncs, 1, "A's commit: {on_a:?}");
}
