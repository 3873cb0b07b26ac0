//! GEOADD (geo.c): a member's longitude and latitude stored as its sorted-set score, the
//! 52-bit interleaved geohash Redis computes, so the set is the one Redis would hold.
//! (The other GEO commands are not here yet.)

use crate::commands::{Ctx, E_SYNTAX};

const LAT_MIN: f64 = -85.051_128_78;
const LAT_MAX: f64 = 85.051_128_78;
const LON_MIN: f64 = -180.0;
const LON_MAX: f64 = 180.0;
/// Bits per coordinate (Redis's GEO_STEP_MAX).
const STEP: u32 = 26;

/// The bits of `v` (32 of them) moved to the even positions of a 64-bit word.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Redis's `geohashEncodeWGS84` at 26 steps: latitude in the even bits, longitude in the odd.
pub fn encode(lon: f64, lat: f64) -> u64 {
    let scale = f64::from(1u32 << STEP);
    let lat_off = ((lat - LAT_MIN) / (LAT_MAX - LAT_MIN) * scale) as u32;
    let lon_off = ((lon - LON_MIN) / (LON_MAX - LON_MIN) * scale) as u32;
    spread(lat_off) | (spread(lon_off) << 1)
}

fn float(a: &[u8]) -> Option<f64> {
    std::str::from_utf8(a)
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|f| !f.is_nan())
}

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]: ZADD with the geohash scores.
pub fn geoadd(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let mut i = 2;
    let (mut nx, mut xx) = (false, false);
    while i < a.len() {
        match a[i].to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"ch" => {}
            _ => break,
        }
        i += 1;
    }
    if !(a.len() - i).is_multiple_of(3) || a.len() == i || (nx && xx) {
        return c.err(E_SYNTAX);
    }
    let mut scores = Vec::new();
    for t in a[i..].chunks(3) {
        let (Some(lon), Some(lat)) = (float(t[0]), float(t[1])) else {
            return c.err("ERR value is not a valid float");
        };
        if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
            return c.err(&format!(
                "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
            ));
        }
        scores.push(encode(lon, lat).to_string().into_bytes());
    }
    let mut argv: Vec<&[u8]> = vec![b"zadd", a[1]];
    argv.extend_from_slice(&a[2..i]);
    for (t, s) in a[i..].chunks(3).zip(&scores) {
        argv.push(s);
        argv.push(t[2]);
    }
    crate::types::zset::commands::zadd(c, &argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_redis_geohashes() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo" -> ZSCORE 3479099956230698
        assert_eq!(encode(13.361389, 38.115556), 3_479_099_956_230_698);
        // 15.087269 37.502669 "Catania" -> 3479447370796909
        assert_eq!(encode(15.087269, 37.502669), 3_479_447_370_796_909);
    }
}
