//! `daisy crashtest`: the kill torture loses nothing, in pmem and in msync mode; nor does the
//! block store's (`--blocks`).

use super::*;

/// Kills up to 30 ms apart: enough transactions (about 6,000) that the hash map splits even
/// on a loaded machine, with the sequence's operations taking a quarter of them.
#[test]
fn crashtest_loses_nothing() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "crashtest",
            "--kills",
            "150",
            "--seed",
            "20261122",
            "--format",
            "json",
            "--max-delay-ms",
            "30",
        ])
        .arg("--dir")
        .arg(d.path()));
    let v = json_lines(&o)
        .pop()
        .unwrap_or_else(|| panic!("{}", text(&o)));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(v["kills"], 150, "{v}");
    assert_eq!(v["lost"], 0, "{v}");
    assert_eq!(v["failures"], 0, "{v}");
    assert!(v["transactions_verified"].as_u64().unwrap() > 150, "{v}");
    assert_eq!(v["seed"], 20261122);
    // The workload's hash map grew (split) while processes were being killed.
    assert!(v["map_segments"].as_u64().unwrap() >= 2, "{v}");
    // The sequence spanned several chunks at some recovery (its operations are a quarter of
    // the transactions; each recovery checks it item by item against the model).
    assert!(v["seq_max_chunks"].as_u64().unwrap() >= 3, "{v}");
    // So did the ordered map (it splits: two levels or more; it reaches four at this seed
    // unless a loaded machine lets the children run only a few hundred transactions).
    assert!(v["tree_entries"].as_u64().unwrap() > 0, "{v}");
    assert!(v["tree_height"].as_u64().unwrap() >= 2, "{v}");
    // The pool is cleaned up.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn crashtest_in_msync_mode() {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "crashtest",
            "--kills",
            "30",
            "--seed",
            "7",
            "--format",
            "json",
        ])
        .arg("--dir")
        .arg(d.path())
        .env("DAISY_MODE", "msync"));
    let v = json_lines(&o)
        .pop()
        .unwrap_or_else(|| panic!("{}", text(&o)));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(v["mode"], "msync", "{v}");
    assert_eq!(v["lost"], 0, "{v}");
}

/// `daisy crashtest --blocks` (seed 003's data validation after SIGKILL): four writers of a
/// block store killed 30 times; every block read back is whole and at least its acknowledged
/// version. 512 B blocks make a format 2 store (one fence per write, records settled at open).
#[test]
fn crashtest_loses_no_acknowledged_block_format_2() {
    crashtest_blocks(512, 2);
}

/// The same on 1 KiB blocks: a format 1 store (two fences per write).
#[test]
fn crashtest_loses_no_acknowledged_block_format_1() {
    crashtest_blocks(1024, 1);
}

fn crashtest_blocks(block_size: u32, format: u32) {
    let d = tmpdir();
    let o = run(daisy()
        .args([
            "crashtest",
            "--blocks",
            "--block-size",
            &block_size.to_string(),
            "--kills",
            "30",
            "--seed",
            "20261128",
            "--format",
            "json",
            "--max-delay-ms",
            "30",
        ])
        .arg("--dir")
        .arg(d.path()));
    let v = json_lines(&o)
        .pop()
        .unwrap_or_else(|| panic!("{}", text(&o)));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(v["kills"], 30, "{v}");
    assert_eq!(v["lost"], 0, "{v}");
    assert_eq!(v["corrupt"], 0, "{v}");
    assert_eq!(v["failures"], 0, "{v}");
    assert!(v["blocks_verified"].as_u64().unwrap() > 30, "{v}");
    let mode = v["mode"].as_str().unwrap_or_default();
    assert!(
        mode.contains(&format!(
            "block store format {format}, {block_size} B blocks"
        )),
        "{v}"
    );
}
