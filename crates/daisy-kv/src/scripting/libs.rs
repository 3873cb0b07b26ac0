//! The libraries Redis loads into its interpreter, written against their documented
//! behaviour: `bit` (LuaBitOp), `cjson` (lua-cjson) and `cmsgpack` (lua-cmsgpack). Redis's
//! `struct` library is not provided (README, "Scripting").

use mlua::{LightUserData, Lua, MultiValue, Table, Value, Variadic};
use std::cell::Cell;
use std::rc::Rc;

pub fn register(lua: &Lua, g: &Table) -> mlua::Result<()> {
    g.raw_set("bit", bit(lua)?)?;
    g.raw_set("cjson", cjson(lua)?)?;
    g.raw_set("cmsgpack", cmsgpack(lua)?)?;
    g.raw_set("struct", super::struct_lib::library(lua)?)?;
    Ok(())
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => s.to_str().ok()?.trim().parse().ok(),
        _ => None,
    }
}

// ---- bit ---------------------------------------------------------------------------------

/// LuaBitOp's conversion: the number modulo 2^32 as a signed 32-bit integer.
fn tobit(v: &Value) -> mlua::Result<i32> {
    let n = number(v)
        .ok_or_else(|| mlua::Error::RuntimeError("bad argument (number expected)".into()))?;
    // LuaBitOp adds 2^52+2^51 and takes the low word: rounding to nearest.
    let r = n.round_ties_even();
    Ok((r.rem_euclid(4294967296.0) as u64 as u32) as i32)
}

fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("tobit", lua.create_function(|_, v: Value| tobit(&v))?)?;
    t.raw_set("bnot", lua.create_function(|_, v: Value| Ok(!tobit(&v)?))?)?;
    let fold = |lua: &Lua, f: fn(i32, i32) -> i32| {
        lua.create_function(move |_, args: Variadic<Value>| {
            let mut it = args.iter();
            let first = it.next().ok_or_else(|| {
                mlua::Error::RuntimeError("bad argument #1 (number expected, got no value)".into())
            })?;
            let mut acc = tobit(first)?;
            for v in it {
                acc = f(acc, tobit(v)?);
            }
            Ok(acc)
        })
    };
    t.raw_set("band", fold(lua, |a, b| a & b)?)?;
    t.raw_set("bor", fold(lua, |a, b| a | b)?)?;
    t.raw_set("bxor", fold(lua, |a, b| a ^ b)?)?;
    let shift = |lua: &Lua, f: fn(i32, u32) -> i32| {
        lua.create_function(move |_, (a, n): (Value, Value)| {
            Ok(f(tobit(&a)?, (tobit(&n)? as u32) & 31))
        })
    };
    t.raw_set("lshift", shift(lua, |a, n| ((a as u32) << n) as i32)?)?;
    t.raw_set("rshift", shift(lua, |a, n| ((a as u32) >> n) as i32)?)?;
    t.raw_set("arshift", shift(lua, |a, n| a >> n)?)?;
    t.raw_set("rol", shift(lua, |a, n| (a as u32).rotate_left(n) as i32)?)?;
    t.raw_set("ror", shift(lua, |a, n| (a as u32).rotate_right(n) as i32)?)?;
    t.raw_set(
        "bswap",
        lua.create_function(|_, v: Value| Ok((tobit(&v)? as u32).swap_bytes() as i32))?,
    )?;
    t.raw_set(
        "tohex",
        lua.create_function(|_, (v, n): (Value, Option<Value>)| {
            let x = tobit(&v)? as u32;
            let mut n = match n {
                Some(n) => tobit(&n)?,
                None => 8,
            };
            let upper = n < 0;
            if upper {
                n = -n;
            }
            let n = n.clamp(1, 8) as usize;
            let s = format!("{x:08x}");
            let s = s[8 - n..].to_string();
            Ok(if upper { s.to_uppercase() } else { s })
        })?,
    )?;
    Ok(t)
}

// ---- cjson -------------------------------------------------------------------------------

