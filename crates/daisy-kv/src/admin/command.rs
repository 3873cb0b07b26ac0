//! COMMAND and its subcommands (server.c's `commandCommand` and friends): what this server's
//! commands are, described as Redis 7.0 describes them (`meta`).

use super::meta::{self, Arg, Bs, Cmd, Fk};
use super::{help, subcommand_error};
use crate::commands::{upper, Ctx, Table, E_SYNTAX};
use crate::resp;

/// Whether this server has `cmd`: its command (a subcommand's container) is in the table.
pub fn present(table: &Table, cmd: &Cmd) -> bool {
    let base = cmd.name.split('|').next().unwrap_or(&cmd.name);
    table.find(base.as_bytes()).is_some()
}

/// The top-level commands this server has, in name order.
fn commands(table: &Table) -> impl Iterator<Item = &'static Cmd> + '_ {
    meta::all()
        .iter()
        .filter(move |c| !c.name.contains('|') && present(table, c))
}

/// A command or subcommand by the name COMMAND INFO / DOCS take, if this server has it.
fn find(table: &Table, name: &[u8]) -> Option<&'static Cmd> {
    meta::lookup_by_fullname(name).filter(|c| present(table, c))
}

/// The words of a set reply (flags, categories, tips): a set in RESP3, an array in RESP2.
fn status_set(c: &mut Ctx, words: &[&str]) {
    c.set_header(words.len());
    for w in words {
        resp::simple(c.out, w);
    }
}

fn bulk_pair(c: &mut Ctx, k: &str, v: &str) {
    resp::bulk(c.out, k.as_bytes());
    resp::bulk(c.out, v.as_bytes());
}

/// One command's COMMAND INFO entry (server.c's `addReplyCommandInfo`).
fn info_entry(c: &mut Ctx, cmd: &Cmd) {
    let ((first, last, step), _) = cmd.legacy_range();
    resp::array(c.out, 10);
    resp::bulk(c.out, cmd.name.as_bytes());
    resp::int(c.out, cmd.arity as i64);
    status_set(c, &cmd.reply_flags());
    resp::int(c.out, first as i64);
    resp::int(c.out, last as i64);
    resp::int(c.out, step as i64);
    let cats: Vec<String> = cmd
        .acl_categories()
        .iter()
        .map(|k| format!("@{k}"))
        .collect();
    let cats: Vec<&str> = cats.iter().map(String::as_str).collect();
    status_set(c, &cats);
    c.set_header(cmd.tips.len());
    for t in &cmd.tips {
        resp::bulk(c.out, t.as_bytes());
    }
    key_specs(c, cmd);
    let subs = meta::subcommands(&cmd.name);
    if subs.is_empty() {
        c.set_header(0);
    } else {
        resp::array(c.out, subs.len());
        for s in subs {
            info_entry(c, s);
        }
    }
}

/// A command's key specs (server.c's `addReplyCommandKeySpecs`).
fn key_specs(c: &mut Ctx, cmd: &Cmd) {
    c.set_header(cmd.key_specs.len());
    for k in &cmd.key_specs {
        c.map(3 + usize::from(!k.notes.is_empty()));
        if !k.notes.is_empty() {
            bulk_pair(c, "notes", &k.notes);
        }
        resp::bulk(c.out, b"flags");
        status_set(c, &meta::key_flags_reply(&k.flags));
        resp::bulk(c.out, b"begin_search");
        c.map(2);
        match &k.bs {
            Bs::Unknown => {
                bulk_pair(c, "type", "unknown");
                resp::bulk(c.out, b"spec");
                c.map(0);
            }
            &Bs::Index(pos) => {
                bulk_pair(c, "type", "index");
                resp::bulk(c.out, b"spec");
                c.map(1);
                resp::bulk(c.out, b"index");
                resp::int(c.out, pos as i64);
            }
            Bs::Keyword(word, from) => {
                let from = *from;
                bulk_pair(c, "type", "keyword");
                resp::bulk(c.out, b"spec");
                c.map(2);
                bulk_pair(c, "keyword", word);
                resp::bulk(c.out, b"startfrom");
                resp::int(c.out, from as i64);
            }
        }
        resp::bulk(c.out, b"find_keys");
        c.map(2);
        let (kind, fields): (&str, [(&str, i32); 3]) = match k.fk {
            Fk::Unknown => ("unknown", [("", 0); 3]),
            Fk::Range(last, step, limit) => (
                "range",
                [("lastkey", last), ("keystep", step), ("limit", limit)],
            ),
            Fk::Keynum(idx, first, step) => (
                "keynum",
                [("keynumidx", idx), ("firstkey", first), ("keystep", step)],
            ),
        };
        bulk_pair(c, "type", kind);
        resp::bulk(c.out, b"spec");
        if kind == "unknown" {
            c.map(0);
        } else {
            c.map(3);
            for (name, v) in fields {
                resp::bulk(c.out, name.as_bytes());
                resp::int(c.out, v as i64);
            }
        }
    }
}

