//! Workload files of `daisy bench io --workload FILE` (seed 003), in the spirit of vdbench's
//! workload and run definitions (`wd=`, `rd=`): one `key = value` per line, `#` starts a
//! comment, blank lines are ignored, every key at most once. Keys (all optional but where
//! said; sizes take `k`, `m`, `g` suffixes, powers of 1024):
//!
//! | key            | meaning                                                              | default |
//! |----------------|----------------------------------------------------------------------|---------|
//! | `name`         | the workload's name in the output                                    | the file's stem |
//! | `rdpct`        | percent of operations that are reads (vdbench `rdpct`)               | 0 |
//! | `seekpct`      | percent of operations at a random offset; the rest follow on from the thread's previous one (vdbench `seekpct`) | 100 |
//! | `xfersize`     | transfer size, or a distribution `4k:70, 8k:20, 64k:10` (size:weight); every size a multiple of the smallest, the smallest a multiple of 64 | 4k |
//! | `threads`      | threads issuing operations (the rate is shared among them)          | 1 |
//! | `iorate`       | `max` (uncontrolled: each thread issues as fast as it can), a list of fixed rates in operations per second `1000, 5000`, or `curve` | max |
//! | `curve`        | with `iorate = curve`: percents of the maximum, measured first (vdbench's `iorate=curve`) | 10, 50, 70, 80, 90, 100 |
//! | `elapsed`      | seconds measured at each rate                                        | 2 |
//! | `warmup`       | seconds run at each rate before measuring, ignored                   | 0.5 |
//! | `distribution` | inter-arrival times at a fixed rate: `fixed` or `exponential`        | fixed |
//! | `size`         | bytes of the store (the file, the block store's data)                | 64m |
//!
//! A mistake is reported with the file, the line and the key, e.g.
//! `rand.wl:3: rdpct: expected a percentage from 0 to 100, got "120"`.

use anyhow::{bail, Result};
use std::path::Path;

/// The rate (or rates) a workload runs at.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub enum IoRate {
    /// Uncontrolled: closed loop, each thread as fast as it can.
    Max,
    /// Fixed rates in operations per second, all threads together.
    Fixed(Vec<f64>),
    /// The maximum first, then these percents of it.
    Curve(Vec<f64>),
}

/// Inter-arrival times at a fixed rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Distribution {
    /// Evenly spaced (vdbench `deterministic`).
    Fixed,
    /// Poisson arrivals (vdbench's default `exponential`), seeded.
    Exponential,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Workload {
    pub name: String,
    pub rdpct: u32,
    pub seekpct: u32,
    /// (bytes, weight) pairs.
    pub xfersize: Vec<(u32, u32)>,
    pub threads: u32,
    pub iorate: IoRate,
    pub elapsed: f64,
    pub warmup: f64,
    pub distribution: Distribution,
    pub size: u64,
}

impl Workload {
    /// The defaults (see the module's table).
    pub fn new(name: &str) -> Workload {
        Workload {
            name: name.into(),
            rdpct: 0,
            seekpct: 100,
            xfersize: vec![(4096, 1)],
            threads: 1,
            iorate: IoRate::Max,
            elapsed: 2.0,
            warmup: 0.5,
            distribution: Distribution::Fixed,
            size: 64 << 20,
        }
    }

    /// The smallest transfer size: the block size of the store.
    pub fn unit(&self) -> u32 {
        self.xfersize.iter().map(|x| x.0).min().unwrap_or(4096)
    }

