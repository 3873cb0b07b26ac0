//! The report's files: report.md, report.html, results.json and the CSV files (tx.csv,
//! hashmap.csv, kv.csv), written with the `csv` crate from the measured rows.

use super::tables::per_op;
use super::{html, join_fixed, markdown, Report};
use crate::{hashbench, kvbench, txbench};
use anyhow::{anyhow, Result};
use serde::{Serialize, Serializer};
use std::path::{Path, PathBuf};

/// Write report.md, report.html, results.json and the CSV files into `out`.
pub fn write(r: &Report, out: &Path) -> Result<Vec<PathBuf>> {
    let md = out.join("report.md");
    let page = out.join("report.html");
    let json = out.join("results.json");
    let w = |p: &Path, data: String| {
        std::fs::write(p, data).map_err(|e| anyhow!("{}: {e}", p.display()))
    };
    w(&md, markdown(r))?;
    w(&page, html(r))?;
    w(&json, serde_json::to_string_pretty(r)?)?;
    let tx = out.join("tx.csv");
    write_csv(&tx, r.tx.iter().map(TxCsv::of))?;
    let hashmap = out.join("hashmap.csv");
    write_csv(&hashmap, r.hashmap.iter().map(HashmapCsv::of))?;
    let mut files = vec![md, page, json, tx, hashmap];
    if let Ok(k) = &r.kv {
        let kv = out.join("kv.csv");
        write_csv(&kv, k.rows.iter().map(KvCsv::of))?;
        files.push(kv);
    }
    Ok(files)
}

/// A CSV file: a header of the record type's field names, then one record a row. The header
/// is written when there are no rows too: the `csv` crate writes it with the first record, so
/// a default record is written and all but its header line dropped.
fn write_csv<R: Serialize + Default>(path: &Path, rows: impl Iterator<Item = R>) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("{}: {e}", path.display());
    let mut w = csv::Writer::from_writer(vec![]);
    let mut empty = true;
    for row in rows {
        w.serialize(row).map_err(|e| err(&e))?;
        empty = false;
    }
    if empty {
        w.serialize(R::default()).map_err(|e| err(&e))?;
    }
    let mut bytes = w.into_inner().map_err(|e| err(&e))?;
    if empty {
        let header = bytes.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(header);
    }
    std::fs::write(path, bytes).map_err(|e| err(&e))
}

/// A number with a fixed count of decimals, as the CSV files have always written it.
#[derive(Default)]
struct Fixed<const P: usize>(f64);

impl<const P: usize> Serialize for Fixed<P> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = P;
        s.collect_str(&format_args!("{:.p$}", self.0))
    }
}

/// A number in its shortest form (`1`, `0.25`, `1e-7`), empty when there is none.
#[derive(Default)]
struct Shortest(Option<f64>);

impl Serialize for Shortest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(v) => s.collect_str(&v),
            None => s.serialize_none(),
        }
    }
}

/// A row of tx.csv: a [`txbench::Row`].
#[derive(Default, Serialize)]
struct TxCsv<'a> {
    case: &'a str,
    mechanism: &'a str,
    ns_per_op: Fixed<1>,
    ops_per_s: Fixed<0>,
    spread_min_ns: Fixed<1>,
    spread_max_ns: Fixed<1>,
    /// Two decimals, `-` when not counted (PMDK).
    flushes_per_op: String,
    fences_per_op: String,
    runs: usize,
    ops: u64,
    mode: &'a str,
    fs: &'a str,
    /// The library and its version (the embedded databases), empty for the others.
    version: &'a str,
}

impl TxCsv<'_> {
    fn of(r: &txbench::Row) -> TxCsv<'_> {
        TxCsv {
            case: &r.case,
            mechanism: r.mechanism,
            ns_per_op: Fixed(r.ns_per_op),
            ops_per_s: Fixed(r.ops_per_s),
            spread_min_ns: Fixed(r.spread_min_ns),
            spread_max_ns: Fixed(r.spread_max_ns),
            flushes_per_op: per_op(r.flushes_per_op),
            fences_per_op: per_op(r.fences_per_op),
            runs: r.runs,
            ops: r.ops,
            mode: &r.mode,
            fs: &r.fs,
            version: r.version.as_deref().unwrap_or_default(),
        }
    }
}

/// A row of hashmap.csv: a [`hashbench::Row`].
#[derive(Default, Serialize)]
struct HashmapCsv<'a> {
    n: u64,
    mechanism: &'a str,
    total_ms: Fixed<3>,
    ns_per_op: Fixed<1>,
    spread_min_ns: Fixed<1>,
    spread_max_ns: Fixed<1>,
    p99_ns: Fixed<0>,
    max_ns: Fixed<0>,
    flushes_per_op: Shortest,
    fences_per_op: Shortest,
    syncs_per_op: Shortest,
    bytes_per_entry: Shortest,
    bytes_estimated: bool,
    extrapolated: bool,
    runs: usize,
    mode: &'a str,
    fs: &'a str,
    /// The library and its version (the embedded databases), empty for the others.
    version: &'a str,
}

impl HashmapCsv<'_> {
    fn of(r: &hashbench::Row) -> HashmapCsv<'_> {
        HashmapCsv {
            n: r.n,
            mechanism: r.mechanism,
            total_ms: Fixed(r.total_ms),
            ns_per_op: Fixed(r.ns_per_op),
            spread_min_ns: Fixed(r.spread_min_ns),
            spread_max_ns: Fixed(r.spread_max_ns),
            p99_ns: Fixed(r.p99_ns),
            max_ns: Fixed(r.max_ns),
            flushes_per_op: Shortest(r.flushes_per_op),
            fences_per_op: Shortest(r.fences_per_op),
            syncs_per_op: Shortest(r.syncs_per_op),
            bytes_per_entry: Shortest(r.bytes_per_entry),
            bytes_estimated: r.bytes_estimated,
            extrapolated: r.extrapolated,
            runs: r.runs,
            mode: &r.mode,
            fs: &r.fs,
            version: r.version.as_deref().unwrap_or_default(),
        }
    }
}

/// A row of kv.csv: a [`kvbench::Row`].
#[derive(Default, Serialize)]
struct KvCsv<'a> {
    server: &'a str,
    test: &'a str,
    pipeline: usize,
    value_size: usize,
    requests: u64,
    rps: Fixed<0>,
    p50_ms: Shortest,
    p99_ms: Shortest,
    max_ms: Shortest,
    runs: usize,
    /// Each round's requests/s, space-separated.
    rps_runs: String,
    sampled: bool,
    fs: &'a str,
}

impl KvCsv<'_> {
    fn of(r: &kvbench::Row) -> KvCsv<'_> {
        KvCsv {
            server: &r.server,
            test: &r.test,
            pipeline: r.pipeline,
            value_size: r.value_size,
            requests: r.requests,
            rps: Fixed(r.rps),
            p50_ms: Shortest(Some(r.p50_ms)),
            p99_ms: Shortest(Some(r.p99_ms)),
            max_ms: Shortest(Some(r.max_ms)),
            runs: r.runs,
            rps_runs: join_fixed(&r.rps_runs, 0),
            sampled: r.sampled,
            fs: &r.fs,
        }
    }
}
