//! How a subcommand prints: text or JSON, and the progress of staged benchmarks.

use clap::ValueEnum;

/// Output of the pool, crashtest and bench open/tx subcommands.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// Output of the table-printing benchmarks (hashmap, kv).
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum TableFormat {
    /// A human-readable table.
    #[value(alias = "text")]
    Table,
    /// One JSON object per row.
    Json,
}

/// Progress of a staged benchmark on the terminal: a bar of stages, with the benchmark's
/// notes printed above it (to stderr, and no bar, when stdout carries JSON).
pub struct Stages {
    pub bar: daisy_bench::progress::ProgressBar,
    json: bool,
}

impl Stages {
    pub fn new(json: bool) -> Stages {
        let bar = if json {
            daisy_bench::progress::hidden()
        } else {
            daisy_bench::progress::stages(0)
        };
        Stages { bar, json }
    }

    pub fn note(&self, n: &str) {
        if self.json {
            eprintln!("{n}")
        } else {
            self.bar.suspend(|| println!("{n}"))
        }
    }

    pub fn stage(&self, done: u64, total: u64, what: &str) {
        self.bar.set_length(total);
        self.bar.set_position(done);
        self.bar.set_message(what.to_string());
    }
}
