//! CLIENT and its subcommands (networking.c's `clientCommand`), and a connection's CLIENT
//! LIST line (`catClientInfoString`). The other connections belong to the event loop: it
//! lists them in `AdminState::others` before a CLIENT command runs, and closes the ones
//! CLIENT KILL names once the command's transaction has committed.

use super::{help, set_name, subcommand_error, Pause, ReplyMode};
use crate::commands::{lossy, parse_i64, upper, Action, Client, Ctx, E_INT, E_SYNTAX};
use crate::resp;

/// A connection as CLIENT LIST and CLIENT KILL see it.
#[derive(Clone, Debug, Default)]
pub struct ClientRow {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    /// Its CLIENT LIST line, without the newline.
    pub line: String,
    /// A blocking command blocks it.
    pub blocked: bool,
    /// In subscriber mode: its type is `pubsub` (Redis's `getClientType`).
    pub pubsub: bool,
}

impl ClientRow {
    /// The row of `cl`; `dirty`: a key it watches was touched (flag d); `closing`: it closes
    /// once its replies are written (flag c).
    pub fn of(cl: &Client, now_ms: i64, dirty: bool, closing: bool) -> ClientRow {
        ClientRow {
            id: cl.id,
            addr: cl.addr.clone(),
            laddr: cl.laddr.clone(),
            line: client_line(cl, now_ms, dirty, closing),
            blocked: cl.blocked.is_some(),
            pubsub: cl.pubsub.active(),
        }
    }
}

/// One connection's CLIENT LIST / CLIENT INFO line (Redis 7.0's fields, no newline).
pub fn client_line(cl: &Client, now_ms: i64, dirty: bool, closing: bool) -> String {
    // Redis's order (`catClientInfoString`).
    let mut flags = String::new();
    if cl.admin.monitor {
        flags.push('O');
    }
    if cl.pubsub.active() {
        flags.push('P');
    }
    if cl.multi.is_some() {
        flags.push('x');
    }
    if cl.blocked.is_some() {
        flags.push('b');
    }
    let t = &cl.tracking;
    if t.on {
        flags.push('t');
    }
    if t.broken_redir {
        flags.push('R');
    }
    if t.bcast {
        flags.push('B');
    }
    if dirty {
        flags.push('d');
    }
    if closing {
        flags.push('c');
    }
    if cl.addr.starts_with('/') {
        flags.push('U');
    }
    if cl.admin.no_evict {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let (multi, multi_mem) = cl
        .multi
        .as_ref()
        .map_or((-1, 0), |m| (m.len() as i64, m.arg_bytes()));
    let s = &cl.admin.conn;
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} sub={} psub={} \
         ssub={} multi={multi} qbuf={} qbuf-free={} argv-mem={} multi-mem={multi_mem} rbs={} \
         rbp={} obl={} oll={} omem={} tot-mem={} events={} cmd={} user={} redir={} resp={}",
        cl.id,
        cl.addr,
        cl.laddr,
        cl.fd,
        lossy(&cl.name),
        (now_ms - cl.created_ms).max(0) / 1000,
        (now_ms - cl.last_ms.max(cl.created_ms)).max(0) / 1000,
        cl.db,
        cl.pubsub.channels.len(),
        cl.pubsub.patterns.len(),
        cl.pubsub.shard.len(),
        s.qbuf,
        s.qbuf_free,
        cl.admin.argv_mem,
        s.rbs,
        s.rbp,
        s.obl,
        s.oll,
        s.omem,
        s.tot_mem + multi_mem + cl.admin.argv_mem,
        if s.writing { "rw" } else { "r" },
        if cl.last_cmd.is_empty() {
            "NULL"
        } else {
            cl.last_cmd
        },
        cl.user.name,
        if t.on { t.redirect as i64 } else { -1 },
        if cl.resp3 { 3 } else { 2 },
    )
}

/// Client types as CLIENT LIST TYPE and CLIENT KILL TYPE name them (`getClientTypeByName`):
/// whether a row is of that type (`normal`, or `pubsub` for a client in subscriber mode; no
/// client is a replica or a master here); None for an unknown name.
fn client_type(name: &[u8]) -> Option<fn(&ClientRow) -> bool> {
    match &upper(name)[..] {
        b"NORMAL" => Some(|r| !r.pubsub),
        b"PUBSUB" => Some(|r| r.pubsub),
        b"SLAVE" | b"REPLICA" | b"MASTER" => Some(|_| false),
        _ => None,
    }
}

