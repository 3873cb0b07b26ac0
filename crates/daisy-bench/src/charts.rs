//! SVG charts for the report (plotters, SVG backend: the page stays self-contained).
//!
//! Times differ by orders of magnitude between mechanisms (DRAM at tens of nanoseconds,
//! fsync at hundreds of microseconds), so both axes of the hash-map chart are logarithmic, as
//! seed 000 asks.

use crate::hashbench;
use crate::table::grouped;
use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// The Okabe-Ito palette: eight colours told apart with every common colour-vision
/// deficiency (the yellow darkened to read on white).
mod okabe_ito {
    use plotters::style::RGBColor;
    pub const ORANGE: RGBColor = RGBColor(0xE6, 0x9F, 0x00);
    pub const SKY_BLUE: RGBColor = RGBColor(0x56, 0xB4, 0xE9);
    pub const BLUISH_GREEN: RGBColor = RGBColor(0x00, 0x9E, 0x73);
    pub const YELLOW: RGBColor = RGBColor(0xC8, 0xB4, 0x00);
    pub const BLUE: RGBColor = RGBColor(0x00, 0x72, 0xB2);
    pub const VERMILLION: RGBColor = RGBColor(0xD5, 0x5E, 0x00);
    pub const REDDISH_PURPLE: RGBColor = RGBColor(0xCC, 0x79, 0xA7);
    pub const BLACK: RGBColor = RGBColor(0x00, 0x00, 0x00);
    pub const GREY: RGBColor = RGBColor(0x99, 0x99, 0x99);
    /// Not Okabe-Ito's: a second grey for the I/O lab's second disk row.
    pub const DARK_GREY: RGBColor = RGBColor(0x55, 0x55, 0x55);
}

/// The kind of a mechanism, from its name, so that a new mechanism slots in: `daisy*` is
/// Daisy, `store-*` and `pmdk*` the NVM floor and PMDK, `msync*`/`fsync*` the file rivals,
/// `lmdb*`/`redb*`/`sqlite*` (and `rocksdb*`, `leveldb*`) the databases, `dram` DRAM,
/// `redis-*` Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    Daisy,
    Nvm,
    Files,
    Databases,
    Dram,
    Redis,
    Other,
}

impl Group {
    pub fn of(name: &str) -> Group {
        let starts = |ps: &[&str]| ps.iter().any(|p| name.starts_with(p));
        if starts(&["daisy"]) {
            Group::Daisy
        } else if starts(&["store", "pmdk", "libpmem", "fio-pmemblk", "fio-libpmem"]) {
            Group::Nvm
        } else if starts(&[
            "msync",
            "fsync",
            "fdatasync",
            "write",
            "pwrite",
            "mmap",
            "fio-mmap",
            "fio-psync",
        ]) {
            Group::Files
        } else if starts(&["lmdb", "redb", "sqlite", "rocksdb", "leveldb", "sled"]) {
            Group::Databases
        } else if starts(&["dram", "std"]) {
            Group::Dram
        } else if starts(&["redis"]) {
            Group::Redis
        } else {
            Group::Other
        }
    }

    /// The legend's heading of the group.
    pub fn title(self) -> &'static str {
        match self {
            Group::Daisy => "Daisy",
            Group::Nvm => "NVM floor, PMDK",
            Group::Files => "file rivals",
            Group::Databases => "databases",
            Group::Dram => "DRAM (not persisted)",
            Group::Redis => "Redis",
            Group::Other => "other",
        }
    }
}

/// A marker's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Circle,
    Square,
    Diamond,
    TriangleUp,
    TriangleDown,
    Cross,
    Plus,
    Star,
}

/// How a series looks: its colour by family (the name's stem: `msync-op` and `msync-end`
/// share blue), its marker by family, and per-operation durability drawn solid with filled
/// markers, one durability point at the end (`-end`, `-batch`) dashed with hollow ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Look {
    pub color: RGBColor,
    pub shape: Shape,
    /// `-end` and `-batch`: dashed line, hollow marker.
    pub at_end: bool,
}

