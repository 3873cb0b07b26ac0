//! A script that runs past `busy-reply-threshold` (`lua-time-limit`): from then on, while
//! it runs, the other connections are answered from inside the script (Redis's
//! `processEventsWhileBlocked`): `-BUSY` to every command but SCRIPT KILL / FUNCTION KILL
//! (which stop a script that has not written, at its next instruction count check) and
//! SHUTDOWN NOSAVE (which ends the process at once: the script's transaction never commits,
//! as after a crash).
//!
//! Only complete requests are taken from a socket (peeked first, then consumed); a partial
//! one stays in the socket for the event loop. The event loop is inside the script's command
//! meanwhile, so nothing else reads these sockets.
#![expect(
    unsafe_code,
    reason = "recv/send on the event loop's sockets by descriptor (libc)"
)]

use super::lua::{RunKind, Running};
use std::os::fd::RawFd;

const BUSY_EVAL: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_FUNCTION: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
const UNKILLABLE: &[u8] = b"-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n";

/// Complete requests at the start of `b` and the bytes they take.
fn requests(b: &[u8]) -> (Vec<Vec<Vec<u8>>>, usize) {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(eol) = b[i..].iter().position(|&c| c == b'\n').map(|p| i + p) {
        if b[i] == b'*' {
            let Ok(n) = std::str::from_utf8(&b[i + 1..eol])
                .map(|s| s.trim_end_matches('\r'))
                .unwrap_or("x")
                .parse::<usize>()
            else {
                break;
            };
            let mut j = eol + 1;
            let mut args = Vec::with_capacity(n.min(64));
            let mut complete = true;
            for _ in 0..n {
                let Some(e) = b[j..].iter().position(|&c| c == b'\n').map(|p| j + p) else {
                    complete = false;
                    break;
                };
                let len: usize = std::str::from_utf8(&b[j + 1..e])
                    .map(|s| s.trim_end_matches('\r'))
                    .unwrap_or("x")
                    .parse()
                    .unwrap_or(usize::MAX / 2);
                if e + 1 + len + 2 > b.len() {
                    complete = false;
                    break;
                }
                args.push(b[e + 1..e + 1 + len].to_vec());
                j = e + 1 + len + 2;
            }
            if !complete {
                break;
            }
            out.push(args);
            i = j;
        } else {
            let line = &b[i..eol];
            let args: Vec<Vec<u8>> = line
                .split(|c| c.is_ascii_whitespace())
                .filter(|w| !w.is_empty())
                .map(|w| w.to_vec())
                .collect();
            if !args.is_empty() {
                out.push(args);
            }
            i = eol + 1;
        }
        if i >= b.len() {
            break;
        }
    }
    (out, i)
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

/// The reply to one request while a script is busy.
fn answer(req: &[Vec<u8>], running: &Running) -> Vec<u8> {
    if req[0].eq_ignore_ascii_case(b"function")
        && req.len() == 2
        && req[1].eq_ignore_ascii_case(b"stats")
    {
        return function_stats(running);
    }
    answer_static(req, running).to_vec()
}

fn answer_static(req: &[Vec<u8>], running: &Running) -> &'static [u8] {
    let busy = match running.kind {
        RunKind::Eval => BUSY_EVAL,
        RunKind::Function => BUSY_FUNCTION,
    };
    let name = req[0].to_ascii_lowercase();
    let sub = req.get(1).map(|s| s.to_ascii_lowercase());
    let kill_for = match (&name[..], sub.as_deref()) {
        (b"script", Some(b"kill")) if req.len() == 2 => Some(RunKind::Eval),
        (b"function", Some(b"kill")) if req.len() == 2 => Some(RunKind::Function),
        (b"shutdown", Some(b"nosave")) => {
            // Redis's way out of an unkillable script: end now; the script's transaction
            // never commits (a crash, which the pool survives).
            std::process::exit(0);
        }
        _ => None,
    };
    match kill_for {
        None => busy,
        Some(k) if k != running.kind => busy,
        Some(_) if running.dirty.get() => UNKILLABLE,
        Some(_) => {
            running.killed.set(true);
            b"+OK\r\n"
        }
    }
}

/// Answer what the other connections sent (see the module's comment).
pub fn serve_peers(peers: &[RawFd], running: &Running) {
    let mut buf = vec![0u8; 64 << 10];
    for &fd in peers {
        // SAFETY: `buf` is valid for `buf.len()` bytes; recv writes at most that many. `fd` is
        // a socket the event loop owns and keeps open while the script runs (the loop is
        // inside the script's command).
        let n = unsafe {
            libc::recv(
                fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n <= 0 {
            continue;
        }
        let (reqs, used) = requests(&buf[..n as usize]);
        if used == 0 {
            continue;
        }
        // SAFETY: as above; `used` <= the bytes just peeked, which are still queued.
        unsafe {
            libc::recv(fd, buf.as_mut_ptr().cast(), used, libc::MSG_DONTWAIT);
        }
        let mut reply = Vec::new();
        for r in &reqs {
            reply.extend_from_slice(&answer(r, running));
        }
        // SAFETY: `reply` is valid for `reply.len()` bytes; send only reads them.
        unsafe {
            libc::send(
                fd,
                reply.as_ptr().cast(),
                reply.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            );
        }
    }
}