struct JsonCfg {
    encode_max_depth: Cell<usize>,
    decode_max_depth: Cell<usize>,
    encode_invalid_numbers: Cell<bool>,
    decode_invalid_numbers: Cell<bool>,
}

fn rt(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

fn json_null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn cjson(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let cfg = Rc::new(JsonCfg {
        encode_max_depth: Cell::new(1000),
        decode_max_depth: Cell::new(1000),
        encode_invalid_numbers: Cell::new(false),
        decode_invalid_numbers: Cell::new(true),
    });
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |lua, v: Value| {
            let mut out = Vec::new();
            json_encode(&v, &mut out, &c, 0)?;
            lua.create_string(&out)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, s: mlua::String| {
            let b = s.as_bytes();
            let mut p = JsonParser {
                b: &b,
                i: 0,
                cfg: &c,
            };
            p.ws();
            let v = p.value(lua, 0)?;
            p.ws();
            if p.i < b.len() {
                return Err(rt(format!(
                    "Expected the end but found invalid token at character {}",
                    p.i + 1
                )));
            }
            Ok(v)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_max_depth",
        lua.create_function(move |_, n: Option<usize>| {
            if let Some(n) = n {
                c.encode_max_depth.set(n);
            }
            Ok(c.encode_max_depth.get())
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_max_depth",
        lua.create_function(move |_, n: Option<usize>| {
            if let Some(n) = n {
                c.decode_max_depth.set(n);
            }
            Ok(c.decode_max_depth.get())
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |_, v: Option<Value>| {
            if let Some(v) = v {
                c.encode_invalid_numbers.set(onoff(&v));
            }
            Ok(c.encode_invalid_numbers.get())
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_invalid_numbers",
        lua.create_function(move |_, v: Option<Value>| {
            if let Some(v) = v {
                c.decode_invalid_numbers.set(onoff(&v));
            }
            Ok(c.decode_invalid_numbers.get())
        })?,
    )?;
    for name in [
        "encode_keep_buffer",
        "encode_sparse_array",
        "encode_number_precision",
    ] {
        t.raw_set(name, lua.create_function(|_, _: MultiValue| Ok(true))?)?;
    }
    t.raw_set("null", json_null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn onoff(v: &Value) -> bool {
    match v {
        Value::Boolean(b) => *b,
        Value::String(s) => matches!(&*s.as_bytes(), b"on" | b"true"),
        _ => false,
    }
}

fn json_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'/' => out.extend_from_slice(b"\\/"),
            b if b < 0x20 || b == 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            b => out.push(b),
        }
    }
    out.push(b'"');
}

/// `%.14g`, as lua-cjson prints numbers.
pub(super) fn g14(n: f64) -> String {
    if n == n.trunc() && n.abs() < 1e15 {
        return format!("{}", n as i64);
    }
    let s = format!("{:.13e}", n);
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..14).contains(&exp) {
        let decimals = (13 - exp).max(0) as usize;
        let f = format!("{:.*}", decimals, n);
        let f = if f.contains('.') {
            f.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            f
        };
        f
    } else {
        let m = if mant.contains('.') {
            mant.trim_end_matches('0').trim_end_matches('.')
        } else {
            mant
        };
        format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

fn json_encode(v: &Value, out: &mut Vec<u8>, cfg: &JsonCfg, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(u) if u.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Number(n) => {
            if !n.is_finite() {
                if !cfg.encode_invalid_numbers.get() {
                    return Err(rt("Cannot serialise number: must not be NaN or Inf"));
                }
                let s = if n.is_nan() {
                    "nan"
                } else if *n > 0.0 {
                    "inf"
                } else {
                    "-inf"
                };
                out.extend_from_slice(s.as_bytes());
            } else {
                out.extend_from_slice(g14(*n).as_bytes());
            }
        }
        Value::String(s) => json_string(&s.as_bytes(), out),
        Value::Table(t) => {
            if depth + 1 > cfg.encode_max_depth.get() {
                return Err(rt(format!(
                    "Cannot serialise, excessive nesting ({})",
                    depth + 1
                )));
            }
            // An array when every key is a positive integer (and not excessively sparse).
            let mut max = 0i64;
            let mut count = 0i64;
            let mut is_array = true;
            for pair in t.pairs::<Value, Value>() {
                let (k, _) = pair?;
                count += 1;
                match k {
                    Value::Integer(i) if i >= 1 => max = max.max(i),
                    Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => max = max.max(n as i64),
                    _ => is_array = false,
                }
            }
            is_array &= count > 0;
            if is_array && max > 10 && max > 2 * count {
                return Err(rt("Cannot serialise table: excessively sparse array"));
            }
            if is_array {
                out.push(b'[');
                for i in 1..=max {
                    if i > 1 {
                        out.push(b',');
                    }
                    let v: Value = t.raw_get(i)?;
                    json_encode(&v, out, cfg, depth + 1)?;
                }
                out.push(b']');
            } else {
                out.push(b'{');
                for (n, pair) in t.pairs::<Value, Value>().enumerate() {
                    let (k, v) = pair?;
                    let v = &v;
                    if n > 0 {
                        out.push(b',');
                    }
                    match k {
                        Value::String(s) => json_string(&s.as_bytes(), out),
                        Value::Integer(i) => json_string(i.to_string().as_bytes(), out),
                        Value::Number(f) => json_string(g14(f).as_bytes(), out),
                        _ => {
                            return Err(rt(
                                "Cannot serialise table: table key must be a number or string",
                            ))
                        }
                    }
                    out.push(b':');
                    json_encode(v, out, cfg, depth + 1)?;
                }
                out.push(b'}');
            }
        }
        other => {
            return Err(rt(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    }
    Ok(())
}

struct JsonParser<'a> {
    b: &'a [u8],
    i: usize,
    cfg: &'a JsonCfg,
}

impl JsonParser<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn err(&self, what: &str) -> mlua::Error {
        rt(format!(
            "Expected {what} but found invalid token at character {}",
            self.i + 1
        ))
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> mlua::Result<Value> {
        self.ws();
        let Some(&c) = self.b.get(self.i) else {
            return Err(rt(format!(
                "Expected value but found T_END at character {}",
                self.i + 1
            )));
        };
        match c {
            b'{' | b'[' => {
                if depth + 1 > self.cfg.decode_max_depth.get() {
                    return Err(rt(format!(
                        "Found too many nested data structures ({}) at character {}",
                        depth + 1,
                        self.i + 1
                    )));
                }
                self.i += 1;
                let t = lua.create_table()?;
                let close = if c == b'{' { b'}' } else { b']' };
                self.ws();
                if self.b.get(self.i) == Some(&close) {
                    self.i += 1;
                    return Ok(Value::Table(t));
                }
                let mut n = 1;
                loop {
                    if c == b'{' {
                        self.ws();
                        if self.b.get(self.i) != Some(&b'"') {
                            return Err(self.err("object key string"));
                        }
                        let k = self.string(lua)?;
                        self.ws();
                        if self.b.get(self.i) != Some(&b':') {
                            return Err(self.err("colon"));
                        }
                        self.i += 1;
                        let v = self.value(lua, depth + 1)?;
                        t.raw_set(k, v)?;
                    } else {
                        let v = self.value(lua, depth + 1)?;
                        t.raw_set(n, v)?;
                        n += 1;
                    }
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(&x) if x == close => {
                            self.i += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return Err(self.err("comma or end")),
                    }
                }
            }
            b'"' => Ok(Value::String(self.string(lua)?)),
            b't' if self.b[self.i..].starts_with(b"true") => {
                self.i += 4;
                Ok(Value::Boolean(true))
            }
            b'f' if self.b[self.i..].starts_with(b"false") => {
                self.i += 5;
                Ok(Value::Boolean(false))
            }
            b'n' if self.b[self.i..].starts_with(b"null") => {
                self.i += 4;
                Ok(json_null())
            }
            _ => {
                let start = self.i;
                while self.i < self.b.len()
                    && matches!(self.b[self.i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E' | b'x' | b'X' | b'a'..=b'd' | b'f' | b'A'..=b'D' | b'F' | b'i' | b'n' | b'I' | b'N')
                {
                    self.i += 1;
                }
                let s = std::str::from_utf8(&self.b[start..self.i]).unwrap_or("");
                match s.parse::<f64>() {
                    Ok(n) if !s.is_empty() => Ok(Value::Number(n)),
                    _ => {
                        self.i = start;
                        Err(self.err("value"))
                    }
                }
            }
        }
    }

    fn string(&mut self, lua: &Lua) -> mlua::Result<mlua::String> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.b.get(self.i) else {
                return Err(rt(format!(
                    "Expected value but found unexpected end of string at character {}",
                    self.i + 1
                )));
            };
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = *self.b.get(self.i).ok_or_else(|| self.err("escape"))?;
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'u' => {
                            let hex = self
                                .b
                                .get(self.i..self.i + 4)
                                .ok_or_else(|| self.err("unicode escape"))?;
                            let mut cp =
                                u32::from_str_radix(std::str::from_utf8(hex).unwrap_or("x"), 16)
                                    .map_err(|_| self.err("unicode escape"))?;
                            self.i += 4;
                            if (0xD800..0xDC00).contains(&cp)
                                && self.b[self.i..].starts_with(b"\\u")
                            {
                                if let Some(lo) = self.b.get(self.i + 2..self.i + 6) {
                                    if let Ok(lo) = u32::from_str_radix(
                                        std::str::from_utf8(lo).unwrap_or("x"),
                                        16,
                                    ) {
                                        if (0xDC00..0xE000).contains(&lo) {
                                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                            self.i += 6;
                                        }
                                    }
                                }
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
        lua.create_string(&out)
    }
}

// ---- cmsgpack ----------------------------------------------------------------------------

/// Deepest table nesting packed; deeper tables are packed as nil (lua-cmsgpack).
const MSGPACK_MAX_NESTING: usize = 16;

fn mp_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2147483648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn mp_len(out: &mut Vec<u8>, n: usize, fix: u8, fixmax: usize, c16: u8, c32: u8) {
    if n < fixmax {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(c16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(c32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn mp_encode(v: &Value, out: &mut Vec<u8>, level: usize) -> mlua::Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => mp_int(*i, out),
        Value::Number(n) => {
            if n.fract() == 0.0 && n.is_finite() && n.abs() < 9.2e18 {
                mp_int(*n as i64, out);
            } else if (*n as f32) as f64 == *n || n.is_nan() {
                out.push(0xca);
                out.extend_from_slice(&(*n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        Value::String(s) => {
            let b = s.as_bytes();
            let n = b.len();
            if n < 32 {
                out.push(0xa0 | n as u8);
            } else if n <= 0xff {
                out.extend_from_slice(&[0xd9, n as u8]);
            } else if n <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) if level < MSGPACK_MAX_NESTING => {
            // Two passes over the table (holding every pair at once exhausts Lua's stack of
            // references on big tables): count and classify, then write.
            let mut n = 0usize;
            let mut ints = true;
            let mut max = 0i64;
            for pair in t.pairs::<Value, Value>() {
                let (k, _) = pair?;
                n += 1;
                match k {
                    Value::Integer(i) if i >= 1 => max = max.max(i),
                    Value::Number(f) if f >= 1.0 && f.fract() == 0.0 => max = max.max(f as i64),
                    _ => ints = false,
                }
            }
            let is_array = ints && max as usize == n;
            if is_array {
                mp_len(out, n, 0x90, 16, 0xdc, 0xdd);
                for i in 1..=n {
                    let v: Value = t.raw_get(i)?;
                    mp_encode(&v, out, level + 1)?;
                }
            } else {
                mp_len(out, n, 0x80, 16, 0xde, 0xdf);
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    mp_encode(&k, out, level + 1)?;
                    mp_encode(&v, out, level + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

struct MpReader<'a> {
    b: &'a [u8],
    i: usize,
}

impl MpReader<'_> {
    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        if self.i + n > self.b.len() {
            return Err(rt("Missing bytes in input."));
        }
        let s = &self.b[self.i..self.i + n];
        self.i += n;
        Ok(s)
    }

    fn be(&mut self, n: usize) -> mlua::Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }

    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let c = self.take(1)?[0];
        Ok(match c {
            0x00..=0x7f => Value::Integer(c as i64),
            0xe0..=0xff => Value::Integer(c as i8 as i64),
            0xa0..=0xbf => {
                let n = (c & 0x1f) as usize;
                Value::String(lua.create_string(self.take(n)?)?)
            }
            0x90..=0x9f => self.array(lua, (c & 0x0f) as usize)?,
            0x80..=0x8f => self.map(lua, (c & 0x0f) as usize)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xca => Value::Number(f32::from_bits(self.be(4)? as u32) as f64),
            0xcb => Value::Number(f64::from_bits(self.be(8)?)),
            0xcc => Value::Integer(self.be(1)? as i64),
            0xcd => Value::Integer(self.be(2)? as i64),
            0xce => Value::Integer(self.be(4)? as i64),
            0xcf => {
                let v = self.be(8)?;
                if v > i64::MAX as u64 {
                    Value::Number(v as f64)
                } else {
                    Value::Integer(v as i64)
                }
            }
            0xd0 => Value::Integer(self.be(1)? as u8 as i8 as i64),
            0xd1 => Value::Integer(self.be(2)? as u16 as i16 as i64),
            0xd2 => Value::Integer(self.be(4)? as u32 as i32 as i64),
            0xd3 => Value::Integer(self.be(8)? as i64),
            0xd9 | 0xc4 => {
                let n = self.be(1)? as usize;
                Value::String(lua.create_string(self.take(n)?)?)
            }
            0xda | 0xc5 => {
                let n = self.be(2)? as usize;
                Value::String(lua.create_string(self.take(n)?)?)
            }
            0xdb | 0xc6 => {
                let n = self.be(4)? as usize;
                Value::String(lua.create_string(self.take(n)?)?)
            }
            0xdc => {
                let n = self.be(2)? as usize;
                self.array(lua, n)?
            }
            0xdd => {
                let n = self.be(4)? as usize;
                self.array(lua, n)?
            }
            0xde => {
                let n = self.be(2)? as usize;
                self.map(lua, n)?
            }
            0xdf => {
                let n = self.be(4)? as usize;
                self.map(lua, n)?
            }
            _ => return Err(rt("Bad data format in input.")),
        })
    }

    fn array(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for i in 0..n {
            let v = self.value(lua)?;
            t.raw_set(i + 1, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if !k.is_nil() {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

/// lua-cmsgpack's `mp_unpack_full`: decode up to `limit` objects (0: all) from `offset`.
fn mp_unpack(
    lua: &Lua,
    s: &[u8],
    limit: i64,
    offset: i64,
    with_offset: bool,
) -> mlua::Result<MultiValue> {
    if offset < 0 || limit < 0 {
        return Err(rt(format!(
            "Invalid request to unpack with offset of {offset} and limit of {limit}."
        )));
    }
    if offset as usize > s.len() {
        return Err(rt(format!(
            "Start offset {offset} greater than input length {}.",
            s.len()
        )));
    }
    let mut r = MpReader {
        b: s,
        i: offset as usize,
    };
    let mut vals = Vec::new();
    while r.i < s.len() && (limit == 0 || (vals.len() as i64) < limit) {
        vals.push(r.value(lua)?);
    }
    if with_offset {
        let next = if r.i >= s.len() { -1 } else { r.i as i64 };
        vals.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_iter(vals))
}

fn cmsgpack(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(rt("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                mp_encode(v, &mut out, 0)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, s: mlua::String| mp_unpack(lua, &s.as_bytes(), 0, 0, false))?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, (s, off): (mlua::String, Option<i64>)| {
            mp_unpack(lua, &s.as_bytes(), 1, off.unwrap_or(0), true)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, (s, limit, off): (mlua::String, i64, Option<i64>)| {
            mp_unpack(lua, &s.as_bytes(), limit, off.unwrap_or(0), true)
        })?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    Ok(t)
}
