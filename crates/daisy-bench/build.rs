//! Records the versions of the embedded-database crates that Cargo.lock pins, so that the
//! benchmarks print (and their result files carry) the version they measured.

use std::path::Path;

/// (crate in Cargo.lock, environment variable the code reads with `env!`).
const CRATES: [(&str, &str); 5] = [
    ("heed", "DAISY_BENCH_HEED_VERSION"),
    ("lmdb-master-sys", "DAISY_BENCH_LMDB_SYS_VERSION"),
    ("redb", "DAISY_BENCH_REDB_VERSION"),
    ("rusqlite", "DAISY_BENCH_RUSQLITE_VERSION"),
    ("libsqlite3-sys", "DAISY_BENCH_LIBSQLITE3_SYS_VERSION"),
];

fn main() {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).unwrap_or_default();
    for (name, var) in CRATES {
        println!("cargo:rustc-env={var}={}", locked_version(&text, name));
    }
}

/// The version of `name` in Cargo.lock's text ("?" when absent: built outside the workspace).
fn locked_version(lock: &str, name: &str) -> String {
    let header = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l.trim() == header {
            if let Some(v) = lines
                .next()
                .and_then(|v| v.trim().strip_prefix("version = "))
            {
                return v.trim_matches('"').to_string();
            }
        }
    }
    "?".into()
}
