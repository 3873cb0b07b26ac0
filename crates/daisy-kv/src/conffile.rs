//! `daisy serve redis.conf`: Redis's configuration file (config.c's `loadServerConfig` and
//! `rewriteConfig`).
//!
//! A line is a directive and its arguments, split as Redis splits them (`sdssplitargs`:
//! blanks between arguments, "double quotes" with `\n`, `\r`, `\t`, `\b`, `\a`, `\xHH` and
//! `\"` escapes, 'single quotes' with `\'`); `#` starts a comment line; directive names are
//! any case; a directive given twice takes its last value (`save` lines add up, as in Redis);
//! `include path` reads another file there. Values are checked as CONFIG SET checks them
//! (units such as `1gb` where Redis takes them). Daisy's own directives: `pool`, `size`,
//! `max-size`, `busy-poll-us`, `mode` (as `daisy serve`'s options). A line that is not a
//! directive, or a bad value, stops the start with Redis's message naming the file and line.
//!
//! CONFIG REWRITE writes the running values back into the file given at start: each
//! parameter's first line gets its current value, its later lines go, and parameters that
//! differ from their defaults and had no line are appended; other lines (comments, Daisy's
//! directives, includes) stay as they were. The new file replaces the old one atomically.

use crate::config::Config;
use crate::server::Options;
use daisy::ModeChoice;
use std::path::{Path, PathBuf};

/// One directive of a config file.
#[derive(Clone, Debug)]
pub struct Directive {
    /// Lowercase.
    pub name: String,
    pub args: Vec<String>,
    pub file: PathBuf,
    pub line: usize,
    pub text: String,
}

/// Redis's fatal config error text (the file and line, the line itself, the reason).
pub fn fatal(file: &Path, line: usize, text: &str, why: &str) -> String {
    format!(
        "\n*** FATAL CONFIG FILE ERROR (Redis {}) ***\nReading the configuration file {}, at line {line}\n>>> '{}'\n{why}",
        crate::REDIS_VERSION,
        file.display(),
        text.trim()
    )
}

fn fatal_at(d: &Directive, why: &str) -> String {
    fatal(&d.file, d.line, &d.text, why)
}

/// Split a line into arguments as Redis's `sdssplitargs`; None for unbalanced quotes.
pub fn split_args(line: &str) -> Option<Vec<String>> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            return Some(out);
        }
        let mut cur: Vec<u8> = Vec::new();
        let (mut dq, mut sq) = (false, false);
        loop {
            if dq {
                if i >= b.len() {
                    return None;
                }
                if b[i] == b'\\' && i + 3 < b.len() && b[i + 1] == b'x' {
                    let hex = std::str::from_utf8(&b[i + 2..i + 4]).ok();
                    if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        cur.push(v);
                        i += 4;
                        continue;
                    }
                }
                if b[i] == b'\\' && i + 1 < b.len() {
                    cur.push(match b[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        c => c,
                    });
                    i += 2;
                    continue;
                }
                if b[i] == b'"' {
                    // The closing quote must end the argument.
                    if i + 1 < b.len() && !b[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                }
                cur.push(b[i]);
                i += 1;
            } else if sq {
                if i >= b.len() {
                    return None;
                }
                if b[i] == b'\\' && i + 1 < b.len() && b[i + 1] == b'\'' {
                    cur.push(b'\'');
                    i += 2;
                    continue;
                }
                if b[i] == b'\'' {
                    if i + 1 < b.len() && !b[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                }
                cur.push(b[i]);
                i += 1;
            } else {
                if i >= b.len() || b[i].is_ascii_whitespace() {
                    break;
                }
                match b[i] {
                    b'"' => dq = true,
                    b'\'' => sq = true,
                    c => cur.push(c),
                }
                i += 1;
            }
        }
        out.push(String::from_utf8_lossy(&cur).into_owned());
    }
}

/// The directives of `path` and of the files it includes, in order.
pub fn read(path: &Path) -> Result<Vec<Directive>, String> {
    let mut out = Vec::new();
    read_into(path, 0, &mut out)?;
    Ok(out)
}

fn read_into(path: &Path, depth: usize, out: &mut Vec<Directive>) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "Fatal error, can't open config file '{}': {e}",
            path.display()
        )
    })?;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(mut args) = split_args(line) else {
            return Err(fatal(
                path,
                n + 1,
                raw,
                "Unbalanced quotes in configuration line",
            ));
        };
        if args.is_empty() {
            continue;
        }
        let name = args.remove(0).to_ascii_lowercase();
        let d = Directive {
            name,
            args,
            file: path.to_path_buf(),
            line: n + 1,
            text: raw.to_string(),
        };
        if d.name == "include" {
            if d.args.len() != 1 {
                return Err(fatal_at(&d, "Bad directive or wrong number of arguments"));
            }
            if depth >= 16 {
                return Err(fatal_at(&d, "Too many nested includes"));
            }
            read_into(Path::new(&d.args[0]), depth + 1, out)?;
            continue;
        }
        out.push(d);
    }
    Ok(())
}

