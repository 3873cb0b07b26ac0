//! The CPU's side of persistence, x86-64: which cache-line write-back instruction this CPU
//! has (`clwb`, `clflushopt`, `clflush`, found with cpuid), the instructions themselves, the
//! store fence, and copies with non-temporal stores. Everything here is a thin, `unsafe`
//! wrapper around one instruction or intrinsic; the ordering rules that make them a
//! durability protocol live above (`persist`, `tx`). Other architectures have no pmem mode
//! (msync mode only): `FlushInstr::detect` finds no instruction there.

#![expect(
    unsafe_code,
    reason = "the CPU's cache-line write-back, fence and non-temporal store instructions"
)]

/// The cache-line write-back instruction used in pmem mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushInstr {
    /// Write back, line may stay cached (best).
    Clwb,
    /// Write back and invalidate, weakly ordered.
    Clflushopt,
    /// Write back and invalidate, strongly ordered (oldest, slowest).
    Clflush,
}

impl FlushInstr {
    /// The instruction's name: "clwb", "clflushopt" or "clflush".
    pub fn name(self) -> &'static str {
        match self {
            FlushInstr::Clwb => "clwb",
            FlushInstr::Clflushopt => "clflushopt",
            FlushInstr::Clflush => "clflush",
        }
    }

    /// The instruction named `s` (case-insensitive), if any.
    pub fn parse(s: &str) -> Option<FlushInstr> {
        match s.trim().to_ascii_lowercase().as_str() {
            "clwb" => Some(FlushInstr::Clwb),
            "clflushopt" => Some(FlushInstr::Clflushopt),
            "clflush" => Some(FlushInstr::Clflush),
            _ => None,
        }
    }

    /// Whether this CPU executes the instruction.
    pub fn supported(self) -> bool {
        let (clflush, clflushopt, clwb) = cpu_flush_features();
        match self {
            FlushInstr::Clwb => clwb,
            FlushInstr::Clflushopt => clflushopt,
            FlushInstr::Clflush => clflush,
        }
    }

    /// The best instruction this CPU has, honouring `DAISY_FLUSH` when it names a supported
    /// instruction (tools such as valgrind 3.19 cannot decode clwb: `DAISY_FLUSH=clflush`).
    pub fn detect() -> Result<FlushInstr, String> {
        if let Ok(v) = std::env::var("DAISY_FLUSH") {
            let f = FlushInstr::parse(&v).ok_or_else(|| {
                format!("DAISY_FLUSH={v:?}: expected clwb, clflushopt or clflush")
            })?;
            if !f.supported() {
                return Err(format!(
                    "DAISY_FLUSH={v}: this CPU does not support {}",
                    f.name()
                ));
            }
            return Ok(f);
        }
        for f in [
            FlushInstr::Clwb,
            FlushInstr::Clflushopt,
            FlushInstr::Clflush,
        ] {
            if f.supported() {
                return Ok(f);
            }
        }
        Err("this CPU has no cache-line flush instruction; use msync mode".into())
    }

    /// Every instruction the CPU supports, best first (for reports).
    pub fn available() -> Vec<FlushInstr> {
        [
            FlushInstr::Clwb,
            FlushInstr::Clflushopt,
            FlushInstr::Clflush,
        ]
        .into_iter()
        .filter(|f| f.supported())
        .collect()
    }
}

#[cfg(target_arch = "x86_64")]
fn cpu_flush_features() -> (bool, bool, bool) {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // cpuid exists on every x86_64 CPU; leaf 7 returns zeros where it is not defined.
    let (l1, l7) = (__cpuid(1), __cpuid_count(7, 0));
    let clflush = l1.edx & (1 << 19) != 0;
    let clflushopt = l7.ebx & (1 << 23) != 0;
    let clwb = l7.ebx & (1 << 24) != 0;
    (clflush, clflushopt, clwb)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_flush_features() -> (bool, bool, bool) {
    (false, false, false)
}

/// Write back the cache line containing `p`.
#[inline(always)]
pub(crate) fn flush_line(instr: FlushInstr, p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the flush instructions only need `p` to be a valid address for the purpose of
    // a cache lookup; the caller passes addresses inside the pool mapping, and the instruction
    // was checked to exist on this CPU when the pool chose its mode.
    unsafe {
        match instr {
            FlushInstr::Clwb => {
                std::arch::asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags))
            }
            FlushInstr::Clflushopt => {
                std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags))
            }
            FlushInstr::Clflush => std::arch::x86_64::_mm_clflush(p),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (instr, p);
        unreachable!("pmem mode is only available on x86_64");
    }
}

/// Store fence: orders and completes earlier flushes and non-temporal stores.
#[inline(always)]
pub fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no operands and no memory-safety preconditions.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Copy with non-temporal stores where alignment allows; cached stores plus a flush at the
/// unaligned edges. Durable after the next fence.
///
/// # Safety
/// `dst..dst+src.len()` must be valid, writable, and not accessed concurrently.
pub unsafe fn copy_nt(dst: *mut u8, src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let len = src.len();
        let head = ((16 - (dst as usize % 16)) % 16).min(len);
        // SAFETY: (the whole block) indices stay inside [0, len) of both buffers, which the caller
        // guarantees are valid; stream stores go to 16-aligned destinations.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
            let mut i = head;
            while i + 16 <= len {
                let v = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
                _mm_stream_si128(dst.add(i) as *mut __m128i, v);
                i += 16;
            }
            std::ptr::copy_nonoverlapping(src.as_ptr().add(i), dst.add(i), len - i);
            // The cached head and tail still need a write-back.
            if head > 0 {
                std::arch::x86_64::_mm_clflush(dst);
            }
            if i < len {
                std::arch::x86_64::_mm_clflush(dst.add(i));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: forwarded from the caller.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len())
    }
}
