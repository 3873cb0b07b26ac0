//! The GEO commands (Redis's geo.c, geohash.c, geohash_helper.c) on sorted sets (TYPE
//! zset): a member's longitude and latitude stored as its sorted-set score, the 52-bit
//! interleaved geohash Redis computes, so the set is the one Redis would hold. Searches
//! (GEORADIUS, GEOSEARCH and friends) cover the area with Redis's nine geohash boxes (the
//! same step estimate, neighbours and pruning) and read each box's score range, so the
//! members found, their order and the distances are Redis's to the digit.
//!
//! Layout and crash reasoning: the sorted set's (types::zset); GEOADD is a ZADD, the STORE
//! forms write a sorted set as ZRANGESTORE does.

use crate::commands::{parse_i64, upper, Ctx, E_FLOAT, E_INT, E_SYNTAX};
use crate::resp;
use crate::types::zset::index::Select;
use crate::types::zset::score::{parse_score, ScoreRange};
use crate::types::zset::{open_read, store_result, ZVal};
use std::cmp::Ordering;

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
    encode_in(lon, lat, (LON_MIN, LON_MAX), (LAT_MIN, LAT_MAX), STEP)
}

/// Redis's `geohashEncode` in the given ranges at `step` bits per coordinate.
fn encode_in(lon: f64, lat: f64, lon_r: (f64, f64), lat_r: (f64, f64), step: u32) -> u64 {
    let scale = (1u64 << step) as f64;
    let lat_off = ((lat - lat_r.0) / (lat_r.1 - lat_r.0) * scale) as u32;
    let lon_off = ((lon - lon_r.0) / (lon_r.1 - lon_r.0) * scale) as u32;
    spread(lat_off) | (spread(lon_off) << 1)
}

/// The even bits of `x` packed into 32 bits.
fn squash(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// A geohash box: its bits and its step (0 bits and 0 step: none, Redis's GZERO).
#[derive(Clone, Copy, PartialEq, Debug)]
struct Hash {
    bits: u64,
    step: u32,
}

/// A box's extent: (lon min, lon max, lat min, lat max) (`geohashDecode`).
fn decode_area(h: Hash) -> (f64, f64, f64, f64) {
    let (lat_i, lon_i) = (squash(h.bits), squash(h.bits >> 1));
    let div = (1u64 << h.step) as f64;
    let (lat_s, lon_s) = (LAT_MAX - LAT_MIN, LON_MAX - LON_MIN);
    (
        LON_MIN + (f64::from(lon_i) / div) * lon_s,
        LON_MIN + (f64::from(lon_i.wrapping_add(1)) / div) * lon_s,
        LAT_MIN + (f64::from(lat_i) / div) * lat_s,
        LAT_MIN + (f64::from(lat_i.wrapping_add(1)) / div) * lat_s,
    )
}

/// A score's longitude and latitude (`decodeGeohash`: the middle of its 26-step box).
pub fn decode(score: f64) -> (f64, f64) {
    let (x0, x1, y0, y1) = decode_area(Hash {
        bits: c_u64(score),
        step: STEP,
    });
    (
        ((x0 + x1) / 2.0).clamp(LON_MIN, LON_MAX),
        ((y0 + y1) / 2.0).clamp(LAT_MIN, LAT_MAX),
    )
}

/// C's `(uint64_t)d` as x86-64 compilers emit it (a score that is no geohash still decodes
/// as Redis decodes it): below 2^63 a signed conversion (out of range: 2^63), else the
/// conversion of `d - 2^63` with the top bit flipped.
fn c_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    let signed = |x: f64| -> u64 {
        if x.is_nan() || x <= -TWO63 - 1025.0 || x >= TWO63 {
            1u64 << 63
        } else {
            x as i64 as u64
        }
    };
    if d < TWO63 {
        signed(d)
    } else {
        signed(d - TWO63) ^ (1u64 << 63)
    }
}

const EARTH_RADIUS: f64 = 6_372_797.560_856;
const MERCATOR_MAX: f64 = 20_037_726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS * (lat2 * D_R - lat1 * D_R).abs()
}

/// Haversine distance in meters (`geohashGetDistance`).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (lon1 * D_R, lon2 * D_R);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (lat1 * D_R, lat2 * D_R);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS * a.sqrt().asin()
}

