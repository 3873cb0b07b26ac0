//! A script that runs past `busy-reply-threshold` (`lua-time-limit`): from then on, while
//! it runs, the other connections are answered from inside the script, as Redis's
//! `processEventsWhileBlocked` answers them with `processCommand`'s busy-script rules.
//!
//! What a request gets (Redis 7.0's order of checks): an unknown command, a wrong number of
//! arguments, or a `no_multi` command inside MULTI gets its usual error; a command without
//! Redis's `allow-busy` flag gets `-BUSY` (and inside MULTI it marks the transaction, so its
//! EXEC answers EXECABORT; an EXEC itself answers `EXECABORT ... BUSY ...` and ends the
//! transaction). Of the `allow-busy` commands, SCRIPT KILL and FUNCTION KILL stop a script
//! that has not written (at its next instruction-count check), FUNCTION STATS describes it,
//! SHUTDOWN NOSAVE ends the process at once (the script's transaction never commits, as after
//! a crash), MULTI, DISCARD, UNWATCH and QUIT do what they always do; the rest (WATCH, AUTH,
//! HELLO, RESET) need state the script's command holds, so the connection's requests from
//! that one on wait until the script ends.
//!
//! A script whose event-loop group holds other connections' requests before it (their
//! replies wait for the group's commit) does not answer: it is stopped for a restart
//! (`Running::restart`; its group fails and the retry runs it in a group of its own, after
//! those replies are durable and written).
//!
//! The event loop hands over ([`Peer`]) each other connection that can be answered this way:
//! one whose committed replies are all written (so a reply given here cannot overtake an
//! earlier one), not blocked, not paused, authenticated, an unrestricted user, not a RESP2
//! subscriber. Its input comes first from what the event loop read already (requests the
//! round parsed and has not run, which come after the script, then a partial request), then
//! from its socket, where only complete requests are taken (peeked first, then consumed).
//! After the script the event loop skips the requests answered here and applies what they
//! changed (MULTI state, QUIT). The event loop is inside the script's command meanwhile, so
//! nothing else reads these connections.
#![expect(
    unsafe_code,
    reason = "recv/send on the event loop's sockets by descriptor (libc)"
)]

use super::lua::{RunKind, Running};
use crate::commands::{self, Spec};
use crate::resp::{self, Limits, Parsed};
use std::cell::RefCell;
use std::ops::Range;
use std::os::fd::RawFd;
use std::rc::Rc;

const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

/// The connections a running script answers, shared by the event loop (which fills it before
/// a command that runs a script and takes it back after) and the interpreter's hook.
pub type Shared = Rc<RefCell<Peers>>;