    /// Read and parse a workload file.
    pub fn load(path: &Path) -> Result<Workload> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "workload".into());
        let origin = path.display().to_string();
        Workload::parse(&text, &origin, &stem)
    }

    /// Parse `text` (`origin` names it in errors; `default_name` when there is no `name`).
    pub fn parse(text: &str, origin: &str, default_name: &str) -> Result<Workload> {
        let mut w = Workload::new(default_name);
        let mut seen: Vec<(String, usize)> = vec![];
        let mut curve: Option<Vec<f64>> = None;
        let mut curve_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                bail!("{origin}:{line_no}: expected `key = value`, got {line:?}");
            };
            let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
            let err = |msg: String| anyhow::anyhow!("{origin}:{line_no}: {key}: {msg}");
            if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
                return Err(err(format!("given twice (first on line {first})")));
            }
            seen.push((key.clone(), line_no));
            if value.is_empty() {
                return Err(err("no value".into()));
            }
            match key.as_str() {
                "name" => w.name = value.into(),
                "rdpct" => w.rdpct = percent(value).map_err(err)?,
                "seekpct" => w.seekpct = percent(value).map_err(err)?,
                "xfersize" => w.xfersize = xfersizes(value).map_err(err)?,
                "threads" => {
                    w.threads = match value.parse::<u32>() {
                        Ok(t) if (1..=256).contains(&t) => t,
                        _ => return Err(err(format!("expected 1 to 256 threads, got {value:?}"))),
                    }
                }
                "iorate" => {
                    w.iorate = if value.eq_ignore_ascii_case("max") {
                        IoRate::Max
                    } else if value.eq_ignore_ascii_case("curve") {
                        IoRate::Curve(vec![])
                    } else {
                        IoRate::Fixed(numbers(value, 0.001, 1e9, "rate").map_err(err)?)
                    }
                }
                "curve" => {
                    curve = Some(numbers(value, 0.1, 100.0, "percent of the maximum").map_err(err)?);
                    curve_line = line_no;
                }
                "elapsed" => w.elapsed = seconds(value, 0.01).map_err(err)?,
                "warmup" => w.warmup = seconds(value, 0.0).map_err(err)?,
                "distribution" => {
                    w.distribution = match value.to_ascii_lowercase().as_str() {
                        "fixed" | "deterministic" => Distribution::Fixed,
                        "exponential" => Distribution::Exponential,
                        _ => return Err(err(format!("expected fixed or exponential, got {value:?}"))),
                    }
                }
                "size" => {
                    w.size = match size(value) {
                        Some(s) if s > 0 => s,
                        _ => return Err(err(format!("expected a size such as 64m, got {value:?}"))),
                    }
                }
                _ => {
                    return Err(err(
                        "unknown key (known: name, rdpct, seekpct, xfersize, threads, iorate, curve, elapsed, warmup, distribution, size)"
                            .into(),
                    ))
                }
            }
        }
        match (&mut w.iorate, curve) {
            (IoRate::Curve(c), Some(given)) => *c = given,
            (IoRate::Curve(c), None) => *c = vec![10.0, 50.0, 70.0, 80.0, 90.0, 100.0],
            (_, Some(_)) => {
                bail!("{origin}:{curve_line}: curve: only with `iorate = curve`")
            }
            _ => {}
        }
        let largest = w.xfersize.iter().map(|x| x.0).max().unwrap_or(4096) as u64;
        if w.size < 16 * largest {
            let line = seen.iter().find(|(k, _)| k == "size").map_or(0, |s| s.1);
            bail!(
                "{origin}:{line}: size: {} bytes is less than 16 of the largest transfer ({largest} bytes)",
                w.size
            );
        }
        Ok(w)
    }
}

fn percent(v: &str) -> std::result::Result<u32, String> {
    match v.trim_end_matches('%').trim().parse::<u32>() {
        Ok(p) if p <= 100 => Ok(p),
        _ => Err(format!("expected a percentage from 0 to 100, got {v:?}")),
    }
}

fn seconds(v: &str, min: f64) -> std::result::Result<f64, String> {
    match v.trim_end_matches('s').trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (min..=3600.0).contains(&s) => Ok(s),
        _ => Err(format!("expected seconds from {min} to 3600, got {v:?}")),
    }
}

fn numbers(v: &str, min: f64, max: f64, what: &str) -> std::result::Result<Vec<f64>, String> {
    v.split(',')
        .map(|x| match x.trim().parse::<f64>() {
            Ok(n) if n.is_finite() && (min..=max).contains(&n) => Ok(n),
            _ => Err(format!(
                "expected a {what} from {min} to {max}, got {:?}",
                x.trim()
            )),
        })
        .collect()
}