/// Arguments as COMMAND DOCS describes them (server.c's `addReplyCommandArgList`).
fn doc_args(c: &mut Ctx, args: &[Arg]) {
    resp::array(c.out, args.len());
    for a in args {
        let nested = matches!(a.ty.as_str(), "oneof" | "block");
        let n = 2
            + usize::from(a.key_spec >= 0)
            + usize::from(!a.token.is_empty())
            + usize::from(!a.since.is_empty())
            + usize::from(!a.deprecated_since.is_empty())
            + usize::from(a.flags != 0)
            + usize::from(nested);
        c.map(n);
        bulk_pair(c, "name", &a.name);
        bulk_pair(c, "type", &a.ty);
        if a.key_spec >= 0 {
            resp::bulk(c.out, b"key_spec_index");
            resp::int(c.out, a.key_spec as i64);
        }
        if !a.token.is_empty() {
            bulk_pair(c, "token", &a.token);
        }
        if !a.since.is_empty() {
            bulk_pair(c, "since", &a.since);
        }
        if !a.deprecated_since.is_empty() {
            bulk_pair(c, "deprecated_since", &a.deprecated_since);
        }
        if a.flags != 0 {
            resp::bulk(c.out, b"flags");
            let flags: Vec<&str> = [
                (meta::OPTIONAL, "optional"),
                (meta::MULTIPLE, "multiple"),
                (meta::MULTIPLE_TOKEN, "multiple_token"),
            ]
            .iter()
            .filter(|(f, _)| a.flags & f != 0)
            .map(|&(_, n)| n)
            .collect();
            status_set(c, &flags);
        }
        if nested {
            resp::bulk(c.out, b"arguments");
            doc_args(c, &a.args);
        }
    }
}

