//! Human sizes on the command line: `64MiB`, `1G`, `4096`.

/// Parse a size: a number with an optional unit. K/M/G/T and KiB/MiB/GiB/TiB are powers of
/// 1024 (what people mean for memory); KB/MB/GB/TB are powers of 1000.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        format!("invalid size {s:?}: expected a number with an optional unit (KiB, MiB, GiB, TiB)")
    };
    if num.is_empty() {
        return Err(bad());
    }
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    let bytes = v * mult as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("size {s:?} is not representable"));
    }
    Ok(bytes as u64)
}

pub fn fmt_size(b: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", U[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("1.5 GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("2MB").unwrap(), 2_000_000);
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999TiB").is_err());
        assert_eq!(fmt_size(1536), "1.50 KiB");
    }
}
