//! The page cache's write-back knobs (seed 004), read from `/proc/sys/vm` and printed with
//! every file-I/O result: they decide when the kernel writes dirty pages of a file written
//! without a sync, so they decide what a power failure takes. Read only: `daisy bench io`
//! never changes them.

/// The knobs seed 004 names, in its order.
pub const KNOBS: [&str; 4] = [
    "dirty_ratio",
    "dirty_background_ratio",
    "dirty_expire_centisecs",
    "dirty_writeback_centisecs",
];

/// Each knob's value (None where it cannot be read, e.g. no /proc).
pub fn read() -> Vec<(&'static str, Option<u64>)> {
    KNOBS
        .iter()
        .map(|k| {
            let v = std::fs::read_to_string(format!("/proc/sys/vm/{k}"))
                .ok()
                .and_then(|s| s.trim().parse().ok());
            (*k, v)
        })
        .collect()
}

/// One line: `vm.dirty_ratio=20 vm.dirty_background_ratio=10 ...`, with what they mean.
pub fn describe() -> String {
    let kv: Vec<String> = read()
        .into_iter()
        .map(|(k, v)| {
            format!(
                "vm.{k}={}",
                v.map(|v| v.to_string()).unwrap_or_else(|| "?".into())
            )
        })
        .collect();
    format!(
        "page cache (read only, not changed): {} (dirty pages older than dirty_expire are \
         written back by the flusher, which wakes every dirty_writeback; a writer is throttled \
         above dirty_ratio percent of memory dirty)",
        kv.join(" ")
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_knobs_are_read_from_proc_when_it_exists() {
        let got = super::read();
        assert_eq!(got.len(), 4);
        if std::path::Path::new("/proc/sys/vm/dirty_ratio").exists() {
            assert!(got.iter().all(|(_, v)| v.is_some()), "{got:?}");
            assert!(super::describe().contains("vm.dirty_expire_centisecs="));
        }
    }
}