fn move_x(h: &mut Hash, d: i32) {
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> (64 - h.step * 2);
    let x = if d > 0 {
        x.wrapping_add(zz + 1)
    } else {
        (x | zz).wrapping_sub(zz + 1)
    };
    h.bits = (x & (0xaaaa_aaaa_aaaa_aaaau64 >> (64 - h.step * 2))) | y;
}

fn move_y(h: &mut Hash, d: i32) {
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> (64 - h.step * 2);
    let y = if d > 0 {
        y.wrapping_add(zz + 1)
    } else {
        (y | zz).wrapping_sub(zz + 1)
    };
    h.bits = x | (y & (0x5555_5555_5555_5555u64 >> (64 - h.step * 2)));
}

fn neighbour(h: Hash, dx: i32, dy: i32) -> Hash {
    let mut n = h;
    if dx != 0 {
        move_x(&mut n, dx);
    }
    if dy != 0 {
        move_y(&mut n, dy);
    }
    n
}

fn steps_by_radius(mut range: f64, lat: f64) -> u32 {
    if range == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u32
}

/// What a search covers (Redis's `GeoShape`): its center, and a radius or a box, in the
/// unit of `conv` meters.
#[derive(Clone, Copy, Default)]
struct Shape {
    lon: f64,
    lat: f64,
    conv: f64,
    radius: Option<f64>,
    width: f64,
    height: f64,
}

