//! The committed include/daisy.h is the header the build generates (build.rs, cbindgen).
//! `DAISY_BLESS_HEADER=1 cargo test -p daisy-c --test header` rewrites it.

#[test]
fn committed_header_is_the_generated_one() {
    let generated = include_str!(concat!(env!("OUT_DIR"), "/daisy.h"));
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/include/daisy.h");
    if std::env::var_os("DAISY_BLESS_HEADER").is_some() {
        std::fs::write(path, generated).expect("writing include/daisy.h");
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/daisy.h differs from the header cbindgen generates from src/lib.rs: run \
         DAISY_BLESS_HEADER=1 cargo test -p daisy-c --test header, and commit it"
    );
}