#[derive(Default)]
pub struct Peers {
    pub list: Vec<Peer>,
    /// What a socket holds, peeked.
    scratch: Vec<u8>,
    /// The script shares its group with other connections' requests: at the busy threshold
    /// it is stopped for a restart in a group of its own (`Running::restart`), not answering.
    pub restart: bool,
    /// Set by SIGTERM or SIGINT (the event loop's flag): a busy script that has not written is
    /// killed, so the server can shut down; one that has written ends the process as SHUTDOWN
    /// NOSAVE does (its transaction never commits).
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// One other connection, as the event loop hands it to a running script.
pub struct Peer {
    pub conn: usize,
    pub fd: RawFd,
    /// The connection's input buffer, moved here while the script runs (empty when it holds
    /// nothing unrun), and the request parser's limits.
    pub input: Vec<u8>,
    pub limits: Limits,
    /// Requests the round parsed and has not run (they come after the script), in order:
    /// their index in the round's work and their arguments' ranges in `input` (a range of
    /// `arg_ranges`).
    pub parsed: Vec<(usize, Range<usize>)>,
    pub arg_ranges: Vec<Range<usize>>,
    /// The unparsed rest of `input`: a partial request.
    pub tail: Range<usize>,
    /// What answering it did (the event loop sets `in_multi` first).
    pub outcome: Outcome,
}

/// What the requests answered during the script did, for the event loop to apply after it.
#[derive(Default)]
pub struct Outcome {
    /// How many of `parsed` were answered.
    pub parsed_done: usize,
    /// Bytes of the tail consumed (the requests they held were answered).
    pub tail_used: usize,
    /// Its transaction: the one it was in ended (DISCARD, an aborted EXEC); it is in one
    /// now (the old or a new one); that one is marked to abort; commands queued into it.
    pub multi_ended: bool,
    pub in_multi: bool,
    pub multi_flagged: bool,
    pub queued: Vec<Vec<Vec<u8>>>,
    /// UNWATCH, DISCARD or an aborted EXEC: its watched keys are forgotten.
    pub unwatch: bool,
    /// QUIT: close once its replies are written.
    pub quit: bool,
    /// A request that must wait for the script's end: nothing more is taken from it.
    pub waiting: bool,
    /// Replies the socket did not take: they go before anything else it is sent.
    pub unsent: Vec<u8>,
    /// Error replies (INFO errorstats), and the refused commands (rejected_calls).
    pub errors: Vec<String>,
    pub rejected: Vec<Vec<Vec<u8>>>,
}

impl Peer {
    /// The reply to one request, or None when it must wait for the script's end.
    fn answer(&mut self, args: &[&[u8]], running: &Running) -> Option<Vec<u8>> {
        let busy = match running.kind {
            RunKind::Eval => BUSY_EVAL,
            RunKind::Function => BUSY_FUNCTION,
        };
        let Some(spec) = commands::lookup(args[0]) else {
            return Some(self.reject(None, args, commands::unknown_command_error(args)));
        };
        if let Some(e) = crate::admin::arity_error(spec, args) {
            return Some(self.reject(Some(spec), args, e));
        }
        let in_multi = self.outcome.in_multi;
        if in_multi && spec.has("no_multi") {
            let e = "ERR Command not allowed inside a transaction".to_string();
            return Some(self.reject(Some(spec), args, e));
        }
        let sub = args.get(1).map(|s| s.to_ascii_lowercase());
        let allowed = match spec.name {
            "multi" | "discard" | "watch" | "unwatch" | "quit" | "reset" | "auth" | "hello"
            | "shutdown" => true,
            "script" => sub.as_deref() == Some(b"kill"),
            "function" => matches!(sub.as_deref(), Some(b"kill" | b"stats")),
            _ => false,
        };
        if !allowed {
            return Some(self.reject(Some(spec), args, busy.to_string()));
        }
        // Inside MULTI, what does not run at once is queued, as always.
        if in_multi && !commands::runs_inside_multi(spec) {
            let cmd = args.iter().map(|a| a.to_vec()).collect();
            self.outcome.queued.push(cmd);
            return Some(b"+QUEUED\r\n".to_vec());
        }
        let ok = || Some(b"+OK\r\n".to_vec());
        match (spec.name, sub.as_deref()) {
            ("multi", _) if in_multi => Some(self.error("ERR MULTI calls can not be nested")),
            ("multi", _) => {
                let o = &mut self.outcome;
                o.in_multi = true;
                o.multi_flagged = false;
                o.queued.clear();
                ok()
            }
            ("discard", _) if !in_multi => Some(self.error("ERR DISCARD without MULTI")),
            ("discard", _) => {
                self.end_multi();
                ok()
            }
            ("watch", _) if in_multi => Some(self.error("ERR WATCH inside MULTI is not allowed")),
            ("unwatch", _) => {
                self.outcome.unwatch = true;
                ok()
            }
            ("quit", _) => {
                self.outcome.quit = true;
                ok()
            }
            ("script", _) => Some(self.kill(RunKind::Eval, running)),
            ("function", Some(b"kill")) => Some(self.kill(RunKind::Function, running)),
            ("function", _) => Some(function_stats(running)),
            ("shutdown", _) => {
                if args[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave")) {
                    // Redis's way out of an unkillable script: end now; the script's
                    // transaction never commits (a crash, which the pool survives).
                    std::process::exit(0);
                }
                Some(self.error(busy))
            }
            // WATCH, AUTH, HELLO, RESET: after the script.
            _ => None,
        }
    }

