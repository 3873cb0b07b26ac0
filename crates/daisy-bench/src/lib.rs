//! Daisy's lab: the crash tests and the benchmarks that compare Daisy with its rivals
//! (PMDK's libpmemobj, msync, fsync) in one run.

pub mod blockcrash;
pub mod capi;
pub mod charts;
pub mod crashtest;
pub mod cttree;
pub mod dbrivals;
pub mod hashbench;
pub mod hashbench_daisy;
pub mod hashrivals;
pub mod iobench;
pub mod kvbench;
pub mod kvcrash;
pub mod measure;
pub mod openbench;
pub mod pmdk;
pub mod progress;
pub mod report;
pub mod seqbench;
pub mod stats;
pub mod table;
pub mod ticks;
pub mod treebench;
pub mod txbench;
