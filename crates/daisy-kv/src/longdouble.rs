//! INCRBYFLOAT's arithmetic exactly as Redis does it on x86-64: the x87 80-bit `long double`.
//!
//! Redis reads both numbers with `strtold`, adds them in `long double`, and writes the sum with
//! `printf("%.17Lf")`, trailing zeros (and a trailing point) cut, "-0" written as "0"
//! (`string2ld`, `ld2string` in its util.c). A 64-bit double gives other digits
//! (`0.1 + 0.2` is `0.30000000000000004` in doubles, `0.3` in Redis), so this module does the
//! same steps in software: `rustc_apfloat` (a port of LLVM's APFloat) parses and adds with
//! correct rounding in the x87 format, and [`format`] prints the exact binary value rounded
//! to 17 decimals, ties to even, as glibc's printf does.

use rustc_apfloat::ieee::X87DoubleExtended as F80;
use rustc_apfloat::{Float, Round, Status};

/// Longest text Redis reads as a long double (`MAX_LONG_DOUBLE_CHARS` - 1).
const MAX_CHARS: usize = 5 * 1024 - 1;

/// A number as Redis's `string2ld` reads one, or None where Redis says "value is not a valid
/// float": no leading space, nothing after the number, not NaN, and no overflow or underflow
/// to zero (`strtold`'s ERANGE). Infinity is accepted (an INCRBYFLOAT that reaches it is
/// refused later, as in Redis).
pub fn parse(s: &[u8]) -> Option<F80> {
    if s.is_empty() || s.len() > MAX_CHARS || is_c_space(s[0]) {
        return None;
    }
    // Redis hands `strtold` a copy ended by a NUL and then requires the number to span the
    // whole string: a NUL byte inside (SETRANGE can put one there) ends the number early, so
    // the value is refused.
    if s.contains(&0) {
        return None;
    }
    let t = std::str::from_utf8(s).ok()?;
    let (neg, body) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(if neg { -F80::INFINITY } else { F80::INFINITY });
    }
    let canon = match lower.strip_prefix("0x") {
        Some(hex) => hex_syntax(hex)?,
        None => dec_syntax(&lower)?,
    };
    let text = format!("{}{canon}", if neg { "-" } else { "" });
    let r = F80::from_str_r(&text, Round::NearestTiesToEven).ok()?;
    let v = r.value;
    if v.is_nan() || v.is_infinite() || (v.is_zero() && r.status.contains(Status::UNDERFLOW)) {
        return None;
    }
    Some(v)
}

/// `a + b` in long double; None when the sum is NaN or infinite (Redis: "increment would
/// produce NaN or Infinity").
pub fn add(a: F80, b: F80) -> Option<F80> {
    let r = a.add_r(b, Round::NearestTiesToEven).value;
    (!r.is_nan() && !r.is_infinite()).then_some(r)
}

/// C's `isspace` in the C locale (Rust's ASCII whitespace lacks the vertical tab).
fn is_c_space(b: u8) -> bool {
    b.is_ascii_whitespace() || b == 0x0B
}

/// `strtold`'s number syntax, whole string: digits (`is_digit`) with at most one point and at
/// least one digit, then optionally `exp` and a decimal exponent with an optional sign and at
/// least one digit. Some(whether there is an exponent) when `s` is such a number.
fn number_syntax(s: &str, is_digit: fn(&u8) -> bool, exp: u8) -> Option<bool> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut digits = digit_run(b, &mut i, is_digit);
    if b.get(i) == Some(&b'.') {
        i += 1;
        digits += digit_run(b, &mut i, is_digit);
    }
    if digits == 0 {
        return None;
    }
    if i == b.len() {
        return Some(false);
    }
    if b[i] != exp {
        return None;
    }
    i += 1;
    if matches!(b.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let exp_digits = digit_run(b, &mut i, u8::is_ascii_digit);
    (exp_digits > 0 && i == b.len()).then_some(true)
}

/// Skip the digits at `b[*i..]`; how many there were.
fn digit_run(b: &[u8], i: &mut usize, is_digit: fn(&u8) -> bool) -> usize {
    let start = *i;
    while b.get(*i).is_some_and(is_digit) {
        *i += 1;
    }
    *i - start
}

/// The decimal form (the text as is, lower-cased by the caller).
fn dec_syntax(s: &str) -> Option<String> {
    number_syntax(s, u8::is_ascii_digit, b'e').map(|_| s.to_string())
}

/// The hexadecimal form after "0x", with a binary exponent "p...". APFloat requires the
/// exponent, so "p0" is added when it is missing.
fn hex_syntax(s: &str) -> Option<String> {
    let has_exp = number_syntax(s, u8::is_ascii_hexdigit, b'p')?;
    Some(if has_exp {
        format!("0x{s}")
    } else {
        format!("0x{s}p0")
    })
}