/// `4096`, `4k`, `1m`, `2g` (powers of 1024).
pub fn size(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    let (num, mul) = match v.chars().last()? {
        'k' => (&v[..v.len() - 1], 1u64 << 10),
        'm' => (&v[..v.len() - 1], 1 << 20),
        'g' => (&v[..v.len() - 1], 1 << 30),
        _ => (&v[..], 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mul)
}

fn xfersizes(v: &str) -> std::result::Result<Vec<(u32, u32)>, String> {
    let mut out = vec![];
    for part in v.split(',') {
        let part = part.trim();
        let (s, weight) = match part.split_once(':') {
            Some((s, w)) => match w.trim().parse::<u32>() {
                Ok(w) if w > 0 => (s, w),
                _ => {
                    return Err(format!(
                        "expected a positive weight after ':', got {part:?}"
                    ))
                }
            },
            None => (part, 1),
        };
        match size(s) {
            Some(b) if (64..=1 << 20).contains(&b) => out.push((b as u32, weight)),
            _ => {
                return Err(format!(
                    "expected a size from 64 bytes to 1m, got {:?}",
                    s.trim()
                ))
            }
        }
    }
    let unit = out.iter().map(|x| x.0).min().unwrap_or(64);
    if !unit.is_multiple_of(64) {
        return Err(format!(
            "the smallest size, {unit}, is not a multiple of 64"
        ));
    }
    if let Some(b) = out.iter().find(|x| !x.0.is_multiple_of(unit)) {
        return Err(format!(
            "{} is not a multiple of the smallest size, {unit} (the store's block)",
            b.0
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Workload::parse(text, "t.wl", "t").unwrap_err().to_string()
    }

    #[test]
    fn a_full_workload_file_parses_to_its_fields() {
        let w = Workload::parse(
            "# seed 003, test 3\nname = r40\nrdpct = 40\nseekpct=100 # random\n\
             xfersize = 4k:70, 8k:30\nthreads = 2\niorate = curve\ncurve = 10, 50, 100\n\
             elapsed = 1.5\nwarmup = 0.25\ndistribution = exponential\nsize = 8m\n",
            "t.wl",
            "t",
        )
        .unwrap();
        assert_eq!(w.name, "r40");
        assert_eq!((w.rdpct, w.seekpct, w.threads), (40, 100, 2));
        assert_eq!(w.xfersize, vec![(4096, 70), (8192, 30)]);
        assert_eq!(w.iorate, IoRate::Curve(vec![10.0, 50.0, 100.0]));
        assert_eq!((w.elapsed, w.warmup, w.size), (1.5, 0.25, 8 << 20));
        assert_eq!(w.distribution, Distribution::Exponential);
        assert_eq!(w.unit(), 4096);
        let fixed = Workload::parse("iorate = 100, 2000.5", "t.wl", "dflt").unwrap();
        assert_eq!(fixed.iorate, IoRate::Fixed(vec![100.0, 2000.5]));
        assert_eq!(fixed.name, "dflt");
    }

    #[test]
    fn parse_errors_name_the_line_and_the_key() {
        assert_eq!(
            err("name = x\nrdpct = 120\n"),
            "t.wl:2: rdpct: expected a percentage from 0 to 100, got \"120\""
        );
        assert!(err("\n\nthreads = 0").starts_with("t.wl:3: threads: expected 1 to 256"));
        assert!(err("iorate = fast").starts_with("t.wl:1: iorate: expected a rate"));
        assert!(err("xfersize = 4k, 6k").contains("t.wl:1: xfersize: 6144 is not a multiple"));
        assert!(err("xfersize = 100").contains("not a multiple of 64"));
        assert!(err("xfersize = 4k:0").contains("positive weight"));
        assert!(
            err("rdpct = 1\nrdpct = 2").starts_with("t.wl:2: rdpct: given twice (first on line 1)")
        );
        assert!(err("colour = blue").starts_with("t.wl:1: colour: unknown key"));
        assert!(err("just words").starts_with("t.wl:1: expected `key = value`"));
        assert!(err("curve = 10").starts_with("t.wl:1: curve: only with `iorate = curve`"));
        assert!(err("size = 4k\nxfersize = 4k").starts_with("t.wl:1: size:"));
        assert!(err("elapsed = -1").starts_with("t.wl:1: elapsed: expected seconds"));
        assert!(err("distribution = normal").contains("fixed or exponential"));
    }
}