    /// SCRIPT KILL (`kind` Eval) or FUNCTION KILL (script.c `scriptKill`).
    fn kill(&mut self, kind: RunKind, running: &Running) -> Vec<u8> {
        if running.dirty.get() {
            return self.error(UNKILLABLE);
        }
        if kind != running.kind {
            return self.error(match running.kind {
                RunKind::Eval => BUSY_EVAL,
                RunKind::Function => BUSY_FUNCTION,
            });
        }
        running.killed.set(true);
        b"+OK\r\n".to_vec()
    }

    fn end_multi(&mut self) {
        let o = &mut self.outcome;
        o.multi_ended = true;
        o.in_multi = false;
        o.multi_flagged = false;
        o.queued.clear();
        o.unwatch = true;
    }

    fn error(&mut self, msg: &str) -> Vec<u8> {
        let mut out = Vec::new();
        resp::error(&mut out, msg);
        self.outcome.errors.push(msg.to_string());
        out
    }

    /// A command refused before it runs (Redis's `rejectCommand`): it marks the transaction;
    /// a refused EXEC ends it (`execCommandAbort`).
    fn reject(&mut self, spec: Option<&'static Spec>, args: &[&[u8]], msg: String) -> Vec<u8> {
        let mut msg = msg;
        if self.outcome.in_multi {
            self.outcome.multi_flagged = true;
        }
        if spec.is_some_and(|s| s.name == "exec") {
            self.end_multi();
            let why = msg.strip_prefix("ERR ").unwrap_or(&msg);
            msg = format!("EXECABORT Transaction discarded because of: {why}");
        }
        if spec.is_some() {
            self.outcome
                .rejected
                .push(args.iter().map(|a| a.to_vec()).collect());
        }
        self.error(&msg)
    }

    /// Answer what it sent: the requests read already, then its socket.
    fn serve(&mut self, running: &Running, scratch: &mut Vec<u8>) {
        if self.outcome.waiting || self.outcome.quit {
            return;
        }
        if !self.outcome.unsent.is_empty() {
            let pending = std::mem::take(&mut self.outcome.unsent);
            self.send(pending);
            if !self.outcome.unsent.is_empty() {
                return;
            }
        }
        let mut out = Vec::new();
        while self.outcome.parsed_done < self.parsed.len() && !self.outcome.quit {
            let (_, r) = self.parsed[self.outcome.parsed_done].clone();
            let input = std::mem::take(&mut self.input);
            let args: Vec<&[u8]> = self.arg_ranges[r]
                .iter()
                .map(|a| &input[a.clone()])
                .collect();
            let reply = self.answer(&args, running);
            drop(args);
            self.input = input;
            match reply {
                Some(r) => {
                    out.extend_from_slice(&r);
                    self.outcome.parsed_done += 1;
                }
                None => {
                    self.outcome.waiting = true;
                    break;
                }
            }
        }
        if self.outcome.parsed_done == self.parsed.len()
            && !self.outcome.waiting
            && !self.outcome.quit
        {
            self.serve_unparsed(running, scratch, &mut out);
        }
        if !out.is_empty() {
            self.send(out);
        }
    }

