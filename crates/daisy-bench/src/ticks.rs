//! A clock for per-operation latencies: the CPU's time-stamp counter on x86_64 (a few cycles
//! to read, where `Instant::now` costs tens of nanoseconds, as much as what is measured),
//! nanoseconds elsewhere. Callers scale ticks to nanoseconds against a timed run.

#![expect(unsafe_code, reason = "rdtsc is an intrinsic std declares unsafe")]

#[cfg(not(target_arch = "x86_64"))]
use std::time::Instant;

/// CPU time-stamp counter (x86_64) or nanoseconds (elsewhere), for per-operation latencies.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn ticks() -> u64 {
    // SAFETY: rdtsc exists on every x86_64 CPU, reads a counter and touches no memory.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn ticks() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}
