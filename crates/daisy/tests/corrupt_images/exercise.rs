//! Opening one damaged image and exercising the pool.

use super::mutations::{Expect, Image};
use super::templates::Template;
use super::*;

// ---------------------------------------------------------------------------------------------
// Running one image

#[derive(Debug)]
pub(crate) enum Outcome {
    Refused,
    Opened { problems: usize },
}

/// Open the image and exercise the pool. `Err` is a broken promise other than a panic.
pub(crate) fn exercise(
    path: &Path,
    t: &Template,
    img: &Image,
    rng: &mut StdRng,
) -> Result<Outcome, String> {
    let pool = match Pool::open_with(path, None, ModeChoice::Auto) {
        Err(e) => {
            let msg = e.to_string();
            let shown = path.display().to_string();
            if !msg.contains(&shown) {
                return Err(format!("open error does not name the file: {msg}"));
            }
            let now = std::fs::read(path).map_err(|e| format!("re-read: {e}"))?;
            if now != img.bytes {
                let first = now
                    .iter()
                    .zip(&img.bytes)
                    .position(|(a, b)| a != b)
                    .unwrap_or(now.len().min(img.bytes.len()));
                return Err(format!(
                    "refused open changed the file (first difference at {first:#x}): {msg}"
                ));
            }
            return Ok(Outcome::Refused);
        }
        Ok(p) => p,
    };
    if img.expect == Expect::Refused {
        return Err("open accepted an image it must refuse".into());
    }
    let hdr: Header = bytemuck::pod_read_unaligned(&img.bytes[..HEADER_BYTES]);
    let rep = pool.check(None);
    let info = pool.info();
    let objs = pool.objects();
    if let Ok(objs) = &objs {
        // A listing is either an error or true: every object lies inside the heap.
        for o in objs {
            if o.off < hdr.heap_off || o.off.checked_add(o.size).is_none_or(|e| e > info.size) {
                return Err(format!(
                    "objects() lists {:#x}+{} outside the heap {:#x}..{:#x}",
                    o.off, o.size, hdr.heap_off, info.size
                ));
            }
        }
    }
    if img.expect == Expect::Detected && rep.ok() && objs.is_ok() {
        return Err("damage went unnoticed: open, check and objects all succeeded".into());
    }
    // The root and a few nodes (errors are fine: the root may be gone or of another size).
    if let Ok(root) = pool.root::<Root>() {
        let _ = pool.transaction(|tx| {
            let mut p = tx.read(root)?.head;
            for _ in 0..8 {
                if p.is_null() {
                    break;
                }
                p = tx.read(p)?.next;
            }
            Ok::<_, Error>(())
        });
    }
    // Small allocations: commit one, then free it.
    let small = pool.transaction(|tx| {
        let p = tx.alloc(&[0xa5u8; 64])?;
        tx.write(p, &[0x5au8; 64])?;
        Ok::<_, Error>(p)
    });
    if let Ok(p) = small {
        let _ = pool.transaction(|tx| tx.free(p));
    }
    // Free objects the template had (their metadata may be damaged now), and one that the
    // damaged pool lists, in separate transactions.
    // (Objects that start a chunk are the large ones: damage to their entries matters most.)
    let heads: Vec<u64> = (t.objects.iter().copied())
        .filter(|o| (o - t.hdr.heap_off).is_multiple_of(CHUNK_SIZE))
        .collect();
    let mut victims = vec![t.objects[rng.gen_range(0..t.objects.len())]];
    if !heads.is_empty() {
        victims.push(heads[rng.gen_range(0..heads.len())]);
    }
    if let Ok(objs) = &objs {
        if !objs.is_empty() {
            victims.push(objs[rng.gen_range(0..objs.len())].off);
        }
        // And every large object it lists (damaged entries may make them overlap).
        victims.extend(
            objs.iter()
                .filter(|o| o.size >= CHUNK_SIZE)
                .map(|o| o.off)
                .take(8),
        );
    }
    for off in victims {
        let _ = pool.transaction(|tx| tx.free(PPtr::<u8>::from_offset(off)));
    }
    // Enough small commits for the watermark to pass the frees (so their space is reused),
    // then large allocations: they scan the chunk table, take freed chunks and grow the pool.
    for _ in 0..8 {
        let _ = pool.transaction(|tx| tx.alloc(&[1u64; 8]));
    }
    let mut bigs = Vec::new();
    for size in [300 << 10, 600 << 10, 8 << 20] {
        if let Ok(p) = pool.transaction(|tx| tx.alloc_zeroed_bytes(size)) {
            bigs.push(p);
        }
    }
    for p in bigs {
        let _ = pool.transaction(|tx| tx.free(p));
    }
    let _ = pool.check(None);
    let _ = pool.info();
    drop(pool);
    Ok(Outcome::Opened {
        problems: rep.problems.len(),
    })
}
