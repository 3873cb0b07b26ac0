//! The `struct` library Redis loads (its deps/lua/src/lua_struct.c, Roberto Ierusalimschy's
//! struct 1.7), written from its documented behaviour on the platform Redis runs on here
//! (x86-64 or aarch64 Linux: little-endian, `long` and `size_t` of 8 bytes, `int` of 4, the
//! largest alignment 8), with its error texts:
//!
//! - `struct.pack(fmt, ...)`: the values as bytes;
//! - `struct.unpack(fmt, data [, pos])`: the values, then the position after them;
//! - `struct.size(fmt)`: the bytes `fmt` takes.
//!
//! Format: `>` big endian, `<` little endian, `![n]` alignment (default 8), `x` a padding
//! byte, `b`/`B` signed/unsigned char, `h`/`H` short, `l`/`L` long, `T` size_t, `i[n]`/`I[n]`
//! an integer of n bytes (default 4, at most 32), `c[n]` n chars (pack: 0 means the whole
//! string; unpack: 0 means the number unpacked just before), `s` a zero-terminated string,
//! `f` float, `d` double, space ignored. Numbers are Lua 5.1's doubles; integers are
//! converted as C converts a double (out-of-range values as x86-64 does).

use mlua::{Lua, MultiValue, Table, Value};

const MAXINTSIZE: usize = 32;
/// `MAXALIGN`: the larger of a double's alignment and an int's size.
const MAXALIGN: usize = 8;

/// Endianness and alignment (`Header`).
struct Header {
    little: bool,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            little: cfg!(target_endian = "little"),
            align: 1,
        }
    }
}

/// A Lua error raised by a C function: the calling script's position first (`luaL_where(L,
/// 1)`), as `luaL_error` writes it.
fn lua_error(lua: &Lua, msg: &str) -> mlua::Error {
    let mut at = String::new();
    if let Some(d) = lua.inspect_stack(1) {
        let line = d.curr_line();
        if line > 0 {
            let src = d.source();
            at = format!("{}:{line}: ", src.short_src.as_deref().unwrap_or("?"));
        }
    }
    mlua::Error::RuntimeError(format!("{at}{msg}"))
}

/// `luaL_argerror`: "bad argument #n to 'name' (msg)", the name as the caller called it.
fn arg_error(lua: &Lua, narg: usize, msg: &str) -> mlua::Error {
    let (mut narg, mut name, mut method) = (narg as i64, "?".to_string(), false);
    if let Some(d) = lua.inspect_stack(0) {
        let n = d.names();
        method = n.name_what == Some("method");
        if let Some(s) = n.name {
            name = s.into_owned();
        }
    }
    if method {
        narg -= 1;
        if narg == 0 {
            return lua_error(lua, &format!("calling '{name}' on bad self ({msg})"));
        }
    }
    lua_error(lua, &format!("bad argument #{narg} to '{name}' ({msg})"))
}

/// `luaL_typerror`'s message for argument `narg` (1-based) of `args`.
fn type_error(lua: &Lua, args: &[Value], narg: usize, expected: &str) -> mlua::Error {
    let got = match args.get(narg - 1) {
        None => "no value",
        Some(v) => v.type_name(),
    };
    arg_error(lua, narg, &format!("{expected} expected, got {got}"))
}

/// `lua_tonumber`: numbers, and strings that read as one.
fn to_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => {
            let t = s.to_str().ok()?;
            let t = t.trim_matches(|c: char| c.is_ascii_whitespace());
            if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                return u64::from_str_radix(h, 16).ok().map(|x| x as f64);
            }
            t.parse::<f64>().ok()
        }
        _ => None,
    }
}

fn check_number(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<f64> {
    args.get(narg - 1)
        .and_then(to_number)
        .ok_or_else(|| type_error(lua, args, narg, "number"))
}

/// `luaL_checklstring`: strings, and numbers as Lua prints them (`%.14g`).
fn check_string(lua: &Lua, args: &[Value], narg: usize) -> mlua::Result<Vec<u8>> {
    match args.get(narg - 1) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(i)) => Ok(super::libs::g14(*i as f64).into_bytes()),
        Some(Value::Number(n)) => Ok(super::libs::g14(*n).into_bytes()),
        _ => Err(type_error(lua, args, narg, "string")),
    }
}

