//! Scratch experiment: which instruction sequence is cheapest for a one-update commit.
use daisy::{map::Mapping, FlushInstr, Mode, Persister};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
fn main() {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open("/dev/shm/fc.bin")
        .unwrap();
    f.set_len(4 << 20).unwrap();
    let m = Mapping::new(&f, 4 << 20, 4 << 20).unwrap();
    let p = Persister::new(Mode::Pmem(FlushInstr::detect().unwrap()));
    let n = 500_000u64;
    let ctr = AtomicU64::new(0);
    for round in 0..3 {
        let t = Instant::now();
        for i in 0..n {
            m.write(4096, &i);
            p.flush(m.at(4096, 8), 8);
            p.fence().unwrap();
        }
        let floor = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        for i in 0..n {
            let off = 65536 + (i % 8) * 16384;
            m.write(off, &i);
            p.flush(m.at(off, 8), 8);
            p.fence().unwrap();
        }
        let rot = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        for i in 0..n {
            let off = 65536 + (i % 8) * 16384;
            ctr.fetch_add(1, Ordering::AcqRel);
            m.write(off, &i);
            p.flush(m.at(off, 8), 8);
            p.fence().unwrap();
            m.write(8192, &i);
        }
        let rot_data = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        for i in 0..n {
            let off = 65536 + (i % 8) * 16384;
            ctr.fetch_add(1, Ordering::AcqRel);
            m.write(off, &i);
            if i % 6 == 0 {
                p.flush(m.at(8192, 8), 8);
            }
            p.flush(m.at(off, 8), 8);
            p.fence().unwrap();
            m.write(8192, &i);
            ctr.swap(1, Ordering::AcqRel);
        }
        let full = t.elapsed().as_nanos() as f64 / n as f64;
        println!("round {round}: floor {floor:.0} | 8 rotating slot lines {rot:.0} ({:.2}x) | +fetch_add +data store {rot_data:.0} ({:.2}x) | +data flush/6 +swap {full:.0} ({:.2}x)", rot/floor, rot_data/floor, full/floor);
    }
    let _ = std::fs::remove_file("/dev/shm/fc.bin");
}