/// Every connection, this one included, in the order they connected.
fn all_rows(c: &mut Ctx) -> Vec<ClientRow> {
    let dirty = c.ks.watches.is_dirty(c.cl.id);
    let mut rows = c.sv.admin.others.clone();
    rows.push(ClientRow::of(c.cl, c.now_ms, dirty, false));
    rows.sort_by_key(|r| r.id);
    rows
}

/// A text reply (CLIENT LIST, CLIENT INFO): verbatim in RESP3, bulk in RESP2.
fn text(c: &mut Ctx, lines: &[ClientRow]) {
    let mut t = String::new();
    for r in lines {
        t.push_str(&r.line);
        t.push('\n');
    }
    resp::verbatim(c.out, t.as_bytes(), c.cl.resp3);
}

/// CLIENT LIST [TYPE type | ID id ...].
fn list(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let rows = all_rows(c);
    if a.len() == 4 && a[2].eq_ignore_ascii_case(b"TYPE") {
        match client_type(a[3]) {
            Some(of_type) => {
                let rows: Vec<ClientRow> = rows.into_iter().filter(of_type).collect();
                text(c, &rows)
            }
            None => return c.err(&format!("ERR Unknown client type '{}'", lossy(a[3]))),
        }
    } else if a.len() > 3 && a[2].eq_ignore_ascii_case(b"ID") {
        let mut found = Vec::new();
        for id in &a[3..] {
            let Some(id) = parse_i64(id) else {
                return c.err("ERR Invalid client ID");
            };
            found.extend(rows.iter().filter(|r| r.id as i64 == id).cloned());
        }
        text(c, &found);
    } else if a.len() != 2 {
        return c.err(E_SYNTAX);
    } else {
        text(c, &rows);
    }
    Ok(())
}

/// CLIENT KILL addr:port | CLIENT KILL [ID id] [TYPE type] [USER user] [ADDR addr]
/// [LADDR addr] [SKIPME yes|no] ...
fn kill(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let (mut addr, mut laddr, mut id, mut of_type, mut skipme) = (None, None, None, None, true);
    let mut user: Option<String> = None;
    if a.len() == 3 {
        addr = Some(a[2]);
        skipme = false; // the old form may kill the caller itself
    } else {
        let mut i = 2;
        while i < a.len() {
            let Some(&v) = a.get(i + 1) else {
                return c.err(E_SYNTAX);
            };
            match &upper(a[i])[..] {
                b"ID" => match parse_i64(v) {
                    Some(n) if n >= 1 => id = Some(n as u64),
                    _ => return c.err("ERR client-id should be greater than 0"),
                },
                b"TYPE" => match client_type(v) {
                    Some(t) => of_type = Some(t),
                    None => return c.err(&format!("ERR Unknown client type '{}'", lossy(v))),
                },
                b"ADDR" => addr = Some(v),
                b"LADDR" => laddr = Some(v),
                b"USER" => {
                    if c.sv.acl.user(v).is_none() {
                        return c.err(&format!("ERR No such user '{}'", lossy(v)));
                    }
                    user = Some(format!(" user={} ", lossy(v)));
                }
                b"SKIPME" => match &upper(v)[..] {
                    b"YES" => skipme = true,
                    b"NO" => skipme = false,
                    _ => return c.err(E_SYNTAX),
                },
                _ => return c.err(E_SYNTAX),
            }
            i += 2;
        }
    }
    let me = c.cl.id;
    let mut killed = 0;
    let mut close_me = false;
    for r in all_rows(c) {
        if user.as_ref().is_some_and(|u| !r.line.contains(u.as_str()))
            || addr.is_some_and(|x| x != r.addr.as_bytes())
            || laddr.is_some_and(|x| x != r.laddr.as_bytes())
            || of_type.is_some_and(|t| !t(&r))
            || id.is_some_and(|x| x != r.id)
            || (r.id == me && skipme)
        {
            continue;
        }
        if r.id == me {
            close_me = true;
        } else {
            c.sv.admin.kill.push(r.id);
            c.sv.admin.others.retain(|o| o.id != r.id);
        }
        killed += 1;
    }
    if a.len() == 3 {
        if killed == 0 {
            return c.err("ERR No such client");
        }
        resp::ok(c.out);
    } else {
        resp::int(c.out, killed);
    }
    if close_me {
        c.action = Action::Close;
    }
    Ok(())
}

