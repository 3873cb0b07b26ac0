//! SLOWLOG (slowlog.c) and LATENCY (latency.c): what they keep and their commands.
//!
//! Both take their times from the command timing that is there anyway (`commands::call`:
//! one call in 8 of each command is timed, every call while `slowlog-log-slower-than` is 0
//! or `latency-monitor-threshold` is set), so they cost the command path nothing more.

use super::{help, meta, subcommand_error, Histogram};
use crate::commands::{lossy, parse_i64, upper, Client, Ctx, ServerState, Spec, COMMANDS};
use crate::resp;
use std::collections::VecDeque;

/// Arguments and argument bytes a slow log entry keeps (Redis's SLOWLOG_ENTRY_MAX_ARGC and
/// SLOWLOG_ENTRY_MAX_STRING).
const MAX_ARGC: usize = 32;
const MAX_STRING: usize = 128;
/// Samples kept per latency event (Redis's LATENCY_TS_LEN).
const EVENT_SAMPLES: usize = 160;

/// One slow log entry.
#[derive(Clone, Debug)]
pub struct SlowEntry {
    pub id: u64,
    pub time: i64,
    pub usec: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: Vec<u8>,
}

/// A latency event's samples (one per second at most, the largest) and its all-time max.
#[derive(Clone, Debug, Default)]
pub struct Event {
    pub samples: VecDeque<(i64, u64)>,
    pub max: u64,
}