impl Shape {
    /// Within the shape: the distance in meters (`geoWithinShape`).
    fn within(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.radius {
            Some(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                (d <= r * self.conv).then_some(d)
            }
            None => {
                let (w, h) = (self.width * self.conv, self.height * self.conv);
                if lat_distance(lat, self.lat) > h / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > w / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }

    /// The nine boxes to read, in Redis's order, none where pruned
    /// (`geohashCalculateAreasByShapeWGS84`).
    fn boxes(&self) -> [Option<Hash>; 9] {
        let (hh, ww) = match self.radius {
            Some(r) => (self.conv * r, self.conv * r),
            None => (self.conv * self.height / 2.0, self.conv * self.width / 2.0),
        };
        let lat_delta = hh / EARTH_RADIUS / D_R;
        let top = ww / EARTH_RADIUS / ((self.lat + lat_delta) * D_R).cos() / D_R;
        let bottom = ww / EARTH_RADIUS / ((self.lat - lat_delta) * D_R).cos() / D_R;
        let south = self.lat < 0.0;
        let min_lon = if south {
            self.lon - bottom
        } else {
            self.lon - top
        };
        let max_lon = if south {
            self.lon + bottom
        } else {
            self.lon + top
        };
        let (min_lat, max_lat) = (self.lat - lat_delta, self.lat + lat_delta);
        let radius_m = match self.radius {
            Some(r) => r,
            None => ((self.width / 2.0) * (self.width / 2.0)
                + (self.height / 2.0) * (self.height / 2.0))
                .sqrt(),
        } * self.conv;
        let mut steps = steps_by_radius(radius_m, self.lat);
        let at = |steps: u32| Hash {
            bits: encode_in(
                self.lon,
                self.lat,
                (LON_MIN, LON_MAX),
                (LAT_MIN, LAT_MAX),
                steps,
            ),
            step: steps,
        };
        let mut hash = at(steps);
        let decrease = decode_area(neighbour(hash, 0, 1)).3 < max_lat
            || decode_area(neighbour(hash, 0, -1)).2 > min_lat
            || decode_area(neighbour(hash, 1, 0)).1 < max_lon
            || decode_area(neighbour(hash, -1, 0)).0 > min_lon;
        if steps > 1 && decrease {
            steps -= 1;
            hash = at(steps);
        }
        let area = decode_area(hash);
        // north, south, east, west, north-east, north-west, south-east, south-west
        let dirs = [
            (0, 1),
            (0, -1),
            (1, 0),
            (-1, 0),
            (1, 1),
            (-1, 1),
            (1, -1),
            (-1, -1),
        ];
        let mut out = [Some(hash); 9];
        for (i, (dx, dy)) in dirs.iter().enumerate() {
            let mut keep = true;
            if steps >= 2 {
                if area.2 < min_lat && *dy == -1 {
                    keep = false;
                }
                if area.3 > max_lat && *dy == 1 {
                    keep = false;
                }
                if area.0 < min_lon && *dx == -1 {
                    keep = false;
                }
                if area.1 > max_lon && *dx == 1 {
                    keep = false;
                }
            }
            out[i + 1] = keep.then(|| neighbour(hash, *dx, *dy));
        }
        out
    }
}

/// A member found: (member, distance in meters, score, longitude, latitude).
type Found = (Vec<u8>, f64, f64, f64, f64);

/// The members inside `shape`, box by box as Redis reads them (`membersOfAllNeighbors`);
/// at most `limit` when not 0 (ANY).
fn search(c: &mut Ctx, z: &ZVal, shape: &Shape, limit: usize) -> daisy::Result<Vec<Found>> {
    let boxes = shape.boxes();
    let mut out = Vec::new();
    let mut last: usize = 0;
    for (i, b) in boxes.iter().enumerate() {
        let Some(b) = b else { continue };
        if last != 0 && boxes[last] == Some(*b) {
            continue;
        }
        if !out.is_empty() && limit != 0 && out.len() >= limit {
            break;
        }
        let shift = 52 - b.step * 2;
        let sel = Select::Score(ScoreRange {
            min: (b.bits << shift) as f64,
            max: ((b.bits + 1) << shift) as f64,
            minex: false,
            maxex: true,
        });
        for (m, score) in z.idx().range(c.tx, &sel, false, 0, -1)? {
            let (lon, lat) = decode(score);
            if let Some(d) = shape.within(lon, lat) {
                out.push((m, d, score, lon, lat));
            }
            if !out.is_empty() && limit != 0 && out.len() >= limit {
                break;
            }
        }
        last = i;
    }
    Ok(out)
}

fn unit(c: &mut Ctx, a: &[u8]) -> Result<f64, ()> {
    match &upper(a)[..] {
        b"M" => Ok(1.0),
        b"KM" => Ok(1000.0),
        b"FT" => Ok(0.3048),
        b"MI" => Ok(1609.34),
        _ => {
            let _ = c.err("ERR unsupported unit provided. please use M, KM, FT, MI");
            Err(())
        }
    }
}

fn double(c: &mut Ctx, a: &[u8], msg: &str) -> Result<f64, ()> {
    parse_score(a).ok_or_else(|| {
        let _ = c.err(msg);
    })
}

fn lonlat(c: &mut Ctx, lon: &[u8], lat: &[u8]) -> Result<(f64, f64), ()> {
    let x = double(c, lon, E_FLOAT)?;
    let y = double(c, lat, E_FLOAT)?;
    if !(LON_MIN..=LON_MAX).contains(&x) || !(LAT_MIN..=LAT_MAX).contains(&y) {
        let _ = c.err(&format!(
            "ERR invalid longitude,latitude pair {x:.6},{y:.6}"
        ));
        return Err(());
    }
    Ok((x, y))
}

/// (radius, meters per unit) (`extractDistanceOrReply`).
fn radius_arg(c: &mut Ctx, r: &[u8], u: &[u8]) -> Result<(f64, f64), ()> {
    let d = double(c, r, "ERR need numeric radius")?;
    if d < 0.0 {
        let _ = c.err("ERR radius cannot be negative");
        return Err(());
    }
    Ok((d, unit(c, u)?))
}

/// `%.17Lf` with the trailing zeros (and a trailing point) removed: Redis's
/// `addReplyHumanLongDouble` of a double.
fn human(d: f64) -> String {
    let mut s = format!("{d:.17}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

fn reply_human(c: &mut Ctx, d: f64) {
    let s = human(d);
    if c.cl.resp3 {
        c.out.push(b',');
        c.out.extend_from_slice(s.as_bytes());
        resp::crlf(c.out);
    } else {
        resp::bulk(c.out, s.as_bytes());
    }
}

fn reply_distance(c: &mut Ctx, d: f64) {
    resp::bulk(c.out, format!("{d:.4}").as_bytes());
}

/// GEOPOS key [member ...]
pub fn geopos(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let Ok(z) = open_read(c, a[1])? else {
        return Ok(());
    };
    resp::array(c.out, a.len() - 2);
    for m in &a[2..] {
        let s = match &z {
            Some(z) => z.idx().score(c.tx, m)?,
            None => None,
        };
        match s {
            Some(s) => {
                let (x, y) = decode(s);
                resp::array(c.out, 2);
                reply_human(c, x);
                reply_human(c, y);
            }
            None => c.null_array(),
        }
    }
    Ok(())
}

/// GEOHASH key [member ...]: standard 11-character geohashes (re-encoded in -90..90).
pub fn geohash(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    const ALPHABET: &[u8] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let Ok(z) = open_read(c, a[1])? else {
        return Ok(());
    };
    resp::array(c.out, a.len() - 2);
    for m in &a[2..] {
        let s = match &z {
            Some(z) => z.idx().score(c.tx, m)?,
            None => None,
        };
        let Some(s) = s else {
            c.nil();
            continue;
        };
        let (x, y) = decode(s);
        let bits = encode_in(x, y, (-180.0, 180.0), (-90.0, 90.0), STEP);
        let mut buf = [0u8; 11];
        for (i, b) in buf.iter_mut().enumerate() {
            let idx = if i == 10 {
                0
            } else {
                (bits >> (52 - (i + 1) * 5)) & 0x1f
            };
            *b = ALPHABET[idx as usize];
        }
        resp::bulk(c.out, &buf);
    }
    Ok(())
}

/// GEODIST key member1 member2 [M|KM|FT|MI]
pub fn geodist(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let conv = match a.len() {
        4 => 1.0,
        5 => match unit(c, a[4]) {
            Ok(u) => u,
            Err(()) => return Ok(()),
        },
        _ => return c.err(E_SYNTAX),
    };
    let Ok(z) = open_read(c, a[1])? else {
        return Ok(());
    };
    let Some(z) = z else {
        c.nil();
        return Ok(());
    };
    let (s1, s2) = (z.idx().score(c.tx, a[2])?, z.idx().score(c.tx, a[3])?);
    let (Some(s1), Some(s2)) = (s1, s2) else {
        c.nil();
        return Ok(());
    };
    let ((x1, y1), (x2, y2)) = (decode(s1), decode(s2));
    reply_distance(c, distance(x1, y1, x2, y2) / conv);
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// GEORADIUS (`ro`: GEORADIUS_RO)
    Coords { ro: bool },
    /// GEORADIUSBYMEMBER
    Member { ro: bool },
    /// GEOSEARCH, GEOSEARCHSTORE
    Search { store: bool },
}

pub fn georadius(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    radius_generic(c, a, 1, Kind::Coords { ro: false })
}
pub fn georadius_ro(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    radius_generic(c, a, 1, Kind::Coords { ro: true })
}
pub fn georadiusbymember(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    radius_generic(c, a, 1, Kind::Member { ro: false })
}
pub fn georadiusbymember_ro(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    radius_generic(c, a, 1, Kind::Member { ro: true })
}
pub fn geosearch(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    radius_generic(c, a, 1, Kind::Search { store: false })
}
pub fn geosearchstore(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    radius_generic(c, a, 2, Kind::Search { store: true })
}

/// A member's position in the set (`longLatFromMember`).
fn member_pos(c: &mut Ctx, z: &ZVal, m: &[u8]) -> daisy::Result<Result<(f64, f64), ()>> {
    match z.idx().score(c.tx, m)? {
        Some(s) => Ok(Ok(decode(s))),
        None => {
            c.err("ERR could not decode requested zset member")?;
            Ok(Err(()))
        }
    }
}

/// Redis's `georadiusGeneric`, argument checks in its order.
fn radius_generic(c: &mut Ctx, a: &[&[u8]], src: usize, kind: Kind) -> daisy::Result<()> {
    macro_rules! tryr {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(()) => return Ok(()),
            }
        };
    }
    let Ok(z) = open_read(c, a[src])? else {
        return Ok(());
    };
    let mut shape = Shape::default();
    let mut storekey: Option<&[u8]> = None;
    let mut storedist = false;
    let base = match kind {
        Kind::Coords { .. } => {
            (shape.lon, shape.lat) = tryr!(lonlat(c, a[2], a[3]));
            (shape.radius, shape.conv) = {
                let (r, u) = tryr!(radius_arg(c, a[4], a[5]));
                (Some(r), u)
            };
            6
        }
        Kind::Member { .. } => {
            if let Some(z) = &z {
                (shape.lon, shape.lat) = tryr!(member_pos(c, z, a[2])?);
                let (r, u) = tryr!(radius_arg(c, a[3], a[4]));
                (shape.radius, shape.conv) = (Some(r), u);
            }
            5
        }
        Kind::Search { store } => {
            if store {
                storekey = Some(a[1]);
                3
            } else {
                2
            }
        }
    };
    let search = matches!(kind, Kind::Search { .. });
    let nostore = matches!(kind, Kind::Coords { ro: true } | Kind::Member { ro: true });
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort: Option<bool> = None; // Some(true): ASC
    let mut count: i64 = 0;
    let rem = a.len().saturating_sub(base);
    let mut i = 0;
    while i < rem {
        let arg = upper(a[base + i]);
        let at = base + i;
        match &arg[..] {
            b"WITHDIST" => withdist = true,
            b"WITHHASH" => withhash = true,
            b"WITHCOORD" => withcoord = true,
            b"ANY" => any = true,
            b"ASC" => sort = Some(true),
            b"DESC" => sort = Some(false),
            b"COUNT" if i + 1 < rem => {
                let Some(n) = parse_i64(a[at + 1]) else {
                    return c.err(E_INT);
                };
                if n <= 0 {
                    return c.err("ERR COUNT must be > 0");
                }
                count = n;
                i += 1;
            }
            b"STORE" | b"STOREDIST" if i + 1 < rem && !nostore && !search => {
                storekey = Some(a[at + 1]);
                storedist = &arg[..] == b"STOREDIST";
                i += 1;
            }
            b"STOREDIST" if search && storekey.is_some() => storedist = true,
            b"FROMMEMBER" if i + 1 < rem && search && !fromloc => {
                if let Some(z) = &z {
                    (shape.lon, shape.lat) = tryr!(member_pos(c, z, a[at + 1])?);
                }
                frommember = true;
                i += 1;
            }
            b"FROMLONLAT" if i + 2 < rem && search && !frommember => {
                (shape.lon, shape.lat) = tryr!(lonlat(c, a[at + 1], a[at + 2]));
                fromloc = true;
                i += 2;
            }
            b"BYRADIUS" if i + 2 < rem && search && !bybox => {
                let (r, u) = tryr!(radius_arg(c, a[at + 1], a[at + 2]));
                (shape.radius, shape.conv) = (Some(r), u);
                byradius = true;
                i += 2;
            }
            b"BYBOX" if i + 3 < rem && search && !byradius => {
                let w = tryr!(double(c, a[at + 1], "ERR need numeric width"));
                let h = tryr!(double(c, a[at + 2], "ERR need numeric height"));
                if h < 0.0 || w < 0.0 {
                    return c.err("ERR height or width cannot be negative");
                }
                let u = tryr!(unit(c, a[at + 3]));
                (shape.width, shape.height, shape.conv, shape.radius) = (w, h, u, None);
                bybox = true;
                i += 3;
            }
            _ => return c.err(E_SYNTAX),
        }
        i += 1;
    }
    if storekey.is_some() && (withdist || withhash || withcoord) {
        let who = if search {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return c.err(&format!(
            "ERR {who} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        ));
    }
    let name = String::from_utf8_lossy(a[0]).into_owned();
    if search && !(frommember || fromloc) {
        return c.err(&format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        ));
    }
    if search && !(byradius || bybox) {
        return c.err(&format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        ));
    }
    if any && count == 0 {
        return c.err("ERR the ANY argument requires COUNT argument");
    }
    let Some(z) = z else {
        match storekey {
            Some(k) => store_result(c, k, &[], "")?,
            None => resp::array(c.out, 0),
        }
        return Ok(());
    };
    if count != 0 && sort.is_none() && !any {
        sort = Some(true);
    }
    let limit = if any { count as usize } else { 0 };
    let mut found = search_in(c, &z, &shape, limit)?;
    drop(z);
    if found.is_empty() && storekey.is_none() {
        resp::array(c.out, 0);
        return Ok(());
    }
    let n = if count == 0 {
        found.len()
    } else {
        found.len().min(count as usize)
    };
    if let Some(asc) = sort {
        let cmp = |x: &Found, y: &Found| {
            let o = x.1.partial_cmp(&y.1).unwrap_or(Ordering::Equal);
            if asc {
                o
            } else {
                o.reverse()
            }
        };
        if n == found.len() {
            // glibc's qsort (a merge sort: stable).
            found.sort_by(cmp);
        } else {
            pqsort(&mut found, 0, n - 1, &cmp);
        }
    }
    found.truncate(n);
    if let Some(k) = storekey {
        let elems: Vec<(Vec<u8>, f64)> = found
            .into_iter()
            .map(|(m, d, s, _, _)| (m, if storedist { d / shape.conv } else { s }))
            .collect();
        let event = if search {
            "geosearchstore"
        } else {
            "georadiusstore"
        };
        return store_result(c, k, &elems, event);
    }
    let opts = withdist as usize + withhash as usize + withcoord as usize;
    resp::array(c.out, n);
    for (m, d, s, x, y) in found {
        if opts > 0 {
            resp::array(c.out, opts + 1);
        }
        resp::bulk(c.out, &m);
        if withdist {
            reply_distance(c, d / shape.conv);
        }
        if withhash {
            resp::int(c.out, s as i64);
        }
        if withcoord {
            resp::array(c.out, 2);
            reply_human(c, x);
            reply_human(c, y);
        }
    }
    Ok(())
}

/// Redis's `pqsort` (pqsort.c, BSD's quicksort that only sorts the partitions meeting
/// ranks `l..=r`): the order it leaves equal elements in is Redis's reply order.
fn pqsort<T>(v: &mut [T], l: usize, r: usize, cmp: &dyn Fn(&T, &T) -> Ordering) {
    let c = |v: &[T], i: usize, j: usize| cmp(&v[i], &v[j]);
    let med3 = |v: &[T], a: usize, b: usize, d: usize| {
        if c(v, a, b) == Ordering::Less {
            if c(v, b, d) == Ordering::Less {
                b
            } else if c(v, a, d) == Ordering::Less {
                d
            } else {
                a
            }
        } else if c(v, b, d) == Ordering::Greater {
            b
        } else if c(v, a, d) == Ordering::Less {
            a
        } else {
            d
        }
    };
    let vecswap = |v: &mut [T], a: usize, b: usize, n: usize| {
        for k in 0..n {
            v.swap(a + k, b + k);
        }
    };
    let mut stack = vec![(0usize, v.len())];
    while let Some((mut lo, mut n)) = stack.pop() {
        loop {
            if n < 7 {
                for pm in lo + 1..lo + n {
                    let mut pl = pm;
                    while pl > lo && c(v, pl - 1, pl) == Ordering::Greater {
                        v.swap(pl, pl - 1);
                        pl -= 1;
                    }
                }
                break;
            }
            let mut pm = lo + n / 2;
            if n > 7 {
                let mut pl = lo;
                let mut pn = lo + n - 1;
                if n > 40 {
                    let d = n / 8;
                    pl = med3(v, pl, pl + d, pl + 2 * d);
                    pm = med3(v, pm - d, pm, pm + d);
                    pn = med3(v, pn - 2 * d, pn - d, pn);
                }
                pm = med3(v, pl, pm, pn);
            }
            v.swap(lo, pm);
            let (mut pa, mut pb) = (lo + 1, lo + 1);
            let (mut pc, mut pd) = (lo + n - 1, lo + n - 1);
            loop {
                while pb <= pc {
                    let o = c(v, pb, lo);
                    if o == Ordering::Greater {
                        break;
                    }
                    if o == Ordering::Equal {
                        v.swap(pa, pb);
                        pa += 1;
                    }
                    pb += 1;
                }
                while pb <= pc {
                    let o = c(v, pc, lo);
                    if o == Ordering::Less {
                        break;
                    }
                    if o == Ordering::Equal {
                        v.swap(pc, pd);
                        pd -= 1;
                    }
                    pc -= 1;
                }
                if pb > pc {
                    break;
                }
                v.swap(pb, pc);
                pb += 1;
                pc -= 1;
            }
            let pn = lo + n;
            let s = (pa - lo).min(pb - pa);
            vecswap(v, lo, pb - s, s);
            let s = (pd - pc).min(pn - pd - 1);
            vecswap(v, pb, pn - s, s);
            let meets = |a: usize, len: usize| !(r < a || l >= a + len);
            let left = pb - pa;
            if left > 1 && meets(lo, left) {
                stack.push((lo, left));
            }
            let right = pd - pc;
            if right > 1 && meets(pn - right, right) {
                lo = pn - right;
                n = right;
                continue;
            }
            break;
        }
    }
}

fn search_in(c: &mut Ctx, z: &ZVal, shape: &Shape, limit: usize) -> daisy::Result<Vec<Found>> {
    search(c, z, shape, limit)
}

/// Redis's `getDoubleFromObject` (strtod, whole argument, no leading space, no NaN).
fn float(a: &[u8]) -> Option<f64> {
    parse_score(a)
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