/// Apply the config file at `path` to `o` (before the command line's options, which
/// override it). Redis's parameters the server does not read are checked and kept in
/// `o.config`, for CONFIG GET.
pub fn load(path: &Path, o: &mut Options) -> Result<(), String> {
    let ds = read(path)?;
    let mut cfg = Config::default();
    let mut set: Vec<&'static str> = Vec::new();
    for d in &ds {
        let one = || -> Result<&str, String> {
            match &d.args[..] {
                [v] => Ok(v.as_str()),
                _ => Err(fatal_at(d, "Bad directive or wrong number of arguments")),
            }
        };
        let size = |v: &str| -> Result<u64, String> {
            crate::config::parse_memory(v)
                .filter(|&n| n > 0)
                .ok_or_else(|| fatal_at(d, "argument must be a memory value"))
        };
        match d.name.as_str() {
            "pool" => o.pool = PathBuf::from(one()?),
            "size" => o.size = size(one()?)?,
            "max-size" => o.max_size = Some(size(one()?)?),
            "busy-poll-us" => {
                o.busy_poll_us = one()?
                    .parse()
                    .map_err(|_| fatal_at(d, "argument couldn't be parsed into an integer"))?
            }
            // Users declared in the file (Redis's `ACLAppendUserForLoading`: each checked now,
            // created at start).
            "user" => {
                if d.args.is_empty() {
                    return Err(fatal_at(d, "Bad directive or wrong number of arguments"));
                }
                if o.users.iter().any(|u| u[0] == d.args[0]) {
                    return Err(fatal_at(
                        d,
                        &format!(
                            "Error in user declaration '{}': Duplicate user found. A user can only be defined once in config files",
                            d.args[0]
                        ),
                    ));
                }
                if let Err((arg, why)) = crate::acl::Acl::check_user_line(&d.args) {
                    return Err(fatal_at(
                        d,
                        &format!("Error in user declaration '{arg}': {why}"),
                    ));
                }
                o.users.push(d.args.clone());
            }
            "mode" => {
                o.mode = match one()?.to_ascii_lowercase().as_str() {
                    "auto" => ModeChoice::Auto,
                    "pmem" => ModeChoice::Pmem,
                    "msync" => ModeChoice::Msync,
                    _ => {
                        return Err(fatal_at(
                            d,
                            "argument(s) must be one of the following: auto, pmem, msync",
                        ))
                    }
                }
            }
            name => match cfg.set_from_file(name, &d.args) {
                None => {
                    return Err(fatal_at(d, "Bad directive or wrong number of arguments"));
                }
                Some(Err(why)) if why == "wrong number of arguments" => {
                    return Err(fatal_at(d, "Bad directive or wrong number of arguments"));
                }
                Some(Err(why)) => return Err(fatal_at(d, &why)),
                Some(Ok(())) => {
                    let (canon, _) = Config::canonical(name).expect("a parameter");
                    if !set.contains(&canon) {
                        set.push(canon);
                    }
                }
            },
        }
    }
    let get = |n: &str| cfg.get(n).unwrap_or("").to_string();
    let num = |n: &str| get(n).parse::<u64>().unwrap_or(0);
    for name in set {
        match name {
            "port" => o.port = num(name) as u16,
            "bind" => {
                let first = get(name)
                    .split(' ')
                    .find(|w| !w.is_empty())
                    .map(str::to_string);
                if let Some(a) = first {
                    o.bind = match a.trim_start_matches('-') {
                        "*" => "0.0.0.0".into(),
                        "::*" => "::".into(),
                        a => a.into(),
                    };
                }
            }
            "requirepass" => {
                let p = get(name);
                o.requirepass = (!p.is_empty()).then_some(p);
            }
            "maxclients" => o.max_clients = num(name) as usize,
            "tcp-keepalive" => o.tcp_keepalive = num(name).min(u32::MAX as u64) as u32,
            "databases" => o.databases = num(name) as usize,
            "loglevel" => o.loglevel = get(name),
            "logfile" => o.logfile = get(name),
            "daemonize" => o.daemonize = get(name) == "yes",
            "pidfile" => {
                o.pidfile = Some(PathBuf::from(get(name))).filter(|p| !p.as_os_str().is_empty())
            }
            "unixsocket" => {
                o.unixsocket = Some(PathBuf::from(get(name))).filter(|p| !p.as_os_str().is_empty())
            }
            "unixsocketperm" => o.unixsocketperm = u32::from_str_radix(&get(name), 8).unwrap_or(0),
            // The largest size of a new pool (an existing pool keeps its own).
            "maxmemory" if num(name) > 0 => o.max_size = Some(num(name)),
            // Relative to `dir`, where Redis has changed directory by the time it reads it.
            "aclfile" if !get(name).is_empty() => {
                let f = PathBuf::from(get(name));
                let dir = get("dir");
                o.aclfile = Some(if f.is_relative() && !dir.is_empty() {
                    Path::new(&dir).join(f)
                } else {
                    f
                });
            }
            _ => o.config.push((name.to_string(), get(name))),
        }
    }
    o.config_file = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
    Ok(())
}