/// The look of a mechanism or server, by name pattern (the same in every chart).
pub fn look(m: &str) -> Look {
    use okabe_ito::*;
    let at_end = m.ends_with("-end") || m.ends_with("-batch") || m.ends_with("-bulk");
    let starts = |p: &str| m.starts_with(p);
    let (color, shape) = if starts("daisy") {
        (VERMILLION, Shape::Circle)
    } else if starts("store") {
        (BLACK, Shape::Cross)
    } else if starts("pmdk") {
        (BLUISH_GREEN, Shape::TriangleUp)
    } else if starts("msync") {
        (BLUE, Shape::Square)
    } else if starts("fsync") || starts("fdatasync") {
        (SKY_BLUE, Shape::Diamond)
    } else if starts("lmdb") {
        (ORANGE, Shape::TriangleDown)
    } else if starts("redb") {
        (REDDISH_PURPLE, Shape::Star)
    } else if starts("sqlite") {
        (YELLOW, Shape::Square)
    } else if starts("dram") {
        (GREY, Shape::Plus)
    } else if m.ends_with("-disk") {
        // The I/O lab's rows on a disk file (seed 002's ext4 rows).
        if m.contains("fsync") {
            (DARK_GREY, Shape::Cross)
        } else {
            (GREY, Shape::Plus)
        }
    } else if starts("libpmemblk") {
        (BLUISH_GREEN, Shape::TriangleUp)
    } else if starts("fio-pmemblk") {
        (ORANGE, Shape::TriangleDown)
    } else if starts("fio-libpmem") {
        (BLACK, Shape::Cross)
    } else if starts("fio-mmap") {
        (BLUE, Shape::Square)
    } else if starts("fio-psync-fsync") {
        (REDDISH_PURPLE, Shape::Star)
    } else if starts("fio-psync") {
        (SKY_BLUE, Shape::Diamond)
    } else if starts("pwrite") {
        (YELLOW, Shape::Square)
    } else if m == "redis-none" {
        (BLUE, Shape::Square)
    } else if m == "redis-rdb" {
        (BLUISH_GREEN, Shape::TriangleUp)
    } else if m == "redis-aof-everysec" {
        (ORANGE, Shape::Diamond)
    } else if m == "redis-aof-always" {
        (REDDISH_PURPLE, Shape::TriangleDown)
    } else {
        (SKY_BLUE, Shape::Plus)
    };
    Look {
        color,
        shape,
        at_end,
    }
}