/// One command's COMMAND DOCS map (server.c's `addReplyCommandDocs`).
fn docs_entry(c: &mut Ctx, cmd: &Cmd) {
    let subs = meta::subcommands(&cmd.name);
    let opt = |s: &str| usize::from(!s.is_empty());
    let n = 1
        + opt(&cmd.summary)
        + opt(&cmd.since)
        + opt(&cmd.complexity)
        + usize::from(!cmd.doc_flags.is_empty())
        + opt(&cmd.deprecated_since)
        + opt(&cmd.replaced_by)
        + usize::from(!cmd.history.is_empty())
        + usize::from(!cmd.args.is_empty())
        + usize::from(!subs.is_empty());
    c.map(n);
    if !cmd.summary.is_empty() {
        bulk_pair(c, "summary", &cmd.summary);
    }
    if !cmd.since.is_empty() {
        bulk_pair(c, "since", &cmd.since);
    }
    bulk_pair(c, "group", &cmd.group);
    if !cmd.complexity.is_empty() {
        bulk_pair(c, "complexity", &cmd.complexity);
    }
    if !cmd.doc_flags.is_empty() {
        resp::bulk(c.out, b"doc_flags");
        let flags: Vec<&str> = cmd.doc_flags.iter().map(String::as_str).collect();
        status_set(c, &flags);
    }
    if !cmd.deprecated_since.is_empty() {
        bulk_pair(c, "deprecated_since", &cmd.deprecated_since);
    }
    if !cmd.replaced_by.is_empty() {
        bulk_pair(c, "replaced_by", &cmd.replaced_by);
    }
    if !cmd.history.is_empty() {
        resp::bulk(c.out, b"history");
        c.set_header(cmd.history.len());
        for (since, what) in &cmd.history {
            resp::array(c.out, 2);
            resp::bulk(c.out, since.as_bytes());
            resp::bulk(c.out, what.as_bytes());
        }
    }
    if !cmd.args.is_empty() {
        resp::bulk(c.out, b"arguments");
        doc_args(c, &cmd.args);
    }
    if !subs.is_empty() {
        resp::bulk(c.out, b"subcommands");
        c.map(subs.len());
        for s in subs {
            resp::bulk(c.out, s.name.as_bytes());
            docs_entry(c, s);
        }
    }
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern].
fn list(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    // As Redis: one FILTERBY with exactly its two arguments; anything else is a syntax error.
    let filter = match a.len() {
        2 => None,
        5 if a[2].eq_ignore_ascii_case(b"FILTERBY") => match &upper(a[3])[..] {
            b"MODULE" | b"ACLCAT" | b"PATTERN" => Some((upper(a[3]), a[4].to_ascii_lowercase())),
            _ => return c.err(E_SYNTAX),
        },
        _ => return c.err(E_SYNTAX),
    };
    let mut names: Vec<&str> = Vec::new();
    for cmd in meta::all() {
        if !present(c.table, cmd) {
            continue;
        }
        let keep = match &filter {
            None => true,
            Some((kind, arg)) => match &kind[..] {
                b"ACLCAT" => cmd
                    .acl_categories()
                    .iter()
                    .any(|k| k.as_bytes() == &arg[..]),
                b"PATTERN" => crate::glob::matches(arg, cmd.name.as_bytes()),
                _ => false, // no modules
            },
        };
        if keep {
            names.push(cmd.name.as_str());
        }
    }
    resp::array(c.out, names.len());
    for n in names {
        resp::bulk(c.out, n.as_bytes());
    }
    Ok(())
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS <full command>.
fn getkeys(c: &mut Ctx, a: &[&[u8]], with_flags: bool) -> daisy::Result<()> {
    let args = &a[2..];
    let Some(cmd) = meta::lookup_argv(args).filter(|m| present(c.table, m)) else {
        return c.err("ERR Invalid command specified");
    };
    if !cmd.has_keys() {
        return c.err("ERR The command has no key arguments");
    }
    let n = args.len() as i32;
    if (cmd.arity > 0 && cmd.arity != n) || n < -cmd.arity {
        return c.err("ERR Invalid number of arguments specified for command");
    }
    let keys = match cmd.keys(args) {
        Some(k) if !k.is_empty() => k,
        _ if cmd.has("no_mandatory_keys") => Vec::new(),
        _ => return c.err("ERR Invalid arguments specified for command"),
    };
    resp::array(c.out, keys.len());
    for (i, flags) in keys {
        if with_flags {
            resp::array(c.out, 2);
            resp::bulk(c.out, args[i]);
            status_set(c, &flags);
        } else {
            resp::bulk(c.out, args[i]);
        }
    }
    Ok(())
}

pub fn command(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if a.len() == 1 {
        let all: Vec<&Cmd> = commands(c.table).collect();
        resp::array(c.out, all.len());
        for cmd in all {
            info_entry(c, cmd);
        }
        return Ok(());
    }
    match (&upper(a[1])[..], a.len()) {
        (b"COUNT", 2) => {
            let n = commands(c.table).count();
            resp::int(c.out, n as i64);
        }
        (b"LIST", _) => return list(c, a),
        (b"INFO", n) => {
            let found: Vec<Option<&Cmd>> = if n == 2 {
                commands(c.table).map(Some).collect()
            } else {
                a[2..].iter().map(|name| find(c.table, name)).collect()
            };
            resp::array(c.out, found.len());
            for cmd in found {
                match cmd {
                    Some(cmd) => info_entry(c, cmd),
                    None => c.null_array(),
                }
            }
        }
        (b"DOCS", n) => {
            let found: Vec<&Cmd> = if n == 2 {
                commands(c.table).collect()
            } else {
                a[2..]
                    .iter()
                    .filter_map(|name| find(c.table, name))
                    .collect()
            };
            c.map(found.len());
            for cmd in found {
                resp::bulk(c.out, cmd.name.as_bytes());
                docs_entry(c, cmd);
            }
        }
        (b"GETKEYS", n) if n >= 3 => return getkeys(c, a, false),
        (b"GETKEYSANDFLAGS", n) if n >= 3 => return getkeys(c, a, true),
        (b"HELP", 2) => help(
            c,
            a[0],
            &[
                "(no subcommand)",
                "    Return details about all Redis commands.",
                "COUNT",
                "    Return the total number of commands in this Redis server.",
                "LIST",
                "    Return a list of all commands in this Redis server.",
                "INFO [<command-name> ...]",
                "    Return details about multiple Redis commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "DOCS [<command-name> ...]",
                "    Return documentation details about multiple Redis commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "GETKEYS <full-command>",
                "    Return the keys from a full Redis command.",
                "GETKEYSANDFLAGS <full-command>",
                "    Return the keys and the access flags from a full Redis command.",
            ],
        ),
        _ => return subcommand_error(c, a),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::COMMANDS;

    /// Every command of the table is one Redis has, with Redis's arity and the flags that
    /// change what the server does with it (a container's flags are its subcommands').
    #[test]
    fn the_command_table_agrees_with_redis() {
        for s in COMMANDS {
            let m =
                meta::lookup(s.name).unwrap_or_else(|| panic!("{} is no Redis command", s.name));
            assert_eq!(s.arity, m.arity, "{}", s.name);
            if m.is_container() {
                continue;
            }
            for f in [
                "write", "readonly", "denyoom", "no_auth", "no_multi", "admin",
            ] {
                assert_eq!(s.has(f), m.has(f), "{}: {f}", s.name);
            }
        }
    }
}
