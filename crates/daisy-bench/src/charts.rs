//! SVG charts for the report (plotters, SVG backend: the page stays self-contained).
//!
//! Times differ by orders of magnitude between mechanisms (DRAM at tens of nanoseconds,
//! fsync at hundreds of microseconds), so both axes of the hash-map chart are logarithmic, as
//! seed 000 asks.

use crate::hashbench;
use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// One colour per mechanism, the same in every chart (bench tx calls PMDK `pmdk` and the
/// file rivals `msync`/`fsync`; bench hashmap names their per-op and end variants).
fn mech_color(m: &str) -> RGBColor {
    match m {
        "daisy" => RGBColor(214, 39, 40),
        "daisy-batch" => RGBColor(255, 127, 14),
        "store-flush" => RGBColor(31, 119, 180),
        "store-end" => RGBColor(174, 199, 232),
        "pmdk" | "pmdk-tx" => RGBColor(44, 160, 44),
        "msync" | "msync-op" => RGBColor(148, 103, 189),
        "msync-end" => RGBColor(140, 86, 75),
        "fsync" | "fsync-op" => RGBColor(227, 119, 194),
        "fsync-end" => RGBColor(127, 127, 127),
        "dram" => RGBColor(188, 189, 34),
        "redis-none" => RGBColor(31, 119, 180),
        "redis-rdb" => RGBColor(44, 160, 44),
        "redis-aof-everysec" => RGBColor(148, 103, 189),
        "redis-aof-always" => RGBColor(140, 86, 75),
        _ => RGBColor(23, 190, 207),
    }
}

/// The legend, in its own column right of the plot: a line or a box per mechanism.
fn draw_legend(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    names: &[&str],
    boxes: bool,
) -> Result<()> {
    for (i, m) in names.iter().enumerate() {
        let c = mech_color(m);
        let y = 50 + i as i32 * 22;
        if boxes {
            area.draw(&Rectangle::new([(4, y - 6), (22, y + 6)], c.filled()))
        } else {
            area.draw(&PathElement::new(vec![(4, y), (24, y)], c.stroke_width(3)))
        }
        .map_err(err)?;
        area.draw(&Text::new(m.to_string(), (30, y - 7), ("sans-serif", 14)))
            .map_err(err)?;
    }
    Ok(())
}

/// The label of a group of bars at its centre (x = i + 0.5), nothing elsewhere.
fn group_label(labels: &[impl AsRef<str>], x: f64) -> String {
    let i = x.floor() as usize;
    if (x - x.floor() - 0.5).abs() < 0.01 && i < labels.len() {
        labels[i].as_ref().to_string()
    } else {
        String::new()
    }
}

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("chart: {e}")
}

/// One line per mechanism: `y(row)` against N, both axes logarithmic.
fn by_n(
    rows: &[hashbench::Row],
    title: &str,
    y_desc: &str,
    y: impl Fn(&hashbench::Row) -> Option<f64>,
) -> Result<String> {
    let mut names: Vec<&str> = vec![];
    for r in rows {
        if !names.contains(&r.mechanism) {
            names.push(r.mechanism);
        }
    }
    let pts: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| y(r).map(|v| (r.n as f64, v)))
        .filter(|p| p.1 > 0.0 && p.1.is_finite())
        .collect();
    if pts.is_empty() {
        return Err(anyhow!("chart: no data"));
    }
    let (xmin, xmax) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ymin, ymax) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        // The legend gets its own column on the right, clear of the lines.
        let (plot, legend) = root.split_horizontally(800);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (xmin * 0.7..xmax * 1.4).log_scale(),
                (ymin * 0.5..ymax * 2.0).log_scale(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("N (pairs inserted)")
            .y_desc(y_desc)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v}"))
            .draw()
            .map_err(err)?;
        for m in &names {
            let c = mech_color(m);
            let line: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.mechanism == *m)
                .filter_map(|r| y(r).map(|v| (r.n as f64, v)))
                .filter(|p| p.1 > 0.0 && p.1.is_finite())
                .collect();
            chart
                .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
                .map_err(err)?
                .label(*m)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
            chart
                .draw_series(line.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                .map_err(err)?;
        }
        draw_legend(&legend, &names, false)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Nanoseconds per insert by N, every mechanism (log-log).
