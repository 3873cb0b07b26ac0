//! CRC-32C (Castagnoli) for log records and headers.
//!
//! Small records dominate (a one-update transaction's record is 56 bytes), and the general
//! crate's setup cost is larger than the work there, so short inputs go through a straight
//! loop of SSE4.2 `crc32` instructions. Results are identical to the `crc32c` crate (tested).

#![expect(
    unsafe_code,
    reason = "the SSE4.2 crc32 instruction, used only when the CPU has it"
)]

/// CRC-32C of `data`, continuing from `crc` (0 to start).
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if data.len() <= 512 && std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE4.2 (checked just above).
            return unsafe { crc_sse42(crc, data) };
        }
    }
    crc32c::crc32c_append(crc, data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc_sse42(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut c = !crc as u64;
    let mut p = data.as_ptr();
    // SAFETY: `end8` and `end` stay within (one past) `data`; every read is of 8 or 1 bytes
    // strictly before them.
    unsafe {
        let end = p.add(data.len());
        // A record checksum starts 4 bytes into the header: take a 4-byte head in one step so
        // the rest runs in whole words.
        if data.len() % 8 >= 4 {
            c = std::arch::x86_64::_mm_crc32_u32(c as u32, (p as *const u32).read_unaligned())
                as u64;
            p = p.add(4);
        }
        let end8 = p.add((end as usize - p as usize) & !7);
        // Four words per turn: a log record is a handful of words, and the loop control
        // would otherwise cost as much as the crc32 instructions themselves.
        while (end8 as usize - p as usize) >= 32 {
            let w = p as *const u64;
            c = _mm_crc32_u64(c, w.read_unaligned());
            c = _mm_crc32_u64(c, w.add(1).read_unaligned());
            c = _mm_crc32_u64(c, w.add(2).read_unaligned());
            c = _mm_crc32_u64(c, w.add(3).read_unaligned());
            p = p.add(32);
        }
        while p < end8 {
            c = _mm_crc32_u64(c, (p as *const u64).read_unaligned());
            p = p.add(8);
        }
        let mut c = c as u32;
        while p < end {
            c = _mm_crc32_u8(c, *p);
            p = p.add(1);
        }
        !c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_crate() {
        let data: Vec<u8> = (0..1500u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for len in [0, 1, 7, 8, 9, 31, 56, 64, 100, 512, 513, 1500] {
            for start in [0u32, 1, 0xdead_beef] {
                assert_eq!(
                    crc32c_append(start, &data[..len]),
                    crc32c::crc32c_append(start, &data[..len]),
                    "len {len}"
                );
            }
        }
    }
}
