//! The report's files: report.md, report.html, results.json and the CSV files.

use super::tables::per_op;
use super::{html, join_fixed, markdown, Report};
use anyhow::{anyhow, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Write report.md, report.html, results.json and the CSV files into `out`.
pub fn write(r: &Report, out: &Path) -> Result<Vec<PathBuf>> {
    let md = out.join("report.md");
    let json = out.join("results.json");
    let csv = out.join("tx.csv");
    let w = |p: &Path, data: String| {
        std::fs::write(p, data).map_err(|e| anyhow!("{}: {e}", p.display()))
    };
    w(&md, markdown(r))?;
    let page = out.join("report.html");
    w(&page, html(r))?;
    w(&json, serde_json::to_string_pretty(r)?)?;
    let mut c = String::from("case,mechanism,ns_per_op,ops_per_s,spread_min_ns,spread_max_ns,flushes_per_op,fences_per_op,runs,ops,mode,fs\n");
    for row in &r.tx {
        let _ = writeln!(
            c,
            "{},{},{:.1},{:.0},{:.1},{:.1},{},{},{},{},{},{}",
            row.case,
            row.mechanism,
            row.ns_per_op,
            row.ops_per_s,
            row.spread_min_ns,
            row.spread_max_ns,
            per_op(row.flushes_per_op),
            per_op(row.fences_per_op),
            row.runs,
            row.ops,
            row.mode,
            row.fs
        );
    }
    w(&csv, c)?;
    let hcsv = out.join("hashmap.csv");
    let mut c = String::from("n,mechanism,total_ms,ns_per_op,spread_min_ns,spread_max_ns,p99_ns,max_ns,flushes_per_op,fences_per_op,syncs_per_op,bytes_per_entry,bytes_estimated,extrapolated,runs,mode,fs\n");
    let o = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
    for row in &r.hashmap {
        let _ = writeln!(
            c,
            "{},{},{:.3},{:.1},{:.1},{:.1},{:.0},{:.0},{},{},{},{},{},{},{},{},{}",
            row.n,
            row.mechanism,
            row.total_ms,
            row.ns_per_op,
            row.spread_min_ns,
            row.spread_max_ns,
            row.p99_ns,
            row.max_ns,
            o(row.flushes_per_op),
            o(row.fences_per_op),
            o(row.syncs_per_op),
            o(row.bytes_per_entry),
            row.bytes_estimated,
            row.extrapolated,
            row.runs,
            row.mode,
            row.fs
        );
    }
    w(&hcsv, c)?;
    let mut out_files = vec![md, page, json, csv, hcsv];
    if let Ok(k) = &r.kv {
        let kcsv = out.join("kv.csv");
        let mut c = String::from(
            "server,test,pipeline,value_size,requests,rps,p50_ms,p99_ms,max_ms,runs,rps_runs,sampled,fs\n",
        );
        for row in &k.rows {
            let _ = writeln!(
                c,
                "{},{},{},{},{},{:.0},{},{},{},{},{},{},{}",
                row.server,
                row.test,
                row.pipeline,
                row.value_size,
                row.requests,
                row.rps,
                row.p50_ms,
                row.p99_ms,
                row.max_ms,
                row.runs,
                // Each round's requests/s, space-separated (no comma inside the field).
                join_fixed(&row.rps_runs, 0),
                row.sampled,
                row.fs
            );
        }
        w(&kcsv, c)?;
        out_files.push(kcsv);
    }
    Ok(out_files)
}