pub fn hashmap_ns(rows: &[hashbench::Row]) -> Result<String> {
    by_n(
        rows,
        "Hash map: time per insert (log-log)",
        "ns per insert",
        |r| Some(r.ns_per_op),
    )
}

/// Speed-up against msync-op (msync-op's time / the row's), by N: above 1 is faster.
pub fn hashmap_vs_msync(rows: &[hashbench::Row]) -> Result<String> {
    by_n(
        rows,
        "Hash map: times faster than msync per insert (normalized, log)",
        "x msync-op",
        |r| r.speedup_vs_msync_op,
    )
}

/// Small transactions: nanoseconds per transaction for each case, one bar per mechanism
/// (log scale: PMDK and fsync are an order of magnitude above the floor).
pub fn tx_ns(rows: &[crate::txbench::Row]) -> Result<String> {
    let mut cases: Vec<&str> = vec![];
    let mut mechs: Vec<&str> = vec![];
    for r in rows {
        if !cases.contains(&r.case.as_str()) {
            cases.push(&r.case);
        }
        if !mechs.contains(&r.mechanism) {
            mechs.push(r.mechanism);
        }
    }
    let vals: Vec<f64> = rows
        .iter()
        .map(|r| r.ns_per_op)
        .filter(|v| *v > 0.0)
        .collect();
    if vals.is_empty() {
        return Err(anyhow!("chart: no data"));
    }
    let ymin = vals.iter().cloned().fold(f64::MAX, f64::min) * 0.5;
    let ymax = vals.iter().cloned().fold(f64::MIN, f64::max) * 2.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, legend) = root.split_horizontally(800);
        let n = cases.len() as f64;
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                "Small transactions: time per transaction (log)",
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..n, (ymin..ymax).log_scale())
            .map_err(err)?;
        let labels = cases.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(cases.len() * 2 + 1)
            .x_label_formatter(&|x| group_label(&labels, *x))
            .y_desc("ns per transaction")
            .y_label_formatter(&|v| format!("{v}"))
            .draw()
            .map_err(err)?;
        let w = 0.8 / mechs.len() as f64;
        for r in rows {
            let (Some(ci), Some(mi)) = (
                cases.iter().position(|c| *c == r.case),
                mechs.iter().position(|m| *m == r.mechanism),
            ) else {
                continue;
            };
            let x0 = ci as f64 + 0.1 + mi as f64 * w;
            let c = mech_color(r.mechanism);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, ymin), (x0 + w * 0.9, r.ns_per_op)],
                    c.filled(),
                )))
                .map_err(err)?;
        }
        draw_legend(&legend, &mechs, true)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Redis benchmark: requests/s per server as bars, grouped by case (test and pipeline depth),