/// 2^63.
const TWO_63: f64 = (1u64 << 63) as f64;

/// C's `(long long)` cast on x86-64 (`cvttsd2si`): truncation, and i64::MIN out of range.
pub(super) fn c_long_long(d: f64) -> i64 {
    if d.is_nan() || !(-TWO_63..TWO_63).contains(&d) {
        i64::MIN
    } else {
        d.trunc() as i64
    }
}

fn cvtt(d: f64) -> u64 {
    c_long_long(d) as u64
}

/// `putinteger`'s conversion of a number to the unsigned type (a negative one through the
/// signed type, a large one as x86-64 converts to unsigned).
fn to_bits(n: f64) -> u64 {
    if n < TWO_63 {
        cvtt(n)
    } else {
        cvtt(n - TWO_63) ^ (1 << 63)
    }
}

/// `getnum`: a number in the format, or `default`.
fn getnum(lua: &Lua, fmt: &[u8], i: &mut usize, default: usize) -> mlua::Result<usize> {
    if !fmt.get(*i).is_some_and(u8::is_ascii_digit) {
        return Ok(default);
    }
    let mut a: i32 = 0;
    while let Some(&c) = fmt.get(*i).filter(|c| c.is_ascii_digit()) {
        let d = (c - b'0') as i32;
        if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
            return Err(lua_error(lua, "integral size overflow"));
        }
        a = a * 10 + d;
        *i += 1;
    }
    Ok(a as usize)
}

/// `optsize`: the bytes option `opt` takes (0 for the control options).
fn optsize(lua: &Lua, opt: u8, fmt: &[u8], i: &mut usize) -> mlua::Result<usize> {
    Ok(match opt {
        b'B' | b'b' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'x' => 1,
        b'c' => getnum(lua, fmt, i, 1)?,
        b'i' | b'I' => {
            let sz = getnum(lua, fmt, i, 4)?;
            if sz > MAXINTSIZE {
                return Err(lua_error(
                    lua,
                    &format!("integral size {sz} is larger than limit of {MAXINTSIZE}"),
                ));
            }
            sz
        }
        _ => 0,
    })
}

/// `gettoalign`: padding before an item of `size` bytes at `len` (as the C computes it, also
/// for sizes that are not powers of 2).
fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
}

/// `controloptions`: space, `>`, `<`, `!n`; anything else is refused.
fn controloptions(
    lua: &Lua,
    opt: u8,
    fmt: &[u8],
    i: &mut usize,
    h: &mut Header,
) -> mlua::Result<()> {
    match opt {
        b' ' => {}
        b'>' => h.little = false,
        b'<' => h.little = true,
        b'!' => {
            let a = getnum(lua, fmt, i, MAXALIGN)?;
            if !(a > 0 && a & (a - 1) == 0) {
                return Err(lua_error(
                    lua,
                    &format!("alignment {a} is not a power of 2"),
                ));
            }
            h.align = a;
        }
        _ => {
            let msg = format!("invalid format option '{}'", opt as char);
            return Err(arg_error(lua, 1, &msg));
        }
    }
    Ok(())
}