/// Parameters CONFIG REWRITE leaves alone: the server derives them from the pool (its
/// directory and file, its size) or has no use for them (snapshots, the append-only file).
const NOT_REWRITTEN: &[&str] = &["dir", "dbfilename", "save", "appendonly", "maxmemory"];

/// A value as a config file line writes it: quoted when it is empty or holds blanks, quotes
/// or control characters (Redis's `sdscatrepr`).
fn quote(v: &str) -> String {
    let plain = !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\'' && b != b'\\');
    if plain {
        return v.to_string();
    }
    let mut s = String::from("\"");
    for b in v.bytes() {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            7 => s.push_str("\\a"),
            8 => s.push_str("\\b"),
            b' '..=b'~' => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

/// The line for parameter `name` with value `v`.
fn directive_line(name: &str, multi: bool, v: &str) -> String {
    if multi && !v.is_empty() {
        let words: Vec<String> = v.split(' ').map(quote).collect();
        format!("{name} {}", words.join(" "))
    } else {
        format!("{name} {}", quote(v))
    }
}

/// CONFIG REWRITE: write `cfg`'s values into the config file at `path`, and `users` (ACL
/// LIST's lines) in place of its `user` lines (Redis's `rewriteConfigUserOption`: the users
/// as they are now; none when they live in an ACL file).
pub fn rewrite(path: &Path, cfg: &Config, users: &[String]) -> Result<(), String> {
    let old = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut out: Vec<String> = Vec::new();
    let mut done: Vec<&'static str> = Vec::new();
    let mut users_done = false;
    for raw in old.lines() {
        let args = split_args(raw.trim()).unwrap_or_default();
        if args.first().is_some_and(|n| n.eq_ignore_ascii_case("user"))
            && !raw.trim_start().starts_with('#')
        {
            if !users_done {
                out.extend(users.iter().cloned());
                users_done = true;
            }
            continue;
        }
        let canon = args
            .first()
            .filter(|_| !raw.trim_start().starts_with('#'))
            .and_then(|n| Config::canonical(n));
        match canon {
            Some((name, _)) if NOT_REWRITTEN.contains(&name) => out.push(raw.to_string()),
            Some((name, multi)) => {
                if !done.contains(&name) {
                    done.push(name);
                    out.push(directive_line(name, multi, cfg.get(name).unwrap_or("")));
                }
            }
            None => out.push(raw.to_string()),
        }
    }
    let mut header = false;
    if !users_done && !users.is_empty() {
        out.push("# Generated by CONFIG REWRITE".into());
        header = true;
        out.extend(users.iter().cloned());
    }
    for (name, v) in cfg.changed() {
        if done.contains(&name) || NOT_REWRITTEN.contains(&name) {
            continue;
        }
        if !header {
            out.push("# Generated by CONFIG REWRITE".into());
            header = true;
        }
        let multi = Config::canonical(name).is_some_and(|(_, m)| m);
        out.push(directive_line(name, multi, v));
    }
    let mut text = out.join("\n");
    text.push('\n');
    let tmp = path.with_extension(format!("rewrite-{}.tmp", std::process::id()));
    let r = std::fs::write(&tmp, text).and_then(|()| {
        if let Ok(m) = std::fs::metadata(path) {
            let _ = std::fs::set_permissions(&tmp, m.permissions());
        }
        std::fs::rename(&tmp, path)
    });
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Option<Vec<String>> {
        split_args(s)
    }

    #[test]
    fn splits_as_sdssplitargs() {
        assert_eq!(split("port 7000").unwrap(), ["port", "7000"]);
        assert_eq!(split("  a   b  ").unwrap(), ["a", "b"]);
        assert_eq!(
            split(r#"requirepass "a b\n\x41""#).unwrap(),
            ["requirepass", "a b\nA"]
        );
        assert_eq!(split(r"x 'it\'s'").unwrap(), ["x", "it's"]);
        assert_eq!(split(r#"save """#).unwrap(), ["save", ""]);
        assert!(split(r#"x "open"#).is_none());
        assert!(split(r#"x "a"b"#).is_none());
        assert!(split("x 'a").is_none());
    }

    #[test]
    fn quotes_what_needs_it() {
        assert_eq!(quote("abc"), "abc");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(quote("a b"), "\"a b\"");
        assert_eq!(quote("a\"b\n"), "\"a\\\"b\\n\"");
        for v in ["", "a b", "x\"y'z\\", "\x01\t"] {
            let line = directive_line("requirepass", false, v);
            assert_eq!(split_args(&line).unwrap()[1], v, "{line}");
        }
    }
}
