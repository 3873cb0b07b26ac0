//! `daisy bench open`: recovery time against the number of objects.

use crate::output::Format;
use crate::size::fmt_size;
use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct OpenArgs {
    #[arg(long, default_value = daisy::DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Objects to put in the pool.
    #[arg(long, default_value_t = 10_000_000)]
    pub objects: u64,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

pub fn run(a: OpenArgs) -> Result<ExitCode> {
    let OpenArgs {
        dir,
        objects,
        format,
    } = a;
    if objects == 0 {
        bail!("--objects must be at least 1");
    }
    let bar = daisy_bench::progress::bar(objects, "objects");
    let r = daisy_bench::openbench::run(&dir, objects, |n| bar.set_position(n));
    bar.finish_and_clear();
    let r = r?;
    if format == Format::Json {
        println!("{}", serde_json::to_string(&r).unwrap());
    } else {
        println!(
            "daisy bench open: {} objects ({} pool, filled in {:.1} s), {} on {}",
            r.objects,
            fmt_size(r.pool_bytes),
            r.fill_seconds,
            r.mode,
            r.fs
        );
        print!("{}", daisy_bench::openbench::table(&r));
    }
    Ok(ExitCode::SUCCESS)
}