/// with each bar's p99 latency as a black marker on the right-hand (log) axis.
pub fn kv_rps(rows: &[crate::kvbench::Row]) -> Result<String> {
    let n = rows
        .iter()
        .map(|r| r.requests)
        .max()
        .ok_or_else(|| anyhow!("chart: no data"))?;
    let rows: Vec<&crate::kvbench::Row> = rows
        .iter()
        .filter(|r| r.requests == n && r.value_size == rows[0].value_size)
        .collect();
    let mut cases: Vec<(String, usize)> = vec![];
    let mut servers: Vec<&str> = vec![];
    for r in &rows {
        let c = (r.test.to_ascii_uppercase(), r.pipeline);
        if !cases.contains(&c) {
            cases.push(c);
        }
        if !servers.contains(&r.server.as_str()) {
            servers.push(&r.server);
        }
    }
    let ymax = rows.iter().map(|r| r.rps).fold(0.0, f64::max) * 1.15;
    let (pmin, pmax) = rows
        .iter()
        .map(|r| r.p99_ms)
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if ymax <= 0.0 || pmin > pmax {
        return Err(anyhow!("chart: no data"));
    }
    let labels: Vec<String> = cases.iter().map(|(t, p)| format!("{t} P{p}")).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, legend) = root.split_horizontally(780);
        let k = cases.len() as f64;
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                format!("Redis benchmark, N = {n}: requests/s (bars), p99 latency (dots)"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .right_y_label_area_size(60)
            .build_cartesian_2d(0f64..k, 0f64..ymax)
            .map_err(err)?
            .set_secondary_coord(0f64..k, ((pmin * 0.5)..(pmax * 2.0)).log_scale());
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(cases.len() * 2 + 1)
            .x_label_formatter(&|x| group_label(&labels, *x))
            .y_desc("requests per second")
            .y_label_formatter(&|v| format!("{:.0}k", v / 1000.0))
            .draw()
            .map_err(err)?;
        chart
            .configure_secondary_axes()
            .y_desc("p99 ms (log)")
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        let w = 0.8 / servers.len() as f64;
        for r in &rows {
            let c = (r.test.to_ascii_uppercase(), r.pipeline);
            let (Some(ci), Some(si)) = (
                cases.iter().position(|x| *x == c),
                servers.iter().position(|s| *s == r.server),
            ) else {
                continue;
            };
            let x0 = ci as f64 + 0.1 + si as f64 * w;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, 0.0), (x0 + w * 0.9, r.rps)],
                    mech_color(&r.server).filled(),
                )))
                .map_err(err)?;
            if r.p99_ms > 0.0 {
                chart
                    .draw_secondary_series(std::iter::once(Circle::new(
                        (x0 + w * 0.45, r.p99_ms),
                        4,
                        BLACK.filled(),
                    )))
                    .map_err(err)?;
            }
        }
        draw_legend(&legend, &servers, true)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Redis benchmark: latency percentile curves (p50, p99, max) per server for one case (SET at
/// pipeline 1 when measured), log scale.
pub fn kv_latency(rows: &[crate::kvbench::Row]) -> Result<String> {
    let n = rows
        .iter()
        .map(|r| r.requests)
        .max()
        .ok_or_else(|| anyhow!("chart: no data"))?;
    let pick = |test: &str, p: usize| -> Vec<&crate::kvbench::Row> {
        rows.iter()
            .filter(|r| r.requests == n && r.test.eq_ignore_ascii_case(test) && r.pipeline == p)
            .collect()
    };
    let (case, sel) = [("SET", 1), ("GET", 1), ("SET", 16)]
        .iter()
        .map(|&(t, p)| (format!("{t} P{p}"), pick(t, p)))
        .find(|(_, v)| !v.is_empty())
        .ok_or_else(|| anyhow!("chart: no data"))?;
    let vals: Vec<f64> = sel
        .iter()
        .flat_map(|r| [r.p50_ms, r.p99_ms, r.max_ms])
        .filter(|v| *v > 0.0)
        .collect();
    if vals.is_empty() {
        return Err(anyhow!("chart: no data"));
    }
    let ymin = vals.iter().cloned().fold(f64::MAX, f64::min) * 0.5;
    let ymax = vals.iter().cloned().fold(f64::MIN, f64::max) * 2.0;
    let names: Vec<&str> = sel.iter().map(|r| r.server.as_str()).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 380)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, legend) = root.split_horizontally(780);
        let xs = ["p50", "p99", "max"];
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                format!("Redis benchmark, {case}, N = {n}: latency percentiles (log)"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.2f64..2.2, (ymin..ymax).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(3)
            .x_label_formatter(&|x| {
                let i = x.round() as usize;
                if (x - x.round()).abs() < 0.01 && i < xs.len() {
                    xs[i].to_string()
                } else {
                    String::new()
                }
            })
            .y_desc("latency, ms")
            .y_label_formatter(&|v| {
                let t = format!("{v:.3}");
                t.trim_end_matches('0').trim_end_matches('.').to_string()
            })
            .draw()
            .map_err(err)?;
        for r in &sel {
            let c = mech_color(&r.server);
            let pts: Vec<(f64, f64)> = [r.p50_ms, r.p99_ms, r.max_ms]
                .iter()
                .enumerate()
                .filter(|(_, v)| **v > 0.0)
                .map(|(i, v)| (i as f64, *v))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(3)))
                .map_err(err)?;
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled())))
                .map_err(err)?;
        }
        draw_legend(&legend, &names, false)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