/// `printf("%.17Lf", v)` with trailing zeros and a trailing point cut, and "-0" as "0": the
/// exact value of `v` (a 64-bit significand times a power of two) rounded to 17 decimals,
/// ties to even. `v` is finite (see [`add`]).
pub fn format(v: F80) -> String {
    let bits = v.to_bits();
    let neg = (bits >> 79) & 1 == 1;
    let exp = ((bits >> 64) & 0x7fff) as i32;
    let mant = bits as u64;
    // value = mant * 2^e2 (denormals have the exponent of the smallest normal).
    let e2 = exp.max(1) - 16383 - 63;
    // Scaled by 10^17, so the 17 decimals are the integer's last digits: < 2^64 * 2^57.
    let n = mant as u128 * 10u128.pow(17);
    let digits = if e2 >= 0 {
        shifted_decimal(n, e2 as u32)
    } else {
        let s = (-e2) as u32;
        let q = if s >= 128 {
            0 // n < 2^121 is below half of 2^s: rounds to 0
        } else {
            let q = n >> s;
            let r = n & ((1u128 << s) - 1);
            let half = 1u128 << (s - 1);
            if r > half || (r == half && q & 1 == 1) {
                q + 1
            } else {
                q
            }
        };
        q.to_string()
    };
    let digits = format!("{digits:0>18}");
    let (int, frac) = digits.split_at(digits.len() - 17);
    let frac = frac.trim_end_matches('0');
    let mut out = String::with_capacity(digits.len() + 2);
    if neg && (int != "0" || !frac.is_empty()) {
        out.push('-');
    }
    out.push_str(int);
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// `n * 2^shift` in decimal (exact: values up to about 10^4950).
fn shifted_decimal(n: u128, shift: u32) -> String {
    const BASE: u64 = 1_000_000_000;
    // Little-endian limbs of nine decimal digits.
    let mut limbs: Vec<u64> = Vec::new();
    let mut m = n;
    while m > 0 {
        limbs.push((m % BASE as u128) as u64);
        m /= BASE as u128;
    }
    let mut left = shift;
    while left > 0 {
        // A limb (< 10^9 < 2^30) times 2^29 plus a carry stays below 2^64.
        let k = left.min(29);
        let mut carry = 0u64;
        for l in limbs.iter_mut() {
            let x = (*l << k) + carry;
            *l = x % BASE;
            carry = x / BASE;
        }
        while carry > 0 {
            limbs.push(carry % BASE);
            carry /= BASE;
        }
        left -= k;
    }
    let Some((top, rest)) = limbs.split_last() else {
        return "0".into();
    };
    let mut s = top.to_string();
    for l in rest.iter().rev() {
        s.push_str(&format!("{l:09}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> Option<String> {
        let x = parse(a.as_bytes())?;
        let y = parse(b.as_bytes())?;
        add(x, y).map(format)
    }

    /// Expected values computed on this project's x86-64 machine by the C that Redis runs
    /// (`strtold` both, add in `long double`, `snprintf("%.17Lf")`, Redis's trimming), for
    /// chosen corners and seeded random decimals: sums that need the 64-bit significand, ties
    /// at the 17th decimal, hexadecimal input, denormals, and values of hundreds of digits.
    const X87_GLIBC: &[(&str, &str, &str)] = &[
        ("0.1", "0.2", "0.3"),
        ("10.5", "0.1", "10.6"),
        ("0", "12345.1", "12345.09999999999999964"),
        ("5.0e3", "2.0e2", "5200"),
        ("0", "1e-20", "0"),
        ("0", "-1e-20", "0"),
        ("0", "-0.5", "-0.5"),
        ("3", "0", "3"),
        ("1e10", "0.1", "10000000000.09999999962747097"),
        ("1e18", "0.1", "1000000000000000000.125"),
        ("0", "0x10", "16"),
        ("0", "0x1.8p1", "3"),
        ("0.00000000000000001", "0.000000000000000005", "0.00000000000000002"),
        ("0", "0.000000000000000015", "0.00000000000000002"),
        ("0", "0.000000000000000025", "0.00000000000000002"),
        ("-3.5", "3.5", "0"),
        ("1.7976931348623157e308", "1e308", "279769313486231570002352240441350078789299929179619934003987695617693370918830364684014944221042050987341155710361544171686148029276505307138777262321877129888036065002204239033812550598509174132739480498569620043582760541189365866551522561741435317031294527744011878159793174665688773926186886103199182225408"),
        ("0", "1e400", "10000000000000000000281880683947586514586453433629052038625910693539685534008629862039363994848324160522094053927317616200295822777259255734023828976593340661017797447434546173917862448116674971723778943824391593338047470675026246684401359237513603830343735485505244955964979021825038280091068414947402456898653040951017512658092615827588920183472511643316591362664138176309734806343732497430221946880"),
        ("0", "4e-4951", "0"),
        ("123456789012345678", "1", "123456789012345679"),
        ("9223372036854775807", "1", "9223372036854775808"),
        ("-1.5", "0.25", "-1.25"),
        (".5", "5.", "5.5"),
        ("1.e5", "+1", "100001"),
        ("0", "0x.8", "0.5"),
        ("0", "0X1P-3", "0.125"),
        ("9850.6099", "33.654400", "9884.26429999999999954"),
        ("-875191", "60.835424", "-875130.16457600000001094"),
        ("-126501.0", "-54.6316570", "-126555.63165699999999703"),
        ("-401646.50", "-47.69635060", "-401694.19635059999998816"),
        ("408091.61672", "-5.68903997", "408085.92768002999997634"),
        ("-326816.01", "51.308555", "-326764.70144499999997834"),
        ("209769.45", "19.694203", "209789.14420300000000452"),
        ("267048.069156", "16.5414", "267064.61055600000000254"),
        ("710761.327", "-47.501328", "710713.8256719999999973"),
        ("-797064", "-8.42783", "-797072.42782999999997173"),
        ("106810.4", "-47.056439", "106763.34356100000000112"),
        ("134026.0972", "96.594224", "134122.69142399999999782"),
        ("-98893.9", "-35.54881", "-98929.44881000000000171"),
        ("406115.3", "42.85268", "406158.1526800000000037"),
        ("-263360.672979", "-20", "-263380.672978999999998"),
        ("362779.515", "-44.25", "362735.26499999999998636"),
        ("-437452", "-24.0", "-437476"),
        ("825359.840", "69.907", "825429.74699999999995725"),
        ("402969.066", "49.23", "403018.29599999999999227"),
        ("-633984.3", "12.61", "-633971.68999999999999773"),
        ("324519.266497", "-76.7", "324442.56649699999999825"),
        ("-142230.2430", "-84.5107", "-142314.75369999999999493"),
        ("-827668.23", "-51.295447", "-827719.52544700000004241"),
        ("176102.838843", "88.122", "176190.96084299999999701"),
        ("305563.50", "28.17", "305591.66999999999998749"),
        ("719536.69014", "85.749842", "719622.43998199999998633"),
        ("-889544.51338", "68.9872419", "-889475.52613809999996874"),
        ("-862150.95463", "29.785711", "-862121.16891900000001669"),
        ("-448633.17881", "-51.0559345", "-448684.23474450000000502"),
        ("-93486.5", "7.288", "-93479.2120000000000033"),
        ("428e-15", "848e22", "8480000000000000000000000"),
        ("416e6", "605e8", "60916000000"),
        ("39e-6", "581e3", "581000.00003900000001522"),
        ("580e-22", "946e8", "94600000000"),
        ("839e29", "675e-29", "83899999999999999998821568348160"),
        ("28e14", "306e-27", "2800000000000000"),
    ];

    #[test]
    fn matches_x87_long_double_and_glibc_printf() {
        for &(a, b, want) in X87_GLIBC {
            assert_eq!(incr(a, b).as_deref(), Some(want), "{a} + {b}");
        }
    }

    #[test]
    fn refuses_what_redis_refuses() {
        for bad in [
            "", " 1", "\t1", "\x0b1", "1 ", "1e", "1e+", ".", "e5", "0x", "0xg", "0x1p", "nan",
            "-nan", "1e5000", "-1e5000", "1e-5000", "1..2", "--1", "+-1", "abc", "infinit",
            "0x.p1",
        ] {
            assert!(parse(bad.as_bytes()).is_none(), "{bad:?} must be refused");
        }
        for good in [
            "1",
            "+1",
            "-1",
            ".5",
            "5.",
            "1.e5",
            "0e-5000",
            "inf",
            "-Infinity",
            "INF",
            "1E3",
            "0x1P3",
        ] {
            assert!(parse(good.as_bytes()).is_some(), "{good:?} must be read");
        }
        assert_eq!(incr("inf", "1"), None);
        assert_eq!(incr("1.1e4932", "1.1e4932"), None, "overflow to infinity");
        assert_eq!(parse(&vec![b'1'; MAX_CHARS + 1]), None);
        // A NUL byte inside ends strtold's number before the end of the string: refused, as
        // Redis's string2ld does (`set foo 1; setrange foo 2 2; incrbyfloat foo 1`).
        for bad in [&b"1\0x"[..], b"2.5\0", b"\0abc", b"-\0", b"1e\0", b"1\x002"] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
    }
}