    /// The partial request left in the input, then the socket: complete requests only.
    fn serve_unparsed(&mut self, running: &Running, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
        let tail = self.tail.start + self.outcome.tail_used..self.tail.end;
        let held = tail.len();
        scratch.clear();
        scratch.extend_from_slice(&self.input[tail]);
        let room = 64 << 10;
        scratch.resize(held + room, 0);
        // SAFETY: `scratch[held..]` is valid for `room` bytes; recv writes at most that many.
        // `fd` is a socket the event loop owns and keeps open while the script runs (the loop
        // is inside the script's command).
        let n = unsafe {
            libc::recv(
                self.fd,
                scratch[held..].as_mut_ptr().cast(),
                room,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        scratch.truncate(held + n.max(0) as usize);
        let mut pos = 0;
        let mut args = Vec::new();
        while pos < scratch.len() {
            match resp::parse(&mut scratch[pos..], &mut args, &self.limits) {
                Parsed::Incomplete => break,
                // The event loop answers it and closes the connection, after the script.
                Parsed::Error(_) => {
                    self.outcome.waiting = true;
                    break;
                }
                Parsed::Request { consumed } => {
                    if !args.is_empty() {
                        let argv: Vec<&[u8]> = args
                            .iter()
                            .map(|r| &scratch[pos + r.start..pos + r.end])
                            .collect();
                        let Some(reply) = self.answer(&argv, running) else {
                            self.outcome.waiting = true;
                            break;
                        };
                        out.extend_from_slice(&reply);
                    }
                    pos += consumed;
                    if self.outcome.quit {
                        break;
                    }
                }
            }
        }
        let from_tail = pos.min(held);
        self.outcome.tail_used += from_tail;
        let from_socket = pos - from_tail;
        if from_socket > 0 {
            // SAFETY: as above; `from_socket` <= the bytes just peeked, which are still
            // queued (nothing else reads this socket meanwhile).
            unsafe {
                libc::recv(
                    self.fd,
                    scratch.as_mut_ptr().cast(),
                    from_socket,
                    libc::MSG_DONTWAIT,
                );
            }
        }
    }

    /// Send `bytes`; what the socket does not take waits in `unsent`.
    fn send(&mut self, bytes: Vec<u8>) {
        // SAFETY: `bytes` is valid for `bytes.len()` bytes; send only reads them.
        let n = unsafe {
            libc::send(
                self.fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        let sent = n.max(0) as usize;
        if sent < bytes.len() {
            self.outcome.unsent.extend_from_slice(&bytes[sent..]);
        }
    }
}

/// FUNCTION STATS while a script runs (RESP2: the caller of a busy server gets RESP2 here).
fn function_stats(running: &Running) -> Vec<u8> {
    let mut o = Vec::new();
    let bulk = |o: &mut Vec<u8>, b: &[u8]| crate::resp::bulk(o, b);
    crate::resp::array(&mut o, 4);
    bulk(&mut o, b"running_script");
    crate::resp::array(&mut o, 6);
    bulk(&mut o, b"name");
    bulk(&mut o, running.name.as_bytes());
    bulk(&mut o, b"command");
    crate::resp::array(&mut o, running.command.len());
    for a in &running.command {
        bulk(&mut o, a);
    }
    bulk(&mut o, b"duration_ms");
    crate::resp::int(&mut o, running.started.elapsed().as_millis() as i64);
    bulk(&mut o, b"engines");
    crate::resp::array(&mut o, 2);
    bulk(&mut o, b"LUA");
    crate::resp::array(&mut o, 4);
    bulk(&mut o, b"libraries_count");
    crate::resp::int(&mut o, running.libraries.0 as i64);
    bulk(&mut o, b"functions_count");
    crate::resp::int(&mut o, running.libraries.1 as i64);
    o
}

/// Answer what the other connections sent (see the module's comment).
pub fn serve_peers(shared: &Shared, running: &Running) {
    let mut peers = shared.borrow_mut();
    let Peers {
        list,
        scratch,
        restart,
        stop,
    } = &mut *peers;
    if *restart {
        running.restart.set(true);
        return;
    }
    if stop
        .as_ref()
        .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
    {
        if running.dirty.get() {
            crate::log::warning(
                "Received SIGTERM or SIGINT while a script that wrote runs: exiting now; the script's writes are not kept",
            );
            std::process::exit(0);
        }
        running.killed.set(true);
        return;
    }
    for p in list.iter_mut() {
        p.serve(running, scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::time::Instant;

    fn running(kind: RunKind, dirty: bool) -> Running {
        Running {
            kind,
            started: Instant::now(),
            killed: Cell::new(false),
            restart: Cell::new(false),
            dirty: Cell::new(dirty),
            resp: Cell::new(2),
            name: "x".into(),
            command: vec![],
            libraries: (0, 0),
        }
    }

    fn peer(in_multi: bool) -> Peer {
        Peer {
            conn: 1,
            fd: -1,
            input: Vec::new(),
            limits: Limits {
                max_bulk_len: 512 << 20,
                max_multibulk_len: 1 << 20,
                max_inline_len: 64 << 10,
                unauthenticated: false,
            },
            parsed: Vec::new(),
            arg_ranges: Vec::new(),
            tail: 0..0,
            outcome: Outcome {
                in_multi,
                ..Default::default()
            },
        }
    }

    fn text(r: Option<Vec<u8>>) -> String {
        String::from_utf8(r.expect("answered")).unwrap()
    }

    #[test]
    fn busy_commands_in_and_out_of_multi() {
        let r = running(RunKind::Eval, false);
        let mut p = peer(false);
        assert!(text(p.answer(&[b"ping"], &r))
            .starts_with("-BUSY Redis is busy running a script. You can only call SCRIPT KILL"));
        assert!(text(p.answer(&[b"nosuch"], &r)).starts_with("-ERR unknown command 'nosuch'"));
        assert!(
            text(p.answer(&[b"get"], &r)).starts_with("-ERR wrong number of arguments for 'get'")
        );
        assert_eq!(text(p.answer(&[b"multi"], &r)), "+OK\r\n");
        assert!(text(p.answer(&[b"incr", b"x"], &r)).starts_with("-BUSY"));
        assert!(p.outcome.multi_flagged && p.outcome.in_multi);
        assert_eq!(
            text(p.answer(&[b"multi"], &r)),
            "-ERR MULTI calls can not be nested\r\n"
        );
        assert_eq!(text(p.answer(&[b"exec"], &r)), "-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n");
        assert!(!p.outcome.in_multi && p.outcome.multi_ended && p.outcome.unwatch);
        assert_eq!(
            text(p.answer(&[b"discard"], &r)),
            "-ERR DISCARD without MULTI\r\n"
        );
        // WATCH needs the keyspace: it waits.
        assert!(p.answer(&[b"watch", b"k"], &r).is_none());
        assert_eq!(p.outcome.rejected.len(), 4);
    }

    #[test]
    fn allowed_commands_inside_multi_are_queued() {
        let r = running(RunKind::Eval, false);
        let mut p = peer(true);
        assert_eq!(text(p.answer(&[b"script", b"kill"], &r)), "+QUEUED\r\n");
        assert!(!r.killed.get());
        assert_eq!(p.outcome.queued.len(), 1);
        assert_eq!(text(p.answer(&[b"discard"], &r)), "+OK\r\n");
        assert!(p.outcome.queued.is_empty() && p.outcome.multi_ended);
    }

    #[test]
    fn kill_checks_writes_then_kind() {
        let mut p = peer(false);
        let dirty = running(RunKind::Function, true);
        assert!(text(p.answer(&[b"script", b"kill"], &dirty)).starts_with("-UNKILLABLE"));
        let f = running(RunKind::Function, false);
        assert!(text(p.answer(&[b"script", b"kill"], &f))
            .starts_with("-BUSY Redis is busy running a script. You can only call FUNCTION KILL"));
        assert!(!f.killed.get());
        assert_eq!(text(p.answer(&[b"function", b"kill"], &f)), "+OK\r\n");
        assert!(f.killed.get());
        let e = running(RunKind::Eval, false);
        assert_eq!(text(p.answer(&[b"SCRIPT", b"KILL"], &e)), "+OK\r\n");
        assert!(e.killed.get());
    }
}
