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
}