/// Bytes in the order `little` asks for (they are built little-endian).
fn ordered(mut b: Vec<u8>, little: bool) -> Vec<u8> {
    if !little {
        b.reverse();
    }
    b
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::String> {
    let mut args: Vec<Value> = args.into_iter().collect();
    let fmt = check_string(lua, &args, 1)?;
    // The C pushes a nil after the arguments (its mark before the string buffer): a missing
    // value reads as that nil ("got nil"), and only those after it as "no value".
    args.push(Value::Nil);
    let mut h = Header::default();
    let mut arg = 2;
    let mut out: Vec<u8> = Vec::new();
    let mut total = 0usize;
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(lua, opt, &fmt, &mut i)?;
        let toalign = gettoalign(total, &h, opt, size);
        total += toalign;
        out.resize(out.len() + toalign, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(lua, &args, arg)?;
                arg += 1;
                let mut value = to_bits(n);
                let mut buf = Vec::with_capacity(size);
                for _ in 0..size {
                    buf.push((value & 0xff) as u8);
                    value >>= 8;
                }
                out.extend(ordered(buf, h.little));
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(lua, &args, arg)? as f32;
                arg += 1;
                out.extend(ordered(f.to_le_bytes().to_vec(), h.little));
            }
            b'd' => {
                let d = check_number(lua, &args, arg)?;
                arg += 1;
                out.extend(ordered(d.to_le_bytes().to_vec(), h.little));
            }
            b'c' | b's' => {
                let s = check_string(lua, &args, arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // The C checks after moving to the next argument: its number is named.
                    return Err(arg_error(lua, arg, "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => controloptions(lua, opt, &fmt, &mut i, &mut h)?,
        }
        total += size;
    }
    lua.create_string(&out)
}

/// `getinteger`: `b` read in its order, sign-extended when `signed` (with the C's shift,
/// whose count wraps at 64 as x86-64's does).
fn getinteger(b: &[u8], little: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let size = b.len();
    for k in 0..size {
        let byte = if little { b[size - 1 - k] } else { b[k] };
        l = (l << 8) | byte as u64;
    }
    if !signed {
        return l as f64;
    }
    let mask = (!0u64).wrapping_shl((size * 8).wrapping_sub(1) as u32);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let args: Vec<Value> = args.into_iter().collect();
    let fmt = check_string(lua, &args, 1)?;
    let data = check_string(lua, &args, 2)?;
    let ld = data.len();
    // luaL_optinteger: absent or nil is 1; the C keeps it in a size_t.
    let pos0: i64 = match args.get(2) {
        None | Some(Value::Nil) => 1,
        Some(v) => match to_number(v) {
            Some(n) => cvtt(n) as i64,
            None => return Err(type_error(lua, &args, 3, "number")),
        },
    };
    let mut pos = pos0 as u64 as usize;
    if pos == 0 {
        return Err(arg_error(lua, 3, "offset must be 1 or greater"));
    }
    pos -= 1;
    let mut h = Header::default();
    let mut res: Vec<Value> = Vec::new();
    let short = |lua: &Lua| arg_error(lua, 2, "data string too short");
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(lua, opt, &fmt, &mut i)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return Err(short(lua));
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                res.push(Value::Number(getinteger(
                    &data[pos..pos + size],
                    h.little,
                    signed,
                )));
            }
            b'x' => {}
            b'f' => {
                let mut b: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes");
                if !h.little {
                    b.reverse();
                }
                res.push(Value::Number(f32::from_le_bytes(b) as f64));
            }
            b'd' => {
                let mut b: [u8; 8] = data[pos..pos + 8].try_into().expect("8 bytes");
                if !h.little {
                    b.reverse();
                }
                res.push(Value::Number(f64::from_le_bytes(b)));
            }
            b'c' => {
                if size == 0 {
                    let prev = res.last().and_then(to_number);
                    let Some(n) = prev else {
                        return Err(lua_error(lua, "format 'c0' needs a previous size"));
                    };
                    size = to_bits(n) as usize;
                    res.pop();
                    if !(size <= ld && pos <= ld - size) {
                        return Err(short(lua));
                    }
                }
                res.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(lua_error(lua, "unfinished string in data"));
                };
                size = e + 1;
                res.push(Value::String(lua.create_string(&data[pos..pos + e])?));
            }
            _ => controloptions(lua, opt, &fmt, &mut i, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    res.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(MultiValue::from_iter(res))
}

fn size(lua: &Lua, args: MultiValue) -> mlua::Result<f64> {
    let args: Vec<Value> = args.into_iter().collect();
    let fmt = check_string(lua, &args, 1)?;
    let mut h = Header::default();
    let mut pos = 0usize;
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let size = optsize(lua, opt, &fmt, &mut i)?;
        pos += gettoalign(pos, &h, opt, size);
        if opt == b's' {
            return Err(arg_error(lua, 1, "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(arg_error(lua, 1, "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            controloptions(lua, opt, &fmt, &mut i, &mut h)?;
        }
        pos += size;
    }
    Ok(pos as f64)
}

/// The `struct` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(pack)?)?;
    t.raw_set("unpack", lua.create_function(unpack)?)?;
    t.raw_set("size", lua.create_function(size)?)?;
    Ok(t)
}
