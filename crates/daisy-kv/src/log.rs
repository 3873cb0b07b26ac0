//! The server's log, as Redis writes it (server.c's `serverLogRaw`):
//!
//! ```text
//! 12345:M 25 Nov 2026 17:01:02.123 * message
//! ```
//!
//! pid, role (`M`: a master, the only role here), the time (UTC), a mark for the level
//! (`.` debug, `-` verbose, `*` notice, `#` warning) and the message. Lines below `loglevel`
//! are dropped. `logfile` empty: standard error (Redis writes to standard output; Daisy keeps
//! standard error, where `daisy serve` always logged, so that a client reading the replies on
//! standard output is never mixed with the log); otherwise the file, appended to and opened
//! for each line as Redis does (so a rotated log file is simply recreated).

use std::cell::{Cell, RefCell};
use std::io::Write as _;

/// Log levels, Redis's names and order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 0,
    Verbose = 1,
    Notice = 2,
    Warning = 3,
}

impl Level {
    /// `loglevel`'s value (debug, verbose, notice, warning).
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s.to_ascii_lowercase().as_str() {
            "debug" => Level::Debug,
            "verbose" => Level::Verbose,
            "notice" => Level::Notice,
            "warning" => Level::Warning,
            _ => return None,
        })
    }

    fn mark(self) -> char {
        ['.', '-', '*', '#'][self as usize]
    }
}

// The settings are the server thread's own (the event loop logs from its one thread), so
// servers started on several threads of one process (the tests) each keep theirs.
thread_local! {
    static LEVEL: Cell<u8> = const { Cell::new(Level::Notice as u8) };
    /// The log file (`None`: standard error).
    static FILE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Set the level below which lines are dropped (`loglevel`, CONFIG SET loglevel).
pub fn set_level(l: Level) {
    LEVEL.with(|c| c.set(l as u8));
}

/// Log to `path` (empty: standard error).
pub fn set_file(path: &str) {
    FILE.with(|f| *f.borrow_mut() = (!path.is_empty()).then(|| path.to_string()));
}

/// Whether a line at `l` would be written.
pub fn enabled(l: Level) -> bool {
    l as u8 >= LEVEL.with(|c| c.get())
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31) (the civil calendar).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A time (ms since the epoch) as Redis's log prints it: `25 Nov 2026 17:01:02.123`.
pub fn timestamp(ms: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = ms.div_euclid(1000);
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{d} {} {y} {:02}:{:02}:{:02}.{:03}",
        MONTHS[(m - 1) as usize],
        s / 3600,
        s % 3600 / 60,
        s % 60,
        ms.rem_euclid(1000)
    )
}

/// One log line (`pid:M time mark message`), without its newline.
pub fn line(l: Level, msg: &str) -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    format!(
        "{}:M {} {} {msg}",
        std::process::id(),
        timestamp(ms),
        l.mark()
    )
}

/// Write `msg` at level `l`.
pub fn log(l: Level, msg: &str) {
    if !enabled(l) {
        return;
    }
    let text = line(l, msg);
    let file = FILE.with(|f| f.borrow().clone());
    let written = file.as_ref().is_some_and(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| writeln!(f, "{text}"))
            .is_ok()
    });
    if !written {
        eprintln!("{text}");
    }
}

pub fn debug(msg: &str) {
    log(Level::Debug, msg)
}
pub fn verbose(msg: &str) {
    log(Level::Verbose, msg)
}
pub fn notice(msg: &str) {
    log(Level::Notice, msg)
}
pub fn warning(msg: &str) {
    log(Level::Warning, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_as_redis_prints_them() {
        assert_eq!(timestamp(0), "1 Jan 1970 00:00:00.000");
        // 2026-11-25 17:01:02.123 UTC
        assert_eq!(timestamp(1_795_626_062_123), "25 Nov 2026 17:01:02.123");
        assert_eq!(timestamp(951_782_400_000), "29 Feb 2000 00:00:00.000");
    }

    #[test]
    fn lines_have_pid_role_time_and_mark() {
        let l = line(Level::Warning, "hello");
        let pid = std::process::id().to_string();
        assert!(l.starts_with(&format!("{pid}:M ")), "{l}");
        assert!(l.ends_with(" # hello"), "{l}");
        assert_eq!(Level::parse("VERBOSE"), Some(Level::Verbose));
        assert_eq!(Level::parse("loud"), None);
    }
}