/// What SLOWLOG and LATENCY keep.
#[derive(Debug, Default)]
pub struct Monitoring {
    pub slowlog: VecDeque<SlowEntry>,
    pub next_id: u64,
    pub events: Vec<(&'static str, Event)>,
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Add a latency sample of `ms` to `event` when the monitor is on and it reaches the
/// threshold (latency.c's `latencyAddSampleIfNeeded`).
pub fn latency_sample(sv: &mut ServerState, event: &'static str, ms: u64) {
    let t = sv.config.latency_threshold_ms;
    if t == 0 || ms < t {
        return;
    }
    let now = now_secs();
    let events = &mut sv.admin.monitoring.events;
    let i = match events.iter().position(|(n, _)| *n == event) {
        Some(i) => i,
        None => {
            events.push((event, Event::default()));
            events.len() - 1
        }
    };
    let e = &mut events[i].1;
    e.max = e.max.max(ms);
    match e.samples.back_mut() {
        Some(last) if last.0 == now => last.1 = last.1.max(ms),
        _ => {
            e.samples.push_back((now, ms));
            if e.samples.len() > EVENT_SAMPLES {
                e.samples.pop_front();
            }
        }
    }
}

/// Arguments as the slow log keeps them: trimmed, and secrets redacted (Redis's
/// `redactClientCommandArgument` for AUTH, HELLO's AUTH and CONFIG SET of a sensitive
/// parameter).
fn kept_args(args: &[&[u8]]) -> Vec<Vec<u8>> {
    let redacted = |j: usize| -> bool {
        let name = args[0];
        if name.eq_ignore_ascii_case(b"auth") {
            return j >= 1;
        }
        if name.eq_ignore_ascii_case(b"hello") {
            return (2..args.len())
                .any(|k| args[k].eq_ignore_ascii_case(b"auth") && (j == k + 1 || j == k + 2));
        }
        if name.eq_ignore_ascii_case(b"config")
            && args.len() > 1
            && args[1].eq_ignore_ascii_case(b"set")
            && j >= 3
            && j % 2 == 1
        {
            let p = String::from_utf8_lossy(args[j - 1]).to_ascii_lowercase();
            return matches!(p.as_str(), "requirepass" | "masterauth" | "masteruser");
        }
        false
    };
    let n = args.len().min(MAX_ARGC);
    let mut out = Vec::with_capacity(n);
    for (j, a) in args.iter().enumerate().take(n) {
        if j == MAX_ARGC - 1 && args.len() > MAX_ARGC {
            out.push(format!("... ({} more arguments)", args.len() - j).into_bytes());
            break;
        }
        if redacted(j) {
            out.push(b"(redacted)".to_vec());
        } else if a.len() > MAX_STRING {
            let mut v = a[..MAX_STRING].to_vec();
            v.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes());
            out.push(v);
        } else {
            out.push(a.to_vec());
        }
    }
    out
}

/// A timed call: into the slow log when slower than `slowlog-log-slower-than`, and a
/// latency sample ("command", or "fast-command" for a fast one).
pub fn record(sv: &mut ServerState, cl: &Client, spec: &'static Spec, args: &[&[u8]], usec: u64) {
    let limit = sv.config.slowlog_slower_than;
    let slow = limit >= 0 && usec >= limit as u64 && sv.config.slowlog_max_len > 0;
    // (Redis's command table is looked up only for a call that is slow.)
    if slow
        && !spec.has("skip_slowlog")
        && !meta::lookup_argv(args).is_some_and(|m| m.has("skip_slowlog"))
    {
        let m = &mut sv.admin.monitoring;
        m.slowlog.push_front(SlowEntry {
            id: m.next_id,
            time: now_secs(),
            usec,
            args: kept_args(args),
            addr: cl.addr.clone(),
            name: cl.name.clone(),
        });
        m.next_id += 1;
        m.slowlog.truncate(sv.config.slowlog_max_len);
    }
    let event = if spec.has("fast") {
        "fast-command"
    } else {
        "command"
    };
    latency_sample(sv, event, usec / 1000);
}

pub fn slowlog(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match (&upper(a[1])[..], a.len()) {
        (b"RESET", 2) => {
            c.sv.admin.monitoring.slowlog.clear();
            resp::ok(c.out);
        }
        (b"LEN", 2) => resp::int(c.out, c.sv.admin.monitoring.slowlog.len() as i64),
        (b"GET", 2 | 3) => {
            let mut count = 10;
            if a.len() == 3 {
                match parse_i64(a[2]) {
                    None => return c.err(crate::commands::E_INT),
                    Some(n) if n < -1 => {
                        return c.err("ERR count should be greater than or equal to -1")
                    }
                    Some(-1) => count = usize::MAX,
                    Some(n) => count = n as usize,
                }
            }
            let log = &c.sv.admin.monitoring.slowlog;
            let n = log.len().min(count);
            resp::array(c.out, n);
            for e in log.iter().take(n) {
                resp::array(c.out, 6);
                resp::int(c.out, e.id as i64);
                resp::int(c.out, e.time);
                resp::int(c.out, e.usec as i64);
                resp::array(c.out, e.args.len());
                for arg in &e.args {
                    resp::bulk(c.out, arg);
                }
                resp::bulk(c.out, e.addr.as_bytes());
                resp::bulk(c.out, &e.name);
            }
        }
        (b"HELP", 2) => help(
            c,
            a[0],
            &[
                "GET [<count>]",
                "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                "    Entries are made of:",
                "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                "    client name",
                "LEN",
                "    Return the length of the slowlog.",
                "RESET",
                "    Reset the slowlog.",
            ],
        ),
        _ => return subcommand_error(c, a),
    }
    Ok(())
}

/// The commands LATENCY HISTOGRAM reports: (full name, stat slot) of those named (a
/// container names its subcommands), or of all, that were called.
fn histogram_slots(c: &mut Ctx, names: &[&[u8]]) -> Vec<(String, usize)> {
    let all = meta::all();
    let mut out: Vec<(String, usize)> = Vec::new();
    let mut add = |name: &str, slot: usize| {
        if !out.iter().any(|(n, _)| n == name) {
            out.push((name.to_string(), slot));
        }
    };
    let slot_of = |name: &str| -> Option<usize> {
        if let Some(i) = COMMANDS.iter().position(|s| s.name == name) {
            return Some(i);
        }
        all.iter()
            .position(|m| m.name == name && name.contains('|'))
            .map(|i| COMMANDS.len() + i)
    };
    let candidates: Vec<String> = if names.is_empty() {
        COMMANDS
            .iter()
            .map(|s| s.name.to_string())
            .chain(
                all.iter()
                    .filter(|m| m.name.contains('|'))
                    .map(|m| m.name.clone()),
            )
            .collect()
    } else {
        let mut v = Vec::new();
        for n in names {
            let n = String::from_utf8_lossy(n).to_ascii_lowercase();
            let subs: Vec<String> = all
                .iter()
                .filter(|m| m.name.starts_with(&format!("{n}|")))
                .map(|m| m.name.clone())
                .collect();
            if subs.is_empty() {
                v.push(n);
            } else {
                v.extend(subs);
            }
        }
        v
    };
    for name in candidates {
        let Some(slot) = slot_of(&name) else { continue };
        let calls = if slot < COMMANDS.len() {
            c.sv.cmdstats[slot].calls
        } else {
            c.sv.admin
                .sub_stats
                .get(slot - COMMANDS.len())
                .map_or(0, |s| s.calls)
        };
        if calls > 0 {
            add(&name, slot);
        }
    }
    out
}

/// One command's LATENCY HISTOGRAM entry: its calls, and per power-of-two microseconds the
/// calls that took at most that long (from the timed calls, scaled to all calls).
fn histogram_entry(c: &mut Ctx, slot: usize) {
    let calls = if slot < COMMANDS.len() {
        c.sv.cmdstats[slot].calls
    } else {
        c.sv.admin.sub_stats[slot - COMMANDS.len()].calls
    };
    let mut buckets: Vec<(u64, u64)> = Vec::new();
    match c.sv.admin.latency.get(slot).and_then(|h| h.as_deref()) {
        Some(h) if h.total() > 0 => {
            let total = h.total();
            let mut prev = 0;
            for k in 0..40 {
                let ns = 1024u64 << k;
                let cum = h.count_le(ns);
                let scaled = if cum == total {
                    calls
                } else {
                    (cum as u128 * calls as u128 / total as u128) as u64
                };
                if scaled > prev {
                    buckets.push((ns / 1000, scaled));
                    prev = scaled;
                }
                if cum == total {
                    break;
                }
            }
        }
        _ => buckets.push((1, calls)),
    }
    c.map(2);
    resp::bulk(c.out, b"calls");
    resp::int(c.out, calls as i64);
    resp::bulk(c.out, b"histogram_usec");
    c.map(buckets.len());
    for (us, n) in buckets {
        resp::int(c.out, us as i64);
        resp::int(c.out, n as i64);
    }
}

/// LATENCY GRAPH's picture of an event's samples (latency.c's `latencyCommandGenSparkeline`,
/// in plain characters): one column per sample, its height the latency.
fn graph(name: &str, e: &Event, now: i64) -> String {
    let (lo, hi) = e
        .samples
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), s| (lo.min(s.1), hi.max(s.1)));
    let mut out = format!(
        "{name} - high {hi} ms, low {lo} ms (all time high {} ms)\n",
        e.max
    );
    out.push_str(&"-".repeat(80));
    out.push('\n');
    const ROWS: u64 = 4;
    for row in (0..ROWS).rev() {
        for s in &e.samples {
            let level = if hi == lo {
                ROWS
            } else {
                1 + (s.1 - lo) * (ROWS - 1) / (hi - lo)
            };
            out.push(if level > row { '#' } else { ' ' });
        }
        out.push('\n');
    }
    out.push('\n');
    for s in &e.samples {
        let age = (now - s.0).max(0);
        let label = if age < 60 {
            format!("{age}s")
        } else if age < 3600 {
            format!("{}m", age / 60)
        } else {
            format!("{}h", age / 3600)
        };
        out.push(label.chars().next().unwrap_or(' '));
    }
    out.push('\n');
    out
}

