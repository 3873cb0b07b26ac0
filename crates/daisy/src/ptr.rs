//! Typed persistent pointers.
//!
//! A [`PPtr<T>`] is the 8-byte offset of a `T` from the start of its pool. It is valid whatever
//! address the pool maps at, and it is itself plain old data, so it can be stored inside other
//! persistent objects. Offset 0 is the pool header, so 0 serves as the null pointer.
//!
//! Only [`Pod`] types can live in a pool: `bytemuck` refuses references, `Box`, `Vec`, raw
//! pointers and anything with padding, so a volatile pointer cannot be persisted by mistake.

#![expect(
    unsafe_code,
    reason = "PPtr<T> is a plain u64 for any T: the Pod and Zeroable implementations"
)]

use bytemuck::{Pod, Zeroable};
use std::fmt;
use std::marker::PhantomData;

/// Offset of a `T` inside a pool; 0 is null.
#[repr(transparent)]
pub struct PPtr<T> {
    off: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> PPtr<T> {
    /// The null pointer.
    pub const fn null() -> Self {
        PPtr {
            off: 0,
            _t: PhantomData,
        }
    }
    /// A pointer from a raw offset. Using a wrong offset is not unsafe (every access is
    /// bounds-checked), but reads garbage or panics on out-of-bounds access.
    pub const fn from_offset(off: u64) -> Self {
        PPtr {
            off,
            _t: PhantomData,
        }
    }
    /// Offset of the object in its pool (0 for null).
    pub const fn offset(self) -> u64 {
        self.off
    }
    /// Whether it is null.
    pub const fn is_null(self) -> bool {
        self.off == 0
    }
    /// Reinterpret as a pointer to another type at the same offset.
    pub const fn cast<U>(self) -> PPtr<U> {
        PPtr::from_offset(self.off)
    }
    /// Pointer to a field `delta` bytes into the object.
    pub const fn byte_add<U>(self, delta: u64) -> PPtr<U> {
        PPtr::from_offset(self.off + delta)
    }
    /// Pointer to element `i` of an array of `T` starting here.
    pub const fn index(self, i: u64) -> PPtr<T>
    where
        T: Sized,
    {
        PPtr::from_offset(self.off + i * std::mem::size_of::<T>() as u64)
    }
}

impl<T> Clone for PPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PPtr<T> {}
impl<T> PartialEq for PPtr<T> {
    fn eq(&self, o: &Self) -> bool {
        self.off == o.off
    }
}
impl<T> Eq for PPtr<T> {}
impl<T> std::hash::Hash for PPtr<T> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.off.hash(h)
    }
}
impl<T> Default for PPtr<T> {
    fn default() -> Self {
        Self::null()
    }
}
impl<T> fmt::Debug for PPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PPtr({:#x})", self.off)
    }
}

// SAFETY: PPtr<T> is a repr(transparent) u64 (PhantomData is a ZST), so the all-zero pattern
// is valid (null) and it has no padding.
unsafe impl<T: 'static> Zeroable for PPtr<T> {}
// SAFETY: as above: every bit pattern is a valid u64 offset, no padding, no interior pointers.
unsafe impl<T: 'static> Pod for PPtr<T> {}

/// A persistent pointer to `len` bytes (used by collections for byte strings).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct PBytes {
    /// Offset of the bytes.
    pub off: u64,
    /// Their length.
    pub len: u64,
}
