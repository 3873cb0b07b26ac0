//! `--help` on every command.

use super::*;

#[test]
fn help_is_available_everywhere() {
    for args in [
        vec!["--help"],
        vec!["pool", "--help"],
        vec!["pool", "create", "--help"],
        vec!["pool", "info", "--help"],
        vec!["pool", "check", "--help"],
        vec!["crashtest", "--help"],
        vec!["bench", "tx", "--help"],
        vec!["bench", "hashmap", "--help"],
        vec!["bench", "kv", "--help"],
        vec!["report", "--help"],
    ] {
        let o = run(daisy().args(&args));
        assert!(o.status.success(), "{args:?}");
        assert!(text(&o).contains("Usage"), "{args:?}");
    }
}