/// LATENCY DOCTOR's report.
fn doctor(m: &Monitoring, threshold: u64) -> String {
    if m.events.is_empty() {
        return "Dave, no latency spike was observed during the lifetime of this Redis instance, \
                not in the slightest bit. I honestly think you ought to sleep better and stop \
                worrying about things like that.\n"
            .into();
    }
    let mut out = String::from(
        "Dave, I have observed latency spikes in this Redis instance. You don't mind talking \
         about it, do you Dave?\n\n",
    );
    for (i, (name, e)) in m.events.iter().enumerate() {
        let avg = e.samples.iter().map(|s| s.1).sum::<u64>() / e.samples.len().max(1) as u64;
        out.push_str(&format!(
            "{}. {name}: {} latency spikes (average {avg}ms, mean deviation 0ms, period 0 sec). \
             Worst all time event {}ms.\n",
            i + 1,
            e.samples.len(),
            e.max
        ));
    }
    out.push_str(&format!(
        "\nI have a few advices for you:\n\n- The latency monitor threshold is {threshold} \
         milliseconds. Check the slow log (SLOWLOG GET) for the commands behind the spikes, \
         and keep O(N) commands on large values off the hot path.\n"
    ));
    out
}

pub fn latency(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    match (&upper(a[1])[..], a.len()) {
        (b"LATEST", 2) => {
            let ev = c.sv.admin.monitoring.events.clone();
            let ev: Vec<_> = ev.iter().filter(|(_, e)| !e.samples.is_empty()).collect();
            resp::array(c.out, ev.len());
            for (name, e) in ev {
                let last = e.samples.back().copied().unwrap_or((0, 0));
                resp::array(c.out, 4);
                resp::bulk(c.out, name.as_bytes());
                resp::int(c.out, last.0);
                resp::int(c.out, last.1 as i64);
                resp::int(c.out, e.max as i64);
            }
        }
        (b"HISTORY", 3) => {
            let name = String::from_utf8_lossy(a[2]).into_owned();
            let samples: Vec<(i64, u64)> = c
                .sv
                .admin
                .monitoring
                .events
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, e)| e.samples.iter().copied().collect())
                .unwrap_or_default();
            resp::array(c.out, samples.len());
            for (t, ms) in samples {
                resp::array(c.out, 2);
                resp::int(c.out, t);
                resp::int(c.out, ms as i64);
            }
        }
        (b"RESET", _) => {
            let events = &mut c.sv.admin.monitoring.events;
            let before = events.len();
            if a.len() == 2 {
                events.clear();
            } else {
                events.retain(|(n, _)| !a[2..].iter().any(|x| x == &n.as_bytes()));
            }
            resp::int(c.out, (before - events.len()) as i64);
        }
        (b"GRAPH", 3) => {
            let name = String::from_utf8_lossy(a[2]).into_owned();
            let found = c
                .sv
                .admin
                .monitoring
                .events
                .iter()
                .find(|(n, e)| *n == name && !e.samples.is_empty())
                .map(|(n, e)| graph(n, e, now_secs()));
            match found {
                Some(g) => resp::verbatim(c.out, g.as_bytes(), c.cl.resp3),
                None => {
                    return c.err(&format!(
                        "ERR No samples available for event '{}'",
                        lossy(a[2])
                    ))
                }
            }
        }
        (b"DOCTOR", 2) => {
            let t = doctor(&c.sv.admin.monitoring, c.sv.config.latency_threshold_ms);
            resp::verbatim(c.out, t.as_bytes(), c.cl.resp3);
        }
        (b"HISTOGRAM", _) => {
            let slots = histogram_slots(c, &a[2..]);
            c.map(slots.len());
            for (name, slot) in slots {
                resp::bulk(c.out, name.as_bytes());
                histogram_entry(c, slot);
            }
        }
        (b"HELP", 2) => help(
            c,
            a[0],
            &[
                "DOCTOR",
                "    Return a human readable latency analysis report.",
                "GRAPH <event>",
                "    Return an ASCII latency graph for the <event> class.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "    (default: reset all data for all event classes)",
                "HISTOGRAM [COMMAND ...]",
                "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
                "    If no commands are specified then all histograms are replied.",
            ],
        ),
        _ => return subcommand_error(c, a),
    }
    Ok(())
}

impl Histogram {
    /// Samples recorded.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Samples of at most `ns` nanoseconds (whole buckets).
    pub fn count_le(&self, ns: u64) -> u64 {
        let last = Self::bucket(ns);
        self.counts[..=last.min(self.counts.len() - 1)].iter().sum()
    }
}