/// CLIENT PAUSE timeout [WRITE|ALL].
fn pause(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let mut all = true;
    if a.len() == 4 {
        match &upper(a[3])[..] {
            b"WRITE" => all = false,
            b"ALL" => all = true,
            _ => return c.err("ERR CLIENT PAUSE mode must be WRITE or ALL"),
        }
    }
    let Some(ms) = parse_i64(a[2]) else {
        return c.err("ERR timeout is not an integer or out of range");
    };
    if ms < 0 {
        return c.err("ERR timeout is negative");
    }
    let until_ms = if ms > 0 {
        c.now_ms.saturating_add(ms)
    } else {
        0
    };
    // A new pause never shortens one in force, nor turns ALL into WRITE (`pauseClients`).
    let p = match c.sv.admin.pause {
        Some(old) => Pause {
            until_ms: old.until_ms.max(until_ms),
            all: old.all || all,
        },
        None => Pause { until_ms, all },
    };
    c.sv.admin.pause = Some(p);
    resp::ok(c.out);
    Ok(())
}

const HELP: &[&str] = &[
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
];

pub fn client(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match (&upper(a[1])[..], a.len()) {
        (b"HELP", 2) => help(c, a[0], HELP),
        (b"ID", 2) => resp::int(c.out, c.cl.id as i64),
        (b"INFO", 2) => {
            let me = ClientRow::of(c.cl, c.now_ms, c.ks.watches.is_dirty(c.cl.id), false);
            text(c, &[me]);
        }
        (b"LIST", _) => return list(c, a),
        (b"REPLY", 3) => match &upper(a[2])[..] {
            b"ON" => {
                c.cl.admin.reply = ReplyMode::On;
                resp::ok(c.out);
            }
            b"OFF" => c.cl.admin.reply = ReplyMode::Off,
            b"SKIP" => {
                if c.cl.admin.reply != ReplyMode::Off {
                    c.cl.admin.reply = ReplyMode::SkipNext;
                }
            }
            _ => return c.err(E_SYNTAX),
        },
        (b"NO-EVICT", 3) => match &upper(a[2])[..] {
            b"ON" | b"OFF" => {
                c.cl.admin.no_evict = a[2].eq_ignore_ascii_case(b"ON");
                resp::ok(c.out);
            }
            _ => return c.err(E_SYNTAX),
        },
        (b"KILL", _) => return kill(c, a),
        (b"UNBLOCK", 3 | 4) => {
            if a.len() == 4 && !matches!(&upper(a[3])[..], b"TIMEOUT" | b"ERROR") {
                return c.err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
            }
            let Some(id) = parse_i64(a[2]) else {
                return c.err(E_INT);
            };
            let error = a.len() == 4 && upper(a[3]) == b"ERROR";
            // A client blocked on keys (not one CLIENT PAUSE holds): the event loop answers
            // it once this command's transaction commits.
            let blocked =
                c.sv.admin
                    .others
                    .iter()
                    .any(|r| r.id as i64 == id && r.blocked);
            if blocked && !c.sv.admin.unblock.iter().any(|u| u.0 as i64 == id) {
                c.sv.admin.unblock.push((id as u64, error));
            }
            resp::int(c.out, blocked as i64);
        }
        (b"SETNAME", 3) => {
            if set_name(c, a[2])? {
                resp::ok(c.out);
            }
        }
        (b"GETNAME", 2) => {
            if c.cl.name.is_empty() {
                c.nil();
            } else {
                resp::bulk(c.out, &c.cl.name);
            }
        }
        (b"UNPAUSE", 2) => {
            c.sv.admin.pause = None;
            resp::ok(c.out);
        }
        (b"PAUSE", 3 | 4) => return pause(c, a),
        (b"TRACKING", n) if n >= 3 => {
            let ids: Vec<u64> = all_rows(c).iter().map(|r| r.id).collect();
            return crate::tracking::client_tracking(c, a, &ids);
        }
        (b"CACHING", 3) => return crate::tracking::client_caching(c, a),
        (b"GETREDIR", 2) => crate::tracking::client_getredir(c),
        (b"TRACKINGINFO", 2) => crate::tracking::client_trackinginfo(c),
        _ => return subcommand_error(c, a),
    }
    Ok(())
}