/// One colour per mechanism, the same in every chart.
fn mech_color(m: &str) -> RGBColor {
    look(m).color
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// A marker of `look` centred at `(x, y)` (pixels of `area`), about `r` pixels in radius:
/// filled for per-operation durability, hollow for one durability point at the end.
fn draw_marker(area: &Area, look: Look, (x, y): (i32, i32), r: i32) -> Result<()> {
    let fill = if look.at_end {
        WHITE.filled()
    } else {
        look.color.filled()
    };
    let stroke = look.color.stroke_width(2);
    let polygon = |pts: Vec<(i32, i32)>| -> Result<()> {
        area.draw(&Polygon::new(pts.clone(), fill)).map_err(err)?;
        let mut outline = pts.clone();
        outline.push(pts[0]);
        area.draw(&PathElement::new(outline, stroke)).map_err(err)
    };
    match look.shape {
        Shape::Circle => {
            area.draw(&Circle::new((x, y), r, fill)).map_err(err)?;
            area.draw(&Circle::new((x, y), r, stroke)).map_err(err)
        }
        Shape::Square => polygon(vec![
            (x - r, y - r),
            (x + r, y - r),
            (x + r, y + r),
            (x - r, y + r),
        ]),
        Shape::Diamond => {
            let r = r + 1;
            polygon(vec![(x, y - r), (x + r, y), (x, y + r), (x - r, y)])
        }
        Shape::TriangleUp => polygon(vec![(x, y - r - 1), (x + r + 1, y + r), (x - r - 1, y + r)]),
        Shape::TriangleDown => {
            polygon(vec![(x, y + r + 1), (x + r + 1, y - r), (x - r - 1, y - r)])
        }
        Shape::Star => {
            let pts = (0..10)
                .map(|i| {
                    let a = std::f64::consts::PI * (i as f64) / 5.0 - std::f64::consts::FRAC_PI_2;
                    let rr = if i % 2 == 0 {
                        r as f64 + 2.0
                    } else {
                        r as f64 * 0.5
                    };
                    (
                        x + (rr * a.cos()).round() as i32,
                        y + (rr * a.sin()).round() as i32,
                    )
                })
                .collect();
            polygon(pts)
        }
        Shape::Cross => {
            area.draw(&PathElement::new(
                vec![(x - r, y - r), (x + r, y + r)],
                stroke,
            ))
            .map_err(err)?;
            area.draw(&PathElement::new(
                vec![(x - r, y + r), (x + r, y - r)],
                stroke,
            ))
            .map_err(err)
        }
        Shape::Plus => {
            let r = r + 1;
            area.draw(&PathElement::new(vec![(x - r, y), (x + r, y)], stroke))
                .map_err(err)?;
            area.draw(&PathElement::new(vec![(x, y - r), (x, y + r)], stroke))
                .map_err(err)
        }
    }
}

/// A short sample of a series' line (dashed for `-end`) with its marker.
fn draw_line_sample(area: &Area, look: Look, (x, y): (i32, i32)) -> Result<()> {
    let stroke = look.color.stroke_width(2);
    if look.at_end {
        for (a, b) in [(x, x + 7), (x + 11, x + 18), (x + 22, x + 28)] {
            area.draw(&PathElement::new(vec![(a, y), (b, y)], stroke))
                .map_err(err)?;
        }
    } else {
        area.draw(&PathElement::new(vec![(x, y), (x + 28, y)], stroke))
            .map_err(err)?;
    }
    draw_marker(area, look, (x + 14, y), 4)
}

/// The legend, in its own column right of the plot, grouped by kind of mechanism (a heading
/// per group): a line sample with its marker, or a box, per mechanism.
fn draw_legend(area: &Area, names: &[&str], boxes: bool) -> Result<()> {
    let mut y = 44;
    let mut group = None;
    let bold = ("sans-serif", 15).into_font().style(FontStyle::Bold);
    for m in names {
        let g = Group::of(m);
        if group != Some(g) {
            if group.is_some() {
                y += 6;
            }
            area.draw(&Text::new(g.title(), (4, y - 7), bold.clone()))
                .map_err(err)?;
            y += 20;
            group = Some(g);
        }
        let l = look(m);
        if boxes {
            area.draw(&Rectangle::new([(8, y - 6), (24, y + 6)], l.color.filled()))
                .map_err(err)?;
        } else {
            draw_line_sample(area, l, (4, y))?;
        }
        area.draw(&Text::new(m.to_string(), (38, y - 8), ("sans-serif", 15)))
            .map_err(err)?;
        y += 22;
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

/// An axis label: thousands separated, small values with the digits they need.
fn axis_number(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        grouped(v, 0)
    } else if a >= 1.0 {
        let t = format!("{v:.1}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        let t = format!("{v:.3}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A log axis's range: whole decades around `(min, max)` with some room, so that every axis
/// has labelled ticks however close the figures are.
fn decades((min, max): (f64, f64)) -> (f64, f64) {
    (
        10f64.powf((min * 0.8).log10().floor()),
        10f64.powf((max * 1.25).log10().ceil()),
    )
}

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("chart: {e}")
}

/// Labels at the right ends of lines: each at its line's last point, moved apart vertically
/// (at least `gap` pixels) so none overlaps, within `top..bottom`.
fn spread_labels(mut ys: Vec<(usize, i32)>, gap: i32, top: i32, bottom: i32) -> Vec<(usize, i32)> {
    ys.sort_by_key(|&(_, y)| y);
    for i in 1..ys.len() {
        if ys[i].1 < ys[i - 1].1 + gap {
            ys[i].1 = ys[i - 1].1 + gap;
        }
    }
    if let Some(last) = ys.last().map(|l| l.1) {
        if last > bottom {
            let shift = last - bottom;
            for y in &mut ys {
                y.1 -= shift;
            }
            for i in (0..ys.len().saturating_sub(1)).rev() {
                if ys[i].1 > ys[i + 1].1 - gap {
                    ys[i].1 = ys[i + 1].1 - gap;
                }
            }
        }
    }
    for y in &mut ys {
        y.1 = y.1.max(top);
    }
    ys
}

/// One line per mechanism: `y(row)` against N, both axes logarithmic. Lines are coloured
/// and marked by family, dashed for one durability point at the end, labelled at their right
/// ends; the legend groups them by kind.
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
    // Grouped: Daisy first, then the NVM floor and PMDK, the files, the databases, DRAM.
    names.sort_by_key(|m| Group::of(m));
    let series = |m: &str| -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.mechanism == m)
            .filter_map(|r| y(r).map(|v| (r.n as f64, v)))
            .filter(|p| p.1 > 0.0 && p.1.is_finite())
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let pts: Vec<(f64, f64)> = names.iter().flat_map(|m| series(m)).collect();
    if pts.is_empty() {
        return Err(anyhow!("chart: no data"));
    }
    let (xmin, xmax) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ymin, ymax) = decades(
        pts.iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1))),
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        // The legend gets its own column on the right, clear of the lines and their labels.
        let (plot, legend) = root.split_horizontally(890);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .margin_right(120)
            .x_label_area_size(44)
            .y_label_area_size(78)
            .build_cartesian_2d(
                (xmin * 0.7..xmax * 1.4).log_scale(),
                (ymin..ymax).log_scale(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("N (pairs inserted)")
            .y_desc(y_desc)
            .y_labels(20)
            .x_label_formatter(&|v| axis_number(*v))
            .y_label_formatter(&|v| axis_number(*v))
            .label_style(("sans-serif", 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let mut ends = vec![];
        for (i, m) in names.iter().enumerate() {
            let l = look(m);
            let line = series(m);
            if line.is_empty() {
                continue;
            }
            if l.at_end {
                chart
                    .draw_series(DashedLineSeries::new(
                        line.clone(),
                        7,
                        4,
                        l.color.stroke_width(2),
                    ))
                    .map_err(err)?;
            } else {
                chart
                    .draw_series(LineSeries::new(line.clone(), l.color.stroke_width(2)))
                    .map_err(err)?;
            }
            for p in &line {
                draw_marker(&root, l, chart.backend_coord(p), 4)?;
            }
            let last = chart.backend_coord(line.last().expect("not empty"));
            ends.push((i, last));
        }
        let (_, yr) = chart.plotting_area().get_pixel_range();
        let placed = spread_labels(
            ends.iter().map(|&(i, (_, y))| (i, y)).collect(),
            14,
            yr.start + 6,
            yr.end - 6,
        );
        for (i, ly) in placed {
            let Some(&(_, (px, py))) = ends.iter().find(|e| e.0 == i) else {
                continue;
            };
            let c = look(names[i]).color;
            if (ly - py).abs() > 3 {
                root.draw(&PathElement::new(
                    vec![(px + 6, py), (px + 14, ly)],
                    c.mix(0.6).stroke_width(1),
                ))
                .map_err(err)?;
            }
            root.draw(&Text::new(
                names[i].to_string(),
                (px + 16, ly - 7),
                ("sans-serif", 14).into_font().color(&c),
            ))
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
    mechs.sort_by_key(|m| Group::of(m));
    let vals: Vec<f64> = rows
        .iter()
        .map(|r| r.ns_per_op)
        .filter(|v| *v > 0.0)
        .collect();
    if vals.is_empty() {
        return Err(anyhow!("chart: no data"));
    }
    let (ymin, ymax) = decades((
        vals.iter().cloned().fold(f64::MAX, f64::min),
        vals.iter().cloned().fold(f64::MIN, f64::max),
    ));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, legend) = root.split_horizontally(890);
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
            .y_label_formatter(&|v| axis_number(*v))
            .label_style(("sans-serif", 15))
            .light_line_style(RGBColor(235, 235, 235))
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

/// The I/O lab (seed 002): MB/s of `rw` by `jobs` jobs per block size, one bar per
/// mechanism (log scale: an fsync per write is orders of magnitude below a memory copy).
pub fn io_mb_s(cells: &[crate::iobench::Cell], rw: &str, jobs: u32) -> Result<String> {
    let mine: Vec<&crate::iobench::Cell> = cells
        .iter()
        .filter(|c| c.rw == rw && c.jobs == jobs && c.mb_s.is_some_and(|v| v > 0.0))
        .collect();
    let mut sizes: Vec<u32> = vec![];
    let mut mechs: Vec<&str> = vec![];
    for c in cells.iter().filter(|c| c.rw == rw && c.jobs == jobs) {
        if !sizes.contains(&c.bs) {
            sizes.push(c.bs);
        }
    }
    for c in &mine {
        if !mechs.contains(&c.mechanism.as_str()) {
            mechs.push(&c.mechanism);
        }
    }
    sizes.sort_unstable();
    mechs.sort_by_key(|m| Group::of(m));
    if mine.is_empty() {
        return Err(anyhow!("chart: no data"));
    }
    let vals = mine.iter().filter_map(|c| c.mb_s);
    let (ymin, ymax) = decades(vals.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v))));
    let labels: Vec<String> = sizes.iter().map(|b| format!("{b} B")).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, legend) = root.split_horizontally(890);
        let n = sizes.len() as f64;
        let jobs_text = if jobs == 1 {
            "1 job".to_string()
        } else {
            format!("{jobs} jobs")
        };
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                format!("Block store, {rw} by {jobs_text}: MB/s per block size (log)"),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..n, (ymin..ymax).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(sizes.len() * 2 + 1)
            .x_label_formatter(&|x| group_label(&labels, *x))
            .y_desc("MB/s (10^6 bytes/s)")
            .y_label_formatter(&|v| axis_number(*v))
            .label_style(("sans-serif", 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let w = 0.8 / mechs.len() as f64;
        for c in &mine {
            let (Some(si), Some(mi), Some(v)) = (
                sizes.iter().position(|b| *b == c.bs),
                mechs.iter().position(|m| *m == c.mechanism),
                c.mb_s,
            ) else {
                continue;
            };
            let x0 = si as f64 + 0.1 + mi as f64 * w;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, ymin), (x0 + w * 0.9, v)],
                    mech_color(&c.mechanism).filled(),
                )))
                .map_err(err)?;
        }
        draw_legend(&legend, &mechs, true)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Redis benchmark: requests/s per server as bars, one panel per pipeline depth (each with
/// its own linear scale: pipeline-16 figures are several times pipeline-1 ones), grouped by
/// test; each bar's p99 latency is a diamond in the server's colour on a shared right-hand log
/// axis.
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
    let mut pipelines: Vec<usize> = vec![];
    let mut tests: Vec<String> = vec![];
    let mut servers: Vec<&str> = vec![];
    for r in &rows {
        if !pipelines.contains(&r.pipeline) {
            pipelines.push(r.pipeline);
        }
        let t = r.test.to_ascii_uppercase();
        if !tests.contains(&t) {
            tests.push(t);
        }
        if !servers.contains(&r.server.as_str()) {
            servers.push(&r.server);
        }
    }
    pipelines.sort_unstable();
    servers.sort_by_key(|s| Group::of(s));
    let (pmin, pmax) = rows
        .iter()
        .map(|r| r.p99_ms)
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if rows.iter().all(|r| r.rps <= 0.0) || pmin > pmax {
        return Err(anyhow!("chart: no data"));
    }
    let (pmin, pmax) = decades((pmin, pmax));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plots, legend) = root.split_horizontally(900);
        let plots = plots
            .titled(
                &format!(
                    "Redis benchmark, N = {}: requests/s (bars), p99 latency (diamonds)",
                    grouped(n as f64, 0)
                ),
                ("sans-serif", 18),
            )
            .map_err(err)?;
        let panels = plots.split_evenly((1, pipelines.len()));
        for (panel, &p) in panels.iter().zip(&pipelines) {
            let prow: Vec<&&crate::kvbench::Row> =
                rows.iter().filter(|r| r.pipeline == p).collect();
            let ymax = prow.iter().map(|r| r.rps).fold(0.0, f64::max) * 1.15;
            let k = tests.len() as f64;
            let labels = tests.clone();
            let mut chart = ChartBuilder::on(panel)
                .caption(format!("pipeline {p}"), ("sans-serif", 15))
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(72)
                .right_y_label_area_size(52)
                .build_cartesian_2d(0f64..k, 0f64..ymax.max(1.0))
                .map_err(err)?
                .set_secondary_coord(0f64..k, (pmin..pmax).log_scale());
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(tests.len() * 2 + 1)
                .x_label_formatter(&|x| group_label(&labels, *x))
                .y_desc("requests per second")
                .y_label_formatter(&|v| axis_number(*v))
                .label_style(("sans-serif", 14))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(err)?;
            chart
                .configure_secondary_axes()
                .y_desc("p99 ms (log)")
                .y_label_formatter(&|v| axis_number(*v))
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(err)?;
            let w = 0.8 / servers.len() as f64;
            for r in &prow {
                let (Some(ti), Some(si)) = (
                    tests.iter().position(|t| t.eq_ignore_ascii_case(&r.test)),
                    servers.iter().position(|s| *s == r.server),
                ) else {
                    continue;
                };
                let x0 = ti as f64 + 0.1 + si as f64 * w;
                let c = mech_color(&r.server);
                // Pale bars outlined in the server's colour, so that the p99 diamond in the
                // full colour stands out on its own bar.
                chart
                    .draw_series([
                        Rectangle::new([(x0, 0.0), (x0 + w * 0.9, r.rps)], c.mix(0.45).filled()),
                        Rectangle::new([(x0, 0.0), (x0 + w * 0.9, r.rps)], c.stroke_width(2)),
                    ])
                    .map_err(err)?;
                if r.p99_ms > 0.0 {
                    // A diamond in the server's colour, outlined in black to stand out on
                    // its own bar.
                    let d = vec![(0, -7), (7, 0), (0, 7), (-7, 0)];
                    let mut outline = d.clone();
                    outline.push(d[0]);
                    chart
                        .draw_secondary_series(std::iter::once(
                            EmptyElement::at((x0 + w * 0.45, r.p99_ms))
                                + Polygon::new(d, c.filled())
                                + PathElement::new(outline, BLACK.stroke_width(1)),
                        ))
                        .map_err(err)?;
                }
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
    let mut names: Vec<&str> = sel.iter().map(|r| r.server.as_str()).collect();
    names.sort_by_key(|s| Group::of(s));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 380)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, legend) = root.split_horizontally(890);
        let xs = ["p50", "p99", "max"];
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                format!(
                    "Redis benchmark, {case}, N = {}: latency percentiles (log)",
                    grouped(n as f64, 0)
                ),
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
            .y_label_formatter(&|v| axis_number(*v))
            .label_style(("sans-serif", 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        for r in &sel {
            let l = look(&r.server);
            let pts: Vec<(f64, f64)> = [r.p50_ms, r.p99_ms, r.max_ms]
                .iter()
                .enumerate()
                .filter(|(_, v)| **v > 0.0)
                .map(|(i, v)| (i as f64, *v))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), l.color.stroke_width(2)))
                .map_err(err)?;
            for p in &pts {
                draw_marker(&root, l, chart.backend_coord(p), 5)?;
            }
        }
        draw_legend(&legend, &names, false)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
