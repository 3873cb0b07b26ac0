//! Errors. Operating errors (bad files, full pools, I/O) are values; bugs are assertions.
//!
//! Every error that concerns a pool file names the file, so a message printed by the CLI or a
//! server log tells the operator which file is wrong and why.

use std::path::PathBuf;

/// Result alias used throughout the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when creating, opening or using a pool.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system call failed on the pool file.
    #[error("{path}: {what}: {source}")]
    Io {
        /// The pool file.
        path: PathBuf,
        /// What was being done ("open", "mmap", "persist", ...).
        what: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with Daisy's magic bytes.
    #[error("{path}: not a Daisy pool (bad magic bytes)")]
    NotAPool {
        /// The file.
        path: PathBuf,
    },
    /// The pool was written by a different on-media format version.
    #[error("{path}: pool format version {found} is not supported (this build reads versions {oldest} to {supported})")]
    UnsupportedVersion {
        /// The pool file.
        path: PathBuf,
        /// The version the file says.
        found: u32,
        /// The oldest version this build reads.
        oldest: u32,
        /// The version this build writes (and the newest it reads).
        supported: u32,
    },
    /// The pool's layout name differs from the one the program asked for.
    #[error("{path}: pool layout is {found:?}, expected {expected:?}")]
    WrongLayout {
        /// The pool file.
        path: PathBuf,
        /// The pool's layout name.
        found: String,
        /// The layout name the program asked for.
        expected: String,
    },
    /// Checksums or invariants of on-media metadata do not hold.
    #[error("{path}: pool is corrupt: {detail}")]
    Corrupt {
        /// The pool file.
        path: PathBuf,
        /// What does not hold, and where.
        detail: String,
    },
    /// The file is shorter than the pool it claims to hold.
    #[error("{path}: pool is truncated: file is {file_len} bytes, pool needs {needed} bytes")]
    Truncated {
        /// The pool file.
        path: PathBuf,
        /// Its length.
        file_len: u64,
        /// The length its header and state need.
        needed: u64,
    },
    /// Another process (or another handle in this process) holds the pool open.
    #[error("{path}: pool is already open (locked by another process or handle)")]
    AlreadyOpen {
        /// The pool file.
        path: PathBuf,
    },
    /// `create` refused to overwrite an existing file.
    #[error("{path}: file already exists")]
    AlreadyExists {
        /// The file.
        path: PathBuf,
    },
    /// The path names a directory.
    #[error("{path}: is a directory")]
    IsADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A creation parameter is out of range.
    #[error("invalid pool option: {0}")]
    InvalidOption(String),
    /// The pool cannot satisfy an allocation even after growing to its maximum size.
    /// The transaction that asked was rolled back; nothing was written.
    #[error("{path}: pool is full: cannot allocate {requested} bytes (pool size {size}, max size {max_size})")]
    PoolFull {
        /// The pool file.
        path: PathBuf,
        /// Bytes the allocation asked for.
        requested: u64,
        /// The pool's size (end of its heap) when it failed.
        size: u64,
        /// The size it may grow to.
        max_size: u64,
    },
    /// A transaction wrote more log data than one redo record can carry (its length is a
    /// 32-bit field: 4 GiB).
    #[error(
        "transaction too large: {needed} bytes of redo log, a record carries at most {capacity}"
    )]
    TxTooLarge {
        /// Bytes of redo record the transaction needed.
        needed: usize,
        /// Bytes a record may carry.
        capacity: usize,
    },
    /// A transaction's redo record outgrew its log slot and the pool has no free extent for
    /// the rest of it (docs/FORMAT.md section 2.3, "Overflow records").
    #[error("transaction too large for the pool {}: its redo log of {needed} bytes outgrows its {slot}-byte log slot and needs {needed} bytes free in one piece; the pool has {free} bytes free (size {size}, at most {max_size})", path.display())]
    TxTooLargeForPool {
        /// The pool file.
        path: PathBuf,
        /// Bytes of log the transaction needed.
        needed: u64,
        /// Bytes of a log slot.
        slot: u32,
        /// Bytes free in the pool (free chunks, plus the room it may still grow by).
        free: u64,
        /// The pool's size (end of its heap).
        size: u64,
        /// The size it may grow to.
        max_size: u64,
    },
    /// A persistent pointer does not point at a live object of this pool.
    #[error("invalid persistent pointer: offset {offset:#x}: {why}")]
    InvalidPointer {
        /// The pointer's offset.
        offset: u64,
        /// Why it is not valid.
        why: &'static str,
    },
    /// The root object exists with a different size than the type asked for.
    #[error("root object has {found} bytes, the requested type has {expected}")]
    RootTypeMismatch {
        /// The root object's size.
        found: u64,
        /// The size of the type asked for.
        expected: u64,
    },
    /// A persistence operation failed earlier; the pool refuses further writes.
    #[error("{path}: pool is poisoned after a failed persist; reopen it to recover")]
    Poisoned {
        /// The pool file.
        path: PathBuf,
    },
    /// A transaction was started while this thread's own open transactions hold every lane
    /// of the pool: waiting would wait for itself.
    #[error(
        "{path}: a transaction started inside another on the same thread, and that thread already \
         holds every log lane of the pool (a nested transaction takes a lane of its own and is \
         not atomic with the outer one; run the work in the outer transaction)"
    )]
    NestedTransaction {
        /// The pool file.
        path: PathBuf,
    },
    /// The transaction closure returned an error of its own (user abort).
    #[error("transaction aborted: {0}")]
    Aborted(String),
    /// A collection was opened at an offset that does not hold one of the asked-for type.
    #[error("object at {offset:#x} is not a {what}: {why}")]
    NotACollection {
        /// The offset the collection was opened at.
        offset: u64,
        /// The kind of collection asked for.
        what: &'static str,
        /// What is wrong there.
        why: String,
    },
    /// A collection is already open through another handle (handles are exclusive; share one
    /// behind a lock instead).
    #[error("{what} at {offset:#x} is already open through another handle")]
    CollectionInUse {
        /// The collection's offset.
        offset: u64,
        /// Its kind.
        what: &'static str,
    },
    /// A collection cannot take the operation (documented limits, e.g. an oversized key).
    #[error("{0}")]
    Unsupported(String),
    /// A sequence has no item at this index (a server answers Redis's
    /// `ERR index out of range`).
    #[error("index out of range: {index} (length {len})")]
    IndexOutOfRange {
        /// The index asked for (negative: from the end).
        index: i64,
        /// The sequence's length.
        len: u64,
    },
}

impl Error {
    pub(crate) fn io(path: &std::path::Path, what: &'static str, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    }

    pub(crate) fn corrupt(path: &std::path::Path, detail: impl Into<String>) -> Self {
        Error::Corrupt {
            path: path.to_path_buf(),
            detail: detail.into(),
        }
    }
}
