//! Generate `daisy.h` from src/lib.rs with cbindgen into OUT_DIR. The committed
//! include/daisy.h must equal it (tests/header.rs checks; `DAISY_BLESS_HEADER=1 cargo test -p
//! daisy-c --test header` rewrites it).

fn main() {
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=src/lib.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config =
        cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml")).expect("cbindgen.toml");
    cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen: generating daisy.h")
        .write_to_file(out.join("daisy.h"));
}
