//! Small statistics helpers for benchmark runs.

/// Median and range of repeated measurements.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(samples: &[f64]) -> Spread {
        assert!(!samples.is_empty(), "no samples");
        Spread {
            median: median(samples),
            min: samples.iter().cloned().fold(f64::INFINITY, f64::min),
            max: samples.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

pub fn median(samples: &[f64]) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A distribution-free confidence interval for the median of `samples`: the order statistics
/// `x(j)` and `x(n+1-j)` (1-based, sorted) with the largest `j` whose coverage
/// `1 - 2 P(Binomial(n, 1/2) < j)` is at least `level`. With too few samples for `level`
/// (fewer than 5 at 90%) it is the whole range, min..max, with its lower coverage. Returns
/// (low, high, coverage); None for no samples.
pub fn median_interval(samples: &[f64], level: f64) -> Option<(f64, f64, f64)> {
    let n = samples.len();
    if n == 0 {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    // P(Binomial(n, 1/2) <= k) for k = 0..n, from the binomial coefficients.
    let half_n = 0.5f64.powi(n as i32);
    let mut cdf = Vec::with_capacity(n + 1);
    let (mut coef, mut acc) = (1.0f64, 0.0f64);
    for k in 0..=n {
        acc += coef * half_n;
        cdf.push(acc);
        coef = coef * (n - k) as f64 / (k + 1) as f64;
    }
    let coverage = |j: usize| 1.0 - 2.0 * cdf[j - 1];
    let mut j = 1;
    while j < n.div_ceil(2) && coverage(j + 1) >= level {
        j += 1;
    }
    Some((v[j - 1], v[n - j], coverage(j)))
}

/// CPU time of the whole machine so far, from the first line of /proc/stat, in clock ticks.
/// A benchmark on a virtual machine reads it before and after its runs to say how much of
/// that time the hypervisor gave to other guests ("steal"), a cause of run-to-run swings
/// that no measured program controls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuTimes {
    /// Every column (user .. steal), steal included.
    pub total: u64,
    pub steal: u64,
}

impl CpuTimes {
    pub fn now() -> Option<CpuTimes> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The `cpu` line: user nice system idle iowait irq softirq steal [guest guest_nice];
    /// guest time is already counted in user, so it is left out.
    fn parse(stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().next()?;
        let mut it = line.split_whitespace();
        if it.next()? != "cpu" {
            return None;
        }
        let v: Vec<u64> = it.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
        if v.len() < 8 {
            return None;
        }
        Some(CpuTimes {
            total: v.iter().sum(),
            steal: v[7],
        })
    }

    /// Percent of the machine's CPU time since `earlier` that was stolen; None when no time
    /// passed.
    pub fn steal_percent_since(&self, earlier: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total)?;
        let steal = self.steal.checked_sub(earlier.steal)?;
        (total > 0).then(|| steal as f64 * 100.0 / total as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn median_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        let s = Spread::of(&[5.0, 1.0, 9.0]);
        assert_eq!((s.median, s.min, s.max), (5.0, 1.0, 9.0));
    }

    /// The interval of the median from order statistics: 15 rounds give x(4)..x(12) (96.5%,
    /// the 90% rule's widest j), 5 rounds the whole range (93.75%), 3 rounds the whole range
    /// with its 75%.
    #[test]
    fn median_interval_takes_order_statistics() {
        let v: Vec<f64> = (1..=15).map(f64::from).collect();
        let (lo, hi, c) = median_interval(&v, 0.9).unwrap();
        assert_eq!((lo, hi), (4.0, 12.0));
        assert!((c - 0.96484375).abs() < 1e-9, "{c}");
        let (lo, hi, c) = median_interval(&[5.0, 1.0, 3.0, 2.0, 4.0], 0.9).unwrap();
        assert_eq!((lo, hi, c), (1.0, 5.0, 0.9375));
        let (lo, hi, c) = median_interval(&[2.0, 1.0, 3.0], 0.9).unwrap();
        assert_eq!((lo, hi, c), (1.0, 3.0, 0.75));
        assert_eq!(median_interval(&[7.0], 0.9), Some((7.0, 7.0, 0.0)));
        assert_eq!(median_interval(&[], 0.9), None);
    }

    #[test]
    fn steal_is_read_from_the_cpu_line() {
        let a = CpuTimes::parse("cpu  10 0 20 60 0 0 5 5 7 0\ncpu0 1 2 3\n").unwrap();
        assert_eq!(
            a,
            CpuTimes {
                total: 100,
                steal: 5
            }
        );
        let b = CpuTimes::parse("cpu  30 0 40 100 0 0 10 20 9 0\n").unwrap();
        // 100 more ticks, 15 of them stolen.
        assert_eq!(b.steal_percent_since(&a), Some(15.0));
        assert_eq!(a.steal_percent_since(&a), None);
        assert_eq!(CpuTimes::parse("intr 1 2 3\n"), None);
        assert_eq!(CpuTimes::parse("cpu 1 2 3\n"), None);
    }
}
