//! The verdicts: each figure against the seed's requirement (or the issue's target), with the
//! figures that decide it and how sure the run is of them.
//!
//! A verdict holds one or more [`Check`]s, each a ratio against a target. The rule for a
//! check (README, "Reading the report"):
//! - with paired rounds (the Redis benchmark: in each round the servers run the case back to
//!   back), the ratio is the median of the rounds' ratios and its interval the
//!   distribution-free interval of that median ([`crate::stats::median_interval`], at least
//!   90% confidence, or the whole range of the rounds when there are too few of them);
//! - with unpaired runs (transactions, hash map), the interval is the range of the ratio over
//!   the runs: the rival's fastest over Daisy's slowest to the rival's slowest over Daisy's
//!   fastest;
//! - PASS when the whole interval meets the target, FAIL when none of it does, TIE when the
//!   target lies inside it (the run cannot tell); with a single run, the ratio alone decides.
//!
//! A verdict is FAIL when any check is, else TIE when any check is, else PASS.

use super::{join_fixed, Environment, Outcome, P1_TARGET_ROUNDS};
use crate::kvbench;
use crate::table::grouped;
use crate::{crashtest, hashbench, txbench};
use std::path::PathBuf;

/// What a verdict says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Status {
    Pass,
    /// The target lies within the interval of the measured ratio: the run cannot tell.
    Tie,
    Fail,
    /// The part did not run (a rival or tool missing); not a failure of the product.
    NotRun,
}

impl Status {
    /// The word the report prints: PASS, TIE, FAIL, NOT RUN.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Tie => "TIE",
            Status::Fail => "FAIL",
            Status::NotRun => "NOT RUN",
        }
    }
}

/// Which way a ratio must go.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Target {
    AtLeast(f64),
    AtMost(f64),
}

impl Target {
    fn met(self, x: f64) -> bool {
        match self {
            Target::AtLeast(t) => x >= t,
            Target::AtMost(t) => x <= t,
        }
    }

    /// How far `x` is on the right side of the target (above 1 is met), to find the closest
    /// check of a verdict.
    fn margin(self, x: f64) -> f64 {
        match self {
            Target::AtLeast(t) => x / t,
            Target::AtMost(t) => t / x,
        }
    }

    /// "at least 1.05x", "at most 1.5x".
    pub fn text(self) -> String {
        match self {
            Target::AtLeast(t) => format!("at least {t:.2}x"),
            Target::AtMost(t) => format!("at most {t:.2}x"),
        }
    }

    /// "≥ 1.05x", "≤ 1.50x", for the scoreboard.
    pub fn short(self) -> String {
        match self {
            Target::AtLeast(t) => format!("≥ {t:.2}x"),
            Target::AtMost(t) => format!("≤ {t:.2}x"),
        }
    }
}

/// Where the true ratio lies, from this run's rounds or runs.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
    /// The confidence of a median's interval over paired rounds; None for the range over
    /// unpaired runs.
    pub coverage: Option<f64>,
}

/// One ratio against its target.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Check {
    /// What is compared: "SET P1 vs redis-none".
    pub label: String,
    pub ratio: f64,
    pub target: Target,
    /// The paired rounds' ratios (empty without paired rounds).
    pub rounds: Vec<f64>,
    pub interval: Option<Interval>,
    pub status: Status,
}

impl Check {
    fn judged(
        label: String,
        target: Target,
        ratio: f64,
        rounds: Vec<f64>,
        interval: Option<Interval>,
    ) -> Check {
        let status = match interval {
            Some(i) if i.low < i.high => match (target.met(i.low), target.met(i.high)) {
                (true, true) => Status::Pass,
                (false, false) => Status::Fail,
                _ => Status::Tie,
            },
            _ if target.met(ratio) => Status::Pass,
            _ => Status::Fail,
        };
        Check {
            label,
            ratio,
            target,
            rounds,
            interval,
            status,
        }
    }

    /// A ratio from paired rounds: their median, with the median's interval; `fallback` when
    /// no rounds pair (no runs kept).
    pub fn paired(
        label: impl Into<String>,
        target: Target,
        rounds: Vec<f64>,
        fallback: f64,
    ) -> Check {
        let ratio = if rounds.is_empty() {
            fallback
        } else {
            crate::stats::median(&rounds)
        };
        let interval = (rounds.len() > 1)
            .then(|| crate::stats::median_interval(&rounds, 0.9))
            .flatten()
            .map(|(low, high, c)| Interval {
                low,
                high,
                coverage: Some(c),
            });
        Check::judged(label.into(), target, ratio, rounds, interval)
    }

    /// A ratio of medians over unpaired runs, with its range over the runs (`low`..`high`).
    pub fn runs(
        label: impl Into<String>,
        target: Target,
        ratio: f64,
        low: f64,
        high: f64,
    ) -> Check {
        let interval = (low.is_finite() && high.is_finite() && low < high).then_some(Interval {
            low,
            high,
            coverage: None,
        });
        Check::judged(label.into(), target, ratio, vec![], interval)
    }

    /// A single figure, no spread known.
    pub fn single(label: impl Into<String>, target: Target, ratio: f64) -> Check {
        Check::judged(label.into(), target, ratio, vec![], None)
    }

    /// How sure the run is: "faster in 8 of 15 rounds, 0.97-1.06x (96%)", "runs 0.9-1.2x";
    /// empty for a single figure.
    pub fn confidence(&self) -> String {
        let mut parts = vec![];
        if self.rounds.len() > 1 {
            let won = self.rounds.iter().filter(|&&x| self.target.met(x)).count();
            parts.push(match self.target {
                Target::AtLeast(1.0) => {
                    format!("faster in {won} of {} rounds", self.rounds.len())
                }
                t => format!("{} in {won} of {} rounds", t.short(), self.rounds.len()),
            });
        }
        match self.interval {
            Some(Interval {
                low,
                high,
                coverage: Some(c),
            }) => parts.push(format!(
                "median within {}-{}x ({:.0}%)",
                verdict_ratio(low),
                verdict_ratio(high),
                c * 100.0
            )),
            Some(Interval { low, high, .. }) => parts.push(format!(
                "runs {}-{}x",
                verdict_ratio(low),
                verdict_ratio(high)
            )),
            None => {}
        }
        parts.join(", ")
    }
}

/// A requirement judged on this run's figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Verdict {
    /// A stable key ("performance: ...", "functional: ...", "not run: ...").
    pub name: String,
    pub status: Status,
    /// status == PASS (kept in results.json for the scripts that read it).
    pub passed: bool,
    /// The scoreboard's short columns: what is tested, the requirement, what was measured.
    pub test: String,
    pub requirement: String,
    pub measured: String,
    /// The ratios judged (none for a yes-or-no verdict such as "nothing lost").
    pub checks: Vec<Check>,
    /// The long explanation, ending with the verdict.
    pub text: String,
}

impl Verdict {
    fn with_status(
        name: impl Into<String>,
        status: Status,
        test: impl Into<String>,
        requirement: impl Into<String>,
        measured: impl Into<String>,
        checks: Vec<Check>,
        text: impl Into<String>,
    ) -> Verdict {
        Verdict {
            name: name.into(),
            status,
            passed: status == Status::Pass,
            test: test.into(),
            requirement: requirement.into(),
            measured: measured.into(),
            checks,
            text: format!("{}: {}", text.into(), status.label()),
        }
    }

    /// A verdict on ratios: FAIL when any check fails, else TIE when any ties, else PASS.
    fn judged(
        name: impl Into<String>,
        test: impl Into<String>,
        requirement: impl Into<String>,
        measured: impl Into<String>,
        checks: Vec<Check>,
        text: impl Into<String>,
    ) -> Verdict {
        let status = checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(Status::Pass);
        Verdict::with_status(name, status, test, requirement, measured, checks, text)
    }

    /// A yes-or-no verdict.
    fn flag(
        name: impl Into<String>,
        ok: bool,
        test: impl Into<String>,
        requirement: impl Into<String>,
        measured: impl Into<String>,
        text: impl Into<String>,
    ) -> Verdict {
        let status = if ok { Status::Pass } else { Status::Fail };
        Verdict::with_status(name, status, test, requirement, measured, vec![], text)
    }

    /// A part that did not run, and why.
    fn not_run(name: impl Into<String>, test: impl Into<String>, why: &str) -> Verdict {
        Verdict::with_status(
            name,
            Status::NotRun,
            test,
            "-",
            why.to_string(),
            vec![],
            format!("{}: {why}", "Not run"),
        )
    }

    /// The check that decides the verdict: the worst status, then the smallest margin.
    pub fn deciding(&self) -> Option<&Check> {
        self.checks.iter().max_by(|a, b| {
            a.status.cmp(&b.status).then(
                b.target
                    .margin(b.ratio)
                    .total_cmp(&a.target.margin(a.ratio)),
            )
        })
    }

    /// The scoreboard's ratio: the deciding check's ("1.07x", with its label when the
    /// verdict has several: "0.98x GET P1 (worst of 4)"); empty for a yes-or-no verdict.
    pub fn ratio_text(&self) -> String {
        match self.deciding() {
            None => String::new(),
            Some(c) if self.checks.len() == 1 => format!("{}x", verdict_ratio(c.ratio)),
            Some(c) => format!(
                "{}x {} (worst of {})",
                verdict_ratio(c.ratio),
                c.label,
                self.checks.len()
            ),
        }
    }

    /// The scoreboard's confidence: the deciding check's rounds and interval.
    pub fn confidence(&self) -> String {
        self.deciding().map(Check::confidence).unwrap_or_default()
    }

    pub fn is_functional(&self) -> bool {
        self.name.starts_with("functional")
    }
}

/// How many verdicts say PASS, TIE, FAIL and NOT RUN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub pass: usize,
    pub tie: usize,
    pub fail: usize,
    pub not_run: usize,
}

impl Counts {
    pub fn of(v: &[Verdict]) -> Counts {
        let mut c = Counts::default();
        for x in v {
            *match x.status {
                Status::Pass => &mut c.pass,
                Status::Tie => &mut c.tie,
                Status::Fail => &mut c.fail,
                Status::NotRun => &mut c.not_run,
            } += 1;
        }
        c
    }

    /// "16 PASS, 2 TIE, 1 FAIL, 0 NOT RUN".
    pub fn text(&self) -> String {
        format!(
            "{} PASS, {} TIE, {} FAIL, {} NOT RUN",
            self.pass, self.tie, self.fail, self.not_run
        )
    }
}

/// The power-failure simulation: every crash image recovered and verified, no fence without
/// a crash point.
pub(super) fn power_fail_verdict(power_fail: &Outcome<serde_json::Value>) -> Verdict {
    let name = "functional: data survives power failures";
    let test = "Power-failure simulation (library)";
    match power_fail {
        Ok(v) => {
            let failures = v["failures"].as_u64().unwrap_or(1);
            let unchecked = v["fences_without_point"].as_u64().unwrap_or(1);
            let images = v["images"].as_f64().unwrap_or(0.0);
            Verdict::flag(
                name,
                failures == 0 && unchecked == 0,
                test,
                "every crash image recovers to a committed state",
                format!("{} images, {failures} failures", grouped(images, 0)),
                format!(
                    "Power-failure simulation: {} crash images at {} crash points (every fence of \
                     every thread, {unchecked} without one) recovered and verified, {failures} \
                     failures",
                    grouped(images, 0),
                    grouped(v["crash_points"].as_f64().unwrap_or(0.0), 0)
                ),
            )
        }
        // Not a failure of the product: the simulator binary was not built.
        Err(e) => Verdict::not_run(format!("not run: {test}"), test, e),
    }
}

/// The KV server's kill torture: `kills` kills, no acknowledged write lost.
pub(super) fn server_crash_verdict(
    server_crash: &Outcome<crate::kvcrash::Summary>,
    kills: u64,
) -> Verdict {
    let name = "functional: the KV server loses no acknowledged write";
    let test = "Kill torture (daisy serve)";
    let requirement = "no acknowledged write lost";
    match server_crash {
        Ok(s) => Verdict::flag(
            name,
            s.lost == 0 && s.failures == 0 && s.kills == kills,
            test,
            requirement,
            format!(
                "{} kills, {} writes verified, {} lost",
                s.kills,
                grouped(s.acknowledged_verified as f64, 0),
                s.lost
            ),
            format!(
                "KV server kill torture: daisy serve killed {} times under 3 pipelining \
                 clients, {} acknowledged commands verified after the restarts, {} lost",
                s.kills,
                grouped(s.acknowledged_verified as f64, 0),
                s.lost
            ),
        ),
        Err(e) => Verdict::flag(
            name,
            false,
            test,
            requirement,
            "could not run",
            format!("KV server kill torture could not run: {e}"),
        ),
    }
}

/// "; runs 0.9-1.1x" after a requirement in a verdict's text, nothing for a single figure.
fn conf(c: &Check) -> String {
    let t = c.confidence();
    if t.is_empty() {
        t
    } else {
        format!("; {t}")
    }
}

/// " (runs 0.9-1.1x)" after a figure in a verdict's text, nothing for a single figure.
fn conf_paren(c: &Check) -> String {
    let t = c.confidence();
    if t.is_empty() {
        t
    } else {
        format!(" ({t})")
    }
}

/// "~" before a figure projected from a prefix.
fn tilde(extrapolated: bool) -> &'static str {
    if extrapolated {
        "~"
    } else {
        ""
    }
}

/// Their time over ours (how many times faster Daisy is), with the range over the runs.
fn faster(label: String, target: f64, ours: &hashbench::Row, theirs: &hashbench::Row) -> Check {
    Check::runs(
        label,
        Target::AtLeast(target),
        theirs.total_ms / ours.total_ms,
        theirs.spread_min_ms / ours.spread_max_ms,
        theirs.spread_max_ms / ours.spread_min_ms,
    )
}

/// Daisy on (emulated) NVM against file persistence that really persists: on a disk. (Seed 000
/// itself ran its file rivals on a tmpfs RAMDISK carved from the same battery-backed NVDIMM, so
/// that only the mechanism differed: the tmpfs rows reproduce that. Here tmpfs is plain DRAM and
/// persists nothing, hence these rows as well.)
pub(super) fn disk_verdicts(
    pm: &[hashbench::Row],
    disk: &[hashbench::Row],
    dir: &Option<(PathBuf, String)>,
) -> Vec<Verdict> {
    let mut v = vec![];
    let Some((_, fs)) = dir else {
        return v;
    };
    let mut pairs = vec![
        (
            "daisy-batch",
            "msync-end",
            "insert all, then one durability point",
            "bulk",
            1.05,
        ),
        (
            "daisy",
            "msync-op",
            "every insert durable",
            "per insert",
            1.05,
        ),
    ];
    pairs.extend(db_pairs());
    for (ours, theirs, what, short, need) in pairs {
        let Some(m) = disk.iter().find(|r| r.mechanism == theirs) else {
            continue;
        };
        let Some(d) = pm.iter().find(|r| r.mechanism == ours && r.n == m.n) else {
            continue;
        };
        let check = faster(format!("{ours} vs {theirs} on {fs}"), need, d, m);
        v.push(Verdict::judged(
            format!("performance: {ours} vs {theirs} on disk"),
            format!("Hash map {short}, N = {}: vs {theirs} on a disk ({fs})", grouped(m.n as f64, 0)),
            Target::AtLeast(need).short(),
            format!("{} ms vs {}{} ms", grouped(d.total_ms, 1), tilde(m.extrapolated), grouped(m.total_ms, 1)),
            vec![check.clone()],
            format!(
                "File persistence on a disk, hash map N = {} ({what}): Daisy on NVM (tmpfs) {:.1} ms, \
                 {theirs} on a disk file ({fs}) {}{} ms: {}x (requirement: at least {need}x{})",
                grouped(m.n as f64, 0),
                d.total_ms,
                tilde(m.extrapolated),
                grouped(m.total_ms, 1),
                verdict_ratio(check.ratio),
                conf(&check)
            ),
        ));
    }
    v
}

/// A hash-map verdict "`ours` at least `need` times faster than `theirs`" at N = `nn`: `what`
/// is compared (`short` in the scoreboard); `label` names the rival in the text, `note` ends
/// it.
#[allow(clippy::too_many_arguments)]
fn rival_verdict(
    name: String,
    nn: &str,
    (ours, theirs): (&str, &str),
    (what, short): (&str, &str),
    need: f64,
    d: &hashbench::Row,
    m: &hashbench::Row,
    label: String,
    note: &str,
) -> Verdict {
    let check = faster(format!("{ours} vs {theirs}"), need, d, m);
    Verdict::judged(
        name,
        format!("Hash map {short}, N = {nn}: {ours} vs {theirs}"),
        Target::AtLeast(need).short(),
        format!(
            "{} ms vs {}{} ms",
            grouped(d.total_ms, 1),
            tilde(m.extrapolated),
            grouped(m.total_ms, 1)
        ),
        vec![check.clone()],
        format!(
            "Hash map, N = {nn} ({what}): Daisy {:.1} ms, {label} {}{:.1} ms: {}x \
             (requirement: at least {need}x{}){note}",
            d.total_ms,
            tilde(m.extrapolated),
            m.total_ms,
            verdict_ratio(check.ratio),
            conf(&check)
        ),
    )
}

/// Issue 22's targets against the embedded databases: (Daisy's mechanism, the rival's, what
/// is compared, a short name, the least speed-up required): every insert durable, at least
/// 10x faster than each database committing every insert; insert all and persist, at least
/// 1.05x faster than each committing the run as one transaction.
fn db_pairs() -> Vec<(&'static str, &'static str, &'static str, &'static str, f64)> {
    let mut v = vec![];
    for db in crate::dbrivals::Db::ALL {
        let (op, end) = match db {
            crate::dbrivals::Db::Lmdb => ("lmdb-op", "lmdb-end"),
            crate::dbrivals::Db::Redb => ("redb-op", "redb-end"),
            crate::dbrivals::Db::Sqlite => ("sqlite-op", "sqlite-end"),
        };
        v.push((
            "daisy",
            op,
            "every insert durable, a write transaction each",
            "per insert",
            10.0,
        ));
        v.push((
            "daisy-batch",
            end,
            "insert all, then one durability point: one write transaction",
            "bulk",
            1.05,
        ));
    }
    v
}

/// Seed 000's comparison at the largest N: "insert all pairs and persist" (daisy-batch against
/// msync-end, the seed's comparison), per-insert durability (daisy against msync-op), and PMDK.
pub(super) fn hashmap_verdicts(rows: &[hashbench::Row], env: &Environment) -> Vec<Verdict> {
    let mut v = vec![];
    let Some(n) = rows.iter().map(|r| r.n).max() else {
        return v;
    };
    let at = |m: &str| rows.iter().find(|r| r.n == n && r.mechanism == m);
    let nn = grouped(n as f64, 0);
    let tmpfs_note = if env.fs == "tmpfs" {
        " (on tmpfs msync writes nothing to any device: the rival persists nothing here, so \
         this comparison is the rival's best case (seed 000's tmpfs sat on a battery-backed \
         NVDIMM); the rows on a disk, when the report found one, show file persistence that \
         persists)"
    } else {
        ""
    };
    for (name, ours, theirs, what, short) in [
        (
            "performance: hash map, insert all and persist, vs msync",
            "daisy-batch",
            "msync-end",
            "insert all N pairs, then one durability point",
            "bulk",
        ),
        (
            "performance: hash map, every insert durable, vs msync",
            "daisy",
            "msync-op",
            "every insert durable when it returns",
            "per insert",
        ),
    ] {
        if let (Some(d), Some(m)) = (at(ours), at(theirs)) {
            v.push(rival_verdict(
                name.into(),
                &nn,
                (ours, theirs),
                (what, short),
                1.05,
                d,
                m,
                theirs.into(),
                tmpfs_note,
            ));
        }
    }
    // Issue 22's bulk targets: the batch within 1.5x of bare stores with one durability point
    // (store-end), and faster than the DRAM HashMap (every table sized for N beforehand).
    if let (Some(d), Some(s)) = (at("daisy-batch"), at("store-end")) {
        let check = Check::runs(
            "daisy-batch time / store-end time",
            Target::AtMost(1.5),
            d.total_ms / s.total_ms,
            d.spread_min_ms / s.spread_max_ms,
            d.spread_max_ms / s.spread_min_ms,
        );
        v.push(Verdict::judged(
            "performance: hash map, insert all and persist, vs the store-end floor",
            format!("Hash map bulk, N = {nn}: daisy-batch vs the store-end floor"),
            "time ≤ 1.50x the floor's",
            format!(
                "{} ms vs {} ms",
                grouped(d.total_ms, 1),
                grouped(s.total_ms, 1)
            ),
            vec![check.clone()],
            format!(
                "Hash map, N = {nn} (insert all N pairs, then one durability point): Daisy {:.1} \
                 ms, store-end (bare 8-byte stores, every written line flushed and one fence at \
                 the end) {:.1} ms: Daisy takes {}x its time (requirement: at most 1.5x{})",
                d.total_ms,
                s.total_ms,
                verdict_ratio(check.ratio),
                conf(&check)
            ),
        ));
    }
    if let (Some(d), Some(m)) = (at("daisy-batch"), at("dram")) {
        let check = faster("daisy-batch vs dram".into(), 1.0, d, m);
        v.push(Verdict::judged(
            "performance: hash map, insert all and persist, vs DRAM HashMap",
            format!("Hash map bulk, N = {nn}: daisy-batch vs std's HashMap in DRAM"),
            Target::AtLeast(1.0).short(),
            format!(
                "{} ms vs {} ms",
                grouped(d.total_ms, 1),
                grouped(m.total_ms, 1)
            ),
            vec![check.clone()],
            format!(
                "Hash map, N = {nn} (insert all N pairs): Daisy, durable at the end, {:.1} ms, \
                 std's HashMap in DRAM (nothing persisted) {:.1} ms: {}x (requirement: at \
                 least 1x{})",
                d.total_ms,
                m.total_ms,
                verdict_ratio(check.ratio),
                conf(&check)
            ),
        ));
    }
    for (ours, theirs, what, short, need) in db_pairs() {
        if let (Some(d), Some(m)) = (at(ours), at(theirs)) {
            let label = format!("{theirs} ({})", m.version.as_deref().unwrap_or("?"));
            let name = format!("performance: hash map, {ours} vs {theirs}");
            v.push(rival_verdict(
                name,
                &nn,
                (ours, theirs),
                (what, short),
                need,
                d,
                m,
                label,
                "",
            ));
        }
    }
    if let (Some(d), Some(p)) = (at("daisy"), at("pmdk-tx")) {
        let check = faster("daisy vs pmdk-tx".into(), 1.0, d, p);
        v.push(Verdict::judged(
            "comparison: hash map vs PMDK",
            format!("Hash map per insert, N = {nn}: daisy vs PMDK"),
            Target::AtLeast(1.0).short(),
            format!(
                "{} ns vs {} ns",
                grouped(d.ns_per_op, 0),
                grouped(p.ns_per_op, 0)
            ),
            vec![check.clone()],
            format!(
                "Hash map, N = {nn}, one transaction per insert: Daisy {} ns, PMDK libpmemobj \
                 {} ns per insert: {}x faster{}",
                grouped(d.ns_per_op, 0),
                grouped(p.ns_per_op, 0),
                verdict_ratio(check.ratio),
                conf_paren(&check)
            ),
        ));
    }
    v
}
/// Each round's requests/s of one server over another's: in a round the servers run a case
/// back to back, so a round's ratio compares runs made seconds apart, in the same spell of
/// the machine. Runs are kept in round order, so when a server failed part-way the rounds
/// both finished are the first ones: those are paired.
fn per_round_ratios(d: &[f64], r: &[f64]) -> Vec<f64> {
    d.iter().zip(r).map(|(a, b)| a / b).collect()
}

/// How much faster `d` is than `r` against `target`: the median of the rounds' ratios, with
/// `more` ratios from other paired rounds; the ratio of the medians when no rounds pair.
fn paired_check(
    label: String,
    target: f64,
    d: &kvbench::Row,
    r: &kvbench::Row,
    more: &[f64],
) -> Check {
    let mut ratios = per_round_ratios(&d.rps_runs, &r.rps_runs);
    ratios.extend_from_slice(more);
    Check::paired(label, Target::AtLeast(target), ratios, d.rps / r.rps)
}

/// A check's figures in a verdict's text: "1.07x (faster in 4 of 6 rounds, median within
/// 0.95-1.20x (97%); rounds 0.95 ...)", with its status when not PASS.
fn check_detail(c: &Check) -> String {
    let mut s = format!("{}x", verdict_ratio(c.ratio));
    let conf = c.confidence();
    if c.rounds.len() > 1 {
        s += &format!(" ({conf}; rounds {})", join_fixed(&c.rounds, 2));
    } else if !conf.is_empty() {
        s += &format!(" ({conf})");
    }
    if c.status != Status::Pass {
        s += &format!(" {}", c.status.label());
    }
    s
}

/// "SET P1: 1.07x (...)".
fn check_text(c: &Check) -> String {
    format!("{}: {}", c.label, check_detail(c))
}

/// "4 checks: 3 PASS, 1 TIE" for the scoreboard.
fn checks_summary(checks: &[Check]) -> String {
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    let mut parts = vec![];
    for s in [Status::Pass, Status::Tie, Status::Fail] {
        let k = count(s);
        if k > 0 {
            parts.push(format!("{k} {}", s.label()));
        }
    }
    format!("{} figures: {}", checks.len(), parts.join(", "))
}

/// Issue 18's targets for Redis's data types and MULTI/EXEC: each test at pipeline 16 at
/// least as fast as redis-none, and at pipeline 1 at least as fast as redis-aof-always (the
/// rival that, like daisy, makes every write durable before its reply), judged on the median
/// of the paired rounds' ratios.
pub(super) fn types_verdicts(kv_types: Option<&Outcome<kvbench::Report>>) -> Vec<Verdict> {
    let test = "Redis data types and MULTI/EXEC";
    let rep = match kv_types {
        None => return vec![],
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            return vec![Verdict::not_run(
                "not run: data types and MULTI/EXEC",
                test,
                e,
            )]
        }
    };
    let mut v: Vec<Verdict> = rep
        .unavailable
        .iter()
        .map(|u| unavailable_verdict("data types and MULTI/EXEC", test, u))
        .collect();
    let Some(n) = rep.rows.iter().map(|r| r.requests).max() else {
        return v;
    };
    let at = |server: &str, test: &str, p: usize| {
        rep.rows.iter().find(|r| {
            r.requests == n
                && r.server == server
                && r.test.eq_ignore_ascii_case(test)
                && r.pipeline == p
        })
    };
    let mut checks = vec![];
    for test in super::TYPES_TESTS {
        // Writes against Redis without persistence (P16) and with an fsynced AOF (P1); reads,
        // which no persistence slows, against Redis without persistence at both.
        let rivals = if crate::kvbench::READ_TESTS.contains(test) {
            [(16, "redis-none"), (1, "redis-none")]
        } else {
            [(16, "redis-none"), (1, "redis-aof-always")]
        };
        for (p, rival) in rivals {
            if let (Some(d), Some(r)) = (at("daisy", test, p), at(rival, test, p)) {
                checks.push(paired_check(
                    format!("{} P{p} vs {rival}", test.to_ascii_uppercase()),
                    1.0,
                    d,
                    r,
                    &[],
                ));
            }
        }
    }
    if !checks.is_empty() {
        let parts: Vec<String> = checks.iter().map(check_text).collect();
        v.push(Verdict::judged(
            "target: data types and MULTI/EXEC vs Redis",
            format!("{test}, N = {}", grouped(n as f64, 0)),
            "writes ≥ 1.00x redis-none (P16) and redis-aof-always (P1); reads ≥ 1.00x redis-none",
            checks_summary(&checks),
            checks,
            format!(
                "Data types and MULTI/EXEC, N = {}, 50 clients, 8-byte values (HSET, SADD and \
                 SPOP on one big hash and set; LPUSH, RPUSH, LPOP, RPOP on one list; LRANGE_N \
                 reads the first N items of a list; ZADD and ZPOPMIN on one sorted set; \
                 MULTI/EXEC = MULTI, SET, INCR, HSET, EXEC, in transactions per second): {} \
                 (target: writes at least 1.00x against redis-none at pipeline 16 and against \
                 redis-aof-always at pipeline 1, reads against redis-none at both; each figure \
                 is the median of the rounds' ratios)",
                grouped(n as f64, 0),
                parts.join("; "),
            ),
        ));
    }
    v
}

/// A server of the Redis benchmark that did not start (NOT RUN) or failed part-way (FAIL: a
/// crash is not hidden).
fn unavailable_verdict(stage: &str, test: &str, u: &kvbench::Unavailable) -> Verdict {
    let name = format!("not run: {stage}, {}", u.server);
    let text = format!("{test}: {} {}: {}", u.server, u.status, u.reason);
    if u.status == "failed" {
        Verdict::flag(
            name,
            false,
            format!("{test}: {}", u.server),
            "the server runs",
            format!("{} failed", u.server),
            text,
        )
    } else {
        Verdict::with_status(
            name,
            Status::NotRun,
            format!("{test}: {}", u.server),
            "-",
            format!("{} {}", u.server, u.status),
            vec![],
            text,
        )
    }
}

/// Issue 18's memory and restart targets for the data types: bytes per field of small hashes
/// within 1.2x of Redis's (listpack), of large hashes at most Redis's (hashtable), and daisy's
/// restart with 1,000,000 keys of mixed types to the first PONG within 12 ms.
pub(super) fn types_memory_verdicts(kv: &Outcome<kvbench::Report>) -> Vec<Verdict> {
    let Ok(rep) = kv else {
        return vec![]; // the Redis benchmark's own verdict says it did not run
    };
    let per = |server: &str, kind: &str| {
        rep.memory
            .iter()
            .find(|m| m.server == server && m.kind == kind)
            .map(|m| m.bytes_per_key)
    };
    let mut v = vec![];
    let mut checks = vec![];
    let mut parts = vec![];
    for (kind, what, bound) in [
        ("memory-hash-small", "small hashes", 1.2),
        ("memory-hash-large", "large hashes", 1.0),
    ] {
        if let (Some(d), Some(r)) = (per("daisy", kind), per("redis-none", kind)) {
            let c = Check::single(what.to_string(), Target::AtMost(bound), d / r);
            parts.push(format!(
                "{what}: {d:.1} against {r:.1} bytes per field = {}x (at most {bound:.1}x){}",
                verdict_ratio(c.ratio),
                if c.status == Status::Pass {
                    ""
                } else {
                    " FAIL"
                }
            ));
            checks.push(c);
        }
    }
    if !checks.is_empty() {
        v.push(Verdict::judged(
            "target: data types memory",
            "Memory per hash field: daisy vs redis-none",
            "small ≤ 1.20x, large ≤ 1.00x",
            checks_summary(&checks),
            checks,
            format!("Data types: {}", parts.join("; ")),
        ));
    }
    if let Some(r) = rep
        .restarts
        .iter()
        .find(|r| r.after == "shutdown, mixed types")
    {
        v.push(Verdict::flag(
            "target: data types restart",
            r.restart_ms <= 12.0 && r.dbsize_ok,
            format!(
                "Restart with {} keys of mixed types",
                grouped(r.keys as f64, 0)
            ),
            "≤ 12 ms to the first PONG, every key there",
            format!(
                "{:.1} ms, DBSIZE {}",
                r.restart_ms,
                if r.dbsize_ok { "right" } else { "WRONG" }
            ),
            format!(
                "Data types: restart with {} keys of mixed types: {:.1} ms to the first PONG \
                 (at most 12 ms), DBSIZE {}",
                r.keys,
                r.restart_ms,
                if r.dbsize_ok { "right" } else { "WRONG" }
            ),
        ));
    }
    v
}

pub(super) fn kv_verdicts(
    kv: &Outcome<kvbench::Report>,
    kv_p1: Option<&Outcome<kvbench::Report>>,
) -> Vec<Verdict> {
    let rep = match kv {
        Ok(r) => r,
        Err(e) => {
            return vec![Verdict::not_run(
                "not run: Redis benchmark",
                "Redis benchmark",
                e,
            )]
        }
    };
    let mut v: Vec<Verdict> = rep
        .unavailable
        .iter()
        .map(|u| unavailable_verdict("Redis benchmark", "Redis benchmark", u))
        .collect();
    // The extra pipeline-1 rounds: a server that failed there, or the stage not run.
    match kv_p1 {
        Some(Ok(p)) => {
            for u in &p.unavailable {
                v.push(unavailable_verdict(
                    "Redis benchmark pipeline-1 rounds",
                    "Redis benchmark, pipeline-1 target rounds",
                    u,
                ));
            }
        }
        Some(Err(e)) => v.push(Verdict::flag(
            "not run: Redis benchmark pipeline-1 rounds",
            false,
            "Redis benchmark, pipeline-1 target rounds",
            "the rounds run",
            "could not run",
            format!("Redis benchmark, pipeline-1 target rounds could not run: {e}"),
        )),
        None => {}
    }
    let Some(n) = rep.rows.iter().map(|r| r.requests).max() else {
        return v;
    };
    let nn = grouped(n as f64, 0);
    let at = |server: &str, test: &str, p: usize| {
        rep.rows.iter().find(|r| {
            r.requests == n
                && r.server == server
                && r.test.eq_ignore_ascii_case(test)
                && r.pipeline == p
        })
    };
    for rival in ["redis-rdb", "redis-aof-always"] {
        let mut checks = vec![];
        let mut parts = vec![];
        for test in ["SET", "GET"] {
            for p in kvbench::DEFAULT_PIPELINES {
                if let (Some(d), Some(r)) = (at("daisy", test, p), at(rival, test, p)) {
                    // As for the target below: the median of the rounds' ratios.
                    let c = paired_check(format!("{test} P{p}"), 1.05, d, r, &[]);
                    parts.push(format!(
                        "{test} P{p}: {} vs {} req/s = {}",
                        grouped(d.rps, 0),
                        grouped(r.rps, 0),
                        check_detail(&c)
                    ));
                    checks.push(c);
                }
            }
        }
        if checks.is_empty() {
            continue;
        }
        v.push(Verdict::judged(
            format!("performance: Redis benchmark vs {rival}"),
            format!("Redis SET/GET, N = {nn}: daisy serve vs {rival}"),
            Target::AtLeast(1.05).short(),
            checks_summary(&checks),
            checks,
            format!(
                "Redis benchmark, N = {nn}, 50 clients, 8-byte values: daisy serve (every write \
                 durable before its reply) against {rival}: {} (medians of the runs; each \
                 ratio is the median of the rounds' ratios; requirement: at least 1.05x in \
                 each)",
                parts.join("; "),
            ),
        ));
    }
    // The issue's own target: as fast as Redis with no persistence at all, judged on the
    // paired rounds (see P1_TARGET_ROUNDS).
    let extra = |test: &str| -> Option<(&kvbench::Row, &kvbench::Row)> {
        let rows = &kv_p1?.as_ref().ok()?.rows;
        let find = |server: &str| {
            rows.iter().find(|r| {
                r.requests == n
                    && r.server == server
                    && r.test.eq_ignore_ascii_case(test)
                    && r.pipeline == 1
            })
        };
        Some((find("daisy")?, find("redis-none")?))
    };
    let mut checks = vec![];
    for test in ["SET", "GET"] {
        for p in kvbench::DEFAULT_PIPELINES {
            if let (Some(d), Some(r)) = (at("daisy", test, p), at("redis-none", test, p)) {
                let mut more = vec![];
                if p == 1 {
                    if let Some((d1, r1)) = extra(test) {
                        more = per_round_ratios(&d1.rps_runs, &r1.rps_runs);
                    }
                }
                checks.push(paired_check(format!("{test} P{p}"), 1.0, d, r, &more));
            }
        }
    }
    if !checks.is_empty() {
        let parts: Vec<String> = checks.iter().map(check_text).collect();
        v.push(Verdict::judged(
            "target: Redis benchmark vs Redis without persistence",
            format!("Redis SET/GET, N = {nn}: daisy serve vs redis-none"),
            Target::AtLeast(1.0).short(),
            checks_summary(&checks),
            checks,
            format!(
                "Redis benchmark against redis-none (nothing persisted), N = {nn}: {} (target: \
                 at least 1.00x in each; each figure is the median of the rounds' ratios: in a \
                 round the two servers run the case back to back, seconds apart{})",
                parts.join("; "),
                if kv_p1.is_some() {
                    format!(
                        "; at pipeline 1, where redis-benchmark's own CPU sets the pace for every \
                         server and single runs on a shared 2-core machine swing by 10-30%, the \
                         report ran {P1_TARGET_ROUNDS} more rounds of the two servers alone"
                    )
                } else {
                    String::new()
                },
            ),
        ));
    }
    let restart = |s: &str| {
        rep.restarts
            .iter()
            .find(|r| r.server == s && r.after == "shutdown")
    };
    if let Some(k) = rep
        .restarts
        .iter()
        .find(|r| r.server == "daisy" && r.after == "sigkill")
    {
        let rec = k.recovery_ms.unwrap_or(f64::INFINITY);
        let ok = k.dbsize_ok && k.restart_ms <= 12.0 && rec < 5.0;
        v.push(Verdict::flag(
            "performance: Redis restart after a crash",
            ok,
            format!("Restart after SIGKILL, {} keys", grouped(k.keys as f64, 0)),
            "≤ 12 ms to the first PONG, open < 5 ms",
            format!("{:.1} ms (open {rec:.2} ms)", k.restart_ms),
            format!(
                "Restart with {} keys after SIGKILL under a pipelined SET load, until the first \
                 PONG: daisy serve {:.1} ms (its own open {:.2} ms, {} transactions replayed; {}) \
                 (target: within 12 ms, the open under 5 ms)",
                k.keys,
                k.restart_ms,
                rec,
                k.replayed.unwrap_or(0),
                if k.dbsize_ok {
                    "every key there"
                } else {
                    "KEYS MISSING"
                },
            ),
        ));
    }
    if let Some(d) = restart("daisy") {
        let others: Vec<String> = ["redis-rdb", "redis-aof-always"]
            .iter()
            .filter_map(|s| restart(s).map(|r| format!("{s} {} ms", grouped(r.restart_ms, 0))))
            .collect();
        let ok = d.dbsize_ok && d.restart_ms <= 12.0 * (d.keys as f64 / 1e6).max(1.0);
        v.push(Verdict::flag(
            "performance: Redis restart time",
            ok,
            format!("Restart after shutdown, {} keys", grouped(d.keys as f64, 0)),
            "≤ 12 ms at 1,000,000 keys",
            format!("{:.1} ms ({})", d.restart_ms, others.join(", ")),
            format!(
                "Restart with {} keys until the first PONG: daisy serve {:.1} ms ({}), {} \
                 (target: within 12 ms at 1,000,000 keys)",
                d.keys,
                d.restart_ms,
                if d.dbsize_ok {
                    "every key there"
                } else {
                    "KEYS MISSING"
                },
                others.join(", "),
            ),
        ));
    }
    v
}

pub(super) fn find<'a>(
    rows: &'a [txbench::Row],
    case: &str,
    mech: &str,
) -> Option<&'a txbench::Row> {
    rows.iter().find(|r| r.case == case && r.mechanism == mech)
}

/// A ratio in a verdict, cut (not rounded) to two decimals: 1.048 against a requirement of
/// 1.05 reads 1.04, never a passing-looking 1.05 next to FAIL.
pub(super) fn verdict_ratio(r: f64) -> String {
    format!("{:.2}", (r * 100.0).floor() / 100.0)
}

/// Their time per transaction over ours, with the range over the runs.
fn tx_faster(label: String, target: f64, ours: &txbench::Row, theirs: &txbench::Row) -> Check {
    Check::runs(
        label,
        Target::AtLeast(target),
        theirs.ns_per_op / ours.ns_per_op,
        theirs.spread_min_ns / ours.spread_max_ns,
        theirs.spread_max_ns / ours.spread_min_ns,
    )
}

pub(super) fn verdicts(
    f: &crashtest::Summary,
    tx: &[txbench::Row],
    env: &Environment,
) -> Vec<Verdict> {
    let mut v = vec![];
    v.push(Verdict::flag(
        "functional: data survives crashes",
        f.lost == 0 && f.failures == 0,
        "Kill torture (library)",
        "nothing lost, nothing partial",
        format!(
            "{} kills, {} transactions verified, {} lost",
            grouped(f.kills as f64, 0),
            grouped(f.transactions_verified as f64, 0),
            f.lost
        ),
        format!(
            "Persistence functional test: {} kills, {} committed transactions verified after recovery, {} lost, {} inconsistencies",
            grouped(f.kills as f64, 0),
            grouped(f.transactions_verified as f64, 0),
            f.lost,
            f.failures,
        ),
    ));
    if let (Some(d), Some(m)) = (find(tx, "update-1", "daisy"), find(tx, "update-1", "msync")) {
        let tmpfs_note = if env.fs == "tmpfs" {
            " (on tmpfs msync writes nothing to any device, so this baseline is optimistic for msync)"
        } else {
            ""
        };
        let check = tx_faster("daisy vs msync".into(), 1.05, d, m);
        v.push(Verdict::judged(
            "performance: faster than msync",
            "8-byte update made durable: Daisy vs msync",
            Target::AtLeast(1.05).short(),
            format!("{} ns vs {} ns", grouped(d.ns_per_op, 0), grouped(m.ns_per_op, 0)),
            vec![check.clone()],
            format!(
                "Persistence performance: Daisy per-transaction durability {}x faster than msync ({} ns vs {} ns per 8-byte update; requirement: at least 1.05x{}){tmpfs_note}",
                verdict_ratio(check.ratio),
                grouped(d.ns_per_op, 0),
                grouped(m.ns_per_op, 0),
                conf(&check)
            ),
        ));
    }
    if let (Some(d), Some(fs)) = (find(tx, "update-1", "daisy"), find(tx, "update-1", "fsync")) {
        let check = tx_faster("daisy vs fsync".into(), 1.05, d, fs);
        v.push(Verdict::judged(
            "performance: faster than fsync",
            "8-byte update made durable: Daisy vs write+fdatasync",
            Target::AtLeast(1.05).short(),
            format!("{} ns vs {} ns", grouped(d.ns_per_op, 0), grouped(fs.ns_per_op, 0)),
            vec![check.clone()],
            format!(
                "Persistence performance: Daisy {}x faster than write+fdatasync ({} ns vs {} ns; requirement: at least 1.05x{})",
                verdict_ratio(check.ratio),
                grouped(d.ns_per_op, 0),
                grouped(fs.ns_per_op, 0),
                conf(&check)
            ),
        ));
    }
    // Issue 22: one 8-byte update made durable, against the embedded databases committing a
    // write transaction per update: at least 10x faster.
    for db in crate::dbrivals::Db::ALL {
        if let (Some(d), Some(r)) = (
            find(tx, "update-1", "daisy"),
            find(tx, "update-1", db.name()),
        ) {
            let check = tx_faster(format!("update-1: daisy vs {}", db.name()), 10.0, d, r);
            v.push(Verdict::judged(
                format!("performance: update-1 vs {}", db.name()),
                format!("One 8-byte update made durable: Daisy vs {}", db.name()),
                Target::AtLeast(10.0).short(),
                format!(
                    "{} ns vs {} ns",
                    grouped(d.ns_per_op, 0),
                    grouped(r.ns_per_op, 0)
                ),
                vec![check.clone()],
                format!(
                    "Persistence performance: one 8-byte update made durable: Daisy {:.0} ns, \
                     {} ({}, a write transaction per update) {:.0} ns: {}x (requirement: at \
                     least 10x{}){}",
                    d.ns_per_op,
                    db.name(),
                    r.version.as_deref().unwrap_or("?"),
                    r.ns_per_op,
                    verdict_ratio(check.ratio),
                    conf(&check),
                    if env.fs == "tmpfs" {
                        " (on tmpfs the databases' fsyncs write nothing to any device)"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
    for case in txbench::CASES {
        if let (Some(d), Some(p)) = (find(tx, case, "daisy"), find(tx, case, "pmdk")) {
            let check = tx_faster(format!("{case}: daisy vs pmdk"), 1.0, d, p);
            v.push(Verdict::judged(
                format!("comparison: {case} vs PMDK"),
                format!("Transaction {case}: Daisy vs PMDK"),
                Target::AtLeast(1.0).short(),
                format!(
                    "{} ns vs {} ns",
                    grouped(d.ns_per_op, 0),
                    grouped(p.ns_per_op, 0)
                ),
                vec![check.clone()],
                format!(
                    "Transactions ({case}): Daisy {} ns, PMDK libpmemobj {} ns: {}x faster{}",
                    grouped(d.ns_per_op, 0),
                    grouped(p.ns_per_op, 0),
                    verdict_ratio(check.ratio),
                    conf_paren(&check)
                ),
            ));
        }
    }
    v
}

/// Issue 23's two checks per transaction case, on the rounds' ratios: the C API's time over
/// the Rust path's (at most 1.10x) and PMDK's over the C API's (at least 4x). Shared by the
/// report's verdicts and `daisy bench tx --api c`'s printout.
pub fn capi_checks(tx: &[txbench::Row]) -> (Vec<Check>, Vec<Check>) {
    let (mut vs_rust, mut vs_pmdk) = (vec![], vec![]);
    for case in txbench::CASES {
        let Some(c) = find(tx, case, "daisy-c") else {
            continue;
        };
        if let Some(d) = find(tx, case, "daisy") {
            vs_rust.push(Check::paired(
                format!("{case}: C/Rust"),
                Target::AtMost(1.10),
                txbench::round_ratios(c, d),
                c.ns_per_op / d.ns_per_op,
            ));
        }
        if let Some(p) = find(tx, case, "pmdk") {
            vs_pmdk.push(Check::paired(
                format!("{case}: PMDK/C"),
                Target::AtLeast(4.0),
                txbench::round_ratios(p, c),
                p.ns_per_op / c.ns_per_op,
            ));
        }
    }
    (vs_rust, vs_pmdk)
}

/// Issue 23's targets for the C API (libdaisy, `daisy bench tx --api c`): the transaction
/// benchmark's cases through daisy.h at most 1.10x the Rust path's time, and at least 4x
/// faster than PMDK's libpmemobj, in the same run. The C API and the Rust path run on the same
/// pool file (each run opening it through its own API: how long a cache-line write-back takes
/// depends on where the line lies, so two pools would compare their placements too), and the
/// Rust path, the C API and PMDK run one after another in every round: each check is the
/// median of the rounds' ratios with its interval, as for the other paired targets.
/// `c_api` is the library measured, or why it was not.
pub(super) fn capi_verdicts(tx: &[txbench::Row], c_api: &Outcome<String>) -> Vec<Verdict> {
    let (rust_name, rust_test) = (
        "target: C API within 10% of Rust",
        "Transactions through the C API (libdaisy.so) vs the Rust API",
    );
    let (pmdk_name, pmdk_test) = (
        "target: C API vs PMDK",
        "Transactions through the C API (libdaisy.so) vs PMDK libpmemobj",
    );
    let lib = match c_api {
        Ok(lib) => lib,
        Err(why) => {
            return vec![
                Verdict::not_run(rust_name, rust_test, why),
                Verdict::not_run(pmdk_name, pmdk_test, why),
            ]
        }
    };
    let (vs_rust, vs_pmdk) = capi_checks(tx);
    let how = "on the same pool file, each figure the median of the rounds' ratios";
    let mut v = vec![];
    for (name, test, requirement, checks, what, why_missing) in [
        (
            rust_name,
            rust_test,
            Target::AtMost(1.10),
            vs_rust,
            "C API time over the Rust API's",
            "no daisy-c rows were measured",
        ),
        (
            pmdk_name,
            pmdk_test,
            Target::AtLeast(4.0),
            vs_pmdk,
            "PMDK's time over the C API's",
            "PMDK (libpmemobj) was not measured",
        ),
    ] {
        if checks.is_empty() {
            v.push(Verdict::not_run(name, test, why_missing));
            continue;
        }
        let parts: Vec<String> = checks.iter().map(check_text).collect();
        v.push(Verdict::judged(
            name,
            test,
            format!("every case {}", requirement.short()),
            checks_summary(&checks),
            checks,
            format!(
                "C API ({lib}): the transaction benchmark's cases through daisy.h, {what} \
                 ({how}): {} (requirement: {} in every case)",
                parts.join("; "),
                requirement.text(),
            ),
        ));
    }
    v
}

/// Issue 24's targets on seed 002's matrix: Daisy's block store at least 1.2x PMDK's
/// libpmemblk (in process, the same load generator) and fio's pmemblk engine, and at least
/// fio's libpmem engine with `--sync=1`, in every write cell. Each cell is one measured figure
/// (no rounds): its ratio alone decides it, and the verdict takes the worst cell. Then the
/// functional one: no acknowledged block lost or corrupt in any validation run of Daisy's
/// block store (SIGKILL of the writer, the power-failure simulator). Returns (the functional
/// verdict, the performance verdicts).
pub(super) fn io_verdicts(io: &Outcome<super::IoLab>) -> (Verdict, Vec<Verdict>) {
    let lost_name = "functional: the block store loses no acknowledged block";
    let lost_test = "Data validation (block store, seed 003)";
    let lost_req = "0 acknowledged blocks lost or corrupt";
    let io = match io {
        Ok(io) => io,
        Err(e) => {
            let f = Verdict::flag(
                lost_name,
                false,
                lost_test,
                lost_req,
                "could not run",
                format!("I/O lab could not run: {e}"),
            );
            let p = Verdict::not_run(
                "not run: I/O lab matrix",
                "Block store (seed 002)",
                &format!("the I/O lab could not run: {e}"),
            );
            return (f, vec![p]);
        }
    };
    let mut perf = vec![];
    let cell_of = |m: &str, c: &crate::iobench::Cell| {
        io.cells
            .iter()
            .find(|x| x.mechanism == m && x.rw == c.rw && x.bs == c.bs && x.jobs == c.jobs)
            .and_then(|x| x.mb_s)
    };
    for (rival, need, what) in [
        (
            "libpmemblk",
            1.2,
            "PMDK's libpmemblk (in process, the same load generator)",
        ),
        ("fio-pmemblk", 1.2, "fio's pmemblk engine"),
        (
            "fio-libpmem",
            1.0,
            "fio's libpmem engine with --sync=1 (each write drained)",
        ),
    ] {
        let test = format!("Block store (seed 002): daisy vs {rival}, write cells");
        let mut checks = vec![];
        let mut mb = vec![];
        for c in io
            .cells
            .iter()
            .filter(|c| c.mechanism == "daisy" && c.rw.ends_with("write"))
        {
            if let (Some(d), Some(r)) = (c.mb_s, cell_of(rival, c)) {
                if r > 0.0 {
                    checks.push(Check::single(
                        format!("{}-{} {} B", c.rw, c.jobs, c.bs),
                        Target::AtLeast(need),
                        d / r,
                    ));
                    mb.push((d, r));
                }
            }
        }
        if checks.is_empty() {
            let why = io
                .cells
                .iter()
                .find(|c| c.mechanism == rival && c.mb_s.is_none())
                .map(|c| c.note.clone())
                .unwrap_or_else(|| format!("{rival} was not measured"));
            perf.push(Verdict::not_run(
                format!("not run: daisy vs {rival}"),
                test,
                &why,
            ));
            continue;
        }
        let misses: Vec<String> = checks
            .iter()
            .filter(|c| c.status != Status::Pass)
            .map(|c| format!("{} {}x", c.label, verdict_ratio(c.ratio)))
            .collect();
        let worst = checks
            .iter()
            .zip(&mb)
            .min_by(|a, b| a.0.ratio.total_cmp(&b.0.ratio))
            .expect("not empty");
        let below = if misses.is_empty() {
            String::new()
        } else {
            format!("; below it: {}", misses.join(", "))
        };
        perf.push(Verdict::judged(
            format!("performance: block store vs {rival}"),
            test,
            format!("{} in every write cell", Target::AtLeast(need).short()),
            format!(
                "{} of {} write cells meet it; worst {} MB/s vs {} MB/s",
                checks.len() - misses.len(),
                checks.len(),
                grouped(worst.1 .0, 0),
                grouped(worst.1 .1, 0)
            ),
            checks.clone(),
            format!(
                "Seed 002's matrix on {} ({} s a cell, one figure per cell): Daisy's block store \
                 against {what} in {} write cells (write and randwrite, every block size and \
                 job count measured): smallest ratio {}x at {} ({} MB/s vs {} MB/s), \
                 requirement: at least {need}x in every cell{below}",
                io.fs,
                io.matrix.seconds,
                checks.len(),
                verdict_ratio(worst.0.ratio),
                worst.0.label,
                grouped(worst.1 .0, 0),
                grouped(worst.1 .1, 0),
            ),
        ));
    }
    let functional = match &io.validation {
        Err(e) => Verdict::flag(
            lost_name,
            false,
            lost_test,
            lost_req,
            "could not run",
            format!("Block store data validation could not run: {e}"),
        ),
        Ok(rows) => {
            let daisy: Vec<&crate::iobench::validate::ValidationRow> = rows
                .iter()
                .filter(|r| r.mechanism == "daisy" && r.where_ != "not run")
                .collect();
            let bad: u64 = daisy.iter().map(|r| r.lost + r.corrupt).sum();
            let acked: u64 = daisy
                .iter()
                .filter(|r| r.failure == "SIGKILL")
                .map(|r| r.blocks_checked)
                .sum();
            let images: u64 = daisy
                .iter()
                .filter(|r| r.failure.contains("simulator"))
                .map(|r| r.runs)
                .sum();
            let sim_missing = rows
                .iter()
                .find(|r| r.mechanism == "daisy" && r.where_ == "not run")
                .map(|r| format!(" (power-failure simulator not run: {})", r.note))
                .unwrap_or_default();
            Verdict::flag(
                lost_name,
                !daisy.is_empty() && bad == 0,
                lost_test,
                lost_req,
                format!(
                    "{} kills, {} blocks read back, {} crash images: {bad} lost or corrupt",
                    io.kills,
                    grouped(acked as f64, 0),
                    grouped(images as f64, 0)
                ),
                format!(
                    "Block store data validation (seed 003): self-describing blocks (block \
                     number, version, checksum) written by four threads; after {} kills of the \
                     writer {} acknowledged blocks read back, and {} crash images of the \
                     power-failure simulator checked block by block: {bad} lost or \
                     corrupt{sim_missing}",
                    io.kills,
                    grouped(acked as f64, 0),
                    grouped(images as f64, 0)
                ),
            )
        }
    };
    (functional, perf)
}

#[cfg(test)]
mod tests {
    use super::{
        capi_verdicts, kv_verdicts, per_round_ratios, types_verdicts, verdict_ratio, Check, Status,
        Target, Verdict,
    };
    use crate::kvbench;
    use crate::report::tests::kv_row as row;

    fn target(v: &[super::Verdict]) -> &super::Verdict {
        v.iter()
            .find(|v| v.name.starts_with("target: Redis benchmark"))
            .expect("a target verdict")
    }

    #[test]
    fn the_target_verdict_takes_the_median_of_paired_rounds() {
        // Daisy's median (100) equals redis-none's, but Daisy is the faster in 2 of the 3
        // paired rounds: the ratios 1.25, 0.90, 1.11 have the median 1.11; with 3 rounds the
        // interval is their whole range, 0.90-1.25, which holds the target 1.00: a TIE.
        let main = |d: [f64; 3], r: [f64; 3]| kvbench::Report {
            rows: ["SET", "GET"]
                .iter()
                .flat_map(|t| {
                    [1, 16]
                        .into_iter()
                        .flat_map(move |p| [row("daisy", t, p, &d), row("redis-none", t, p, &r)])
                })
                .collect(),
            runs: 3,
            ..Default::default()
        };
        let v = kv_verdicts(&Ok(main([100.0, 90.0, 111.0], [80.0, 100.0, 100.0])), None);
        let t = target(&v);
        assert_eq!(t.status, Status::Tie, "{}", t.text);
        assert!(
            t.text.contains(
                "SET P1: 1.11x (faster in 2 of 3 rounds, median within 0.90-1.25x (75%); \
                 rounds 1.25 0.90 1.11) TIE"
            ),
            "{}",
            t.text
        );
        assert!(t.text.ends_with(": TIE"), "{}", t.text);
        // Every round faster: PASS; every round slower: FAIL.
        let v = kv_verdicts(
            &Ok(main([105.0, 110.0, 101.0], [100.0, 100.0, 100.0])),
            None,
        );
        assert_eq!(target(&v).status, Status::Pass, "{}", target(&v).text);
        let v = kv_verdicts(&Ok(main([95.0, 99.0, 90.0], [100.0, 100.0, 100.0])), None);
        assert_eq!(target(&v).status, Status::Fail, "{}", target(&v).text);
        // Daisy slower in 2 of 3 rounds but far ahead in one: not a PASS.
        let slow = main([150.0, 95.0, 95.0], [100.0, 100.0, 100.0]);
        let v = kv_verdicts(&Ok(slow.clone()), None);
        assert!(!target(&v).passed, "{}", target(&v).text);
        // The pipeline-1 target rounds are paired with the main ones: 3 more rounds where
        // Daisy is faster make 4 of 6; ratios 0.95 0.95 1.05 1.10 1.20 1.50, median 1.075.
        let extra = kvbench::Report {
            rows: ["SET", "GET"]
                .iter()
                .flat_map(|t| {
                    [
                        row("daisy", t, 1, &[105.0, 110.0, 120.0]),
                        row("redis-none", t, 1, &[100.0, 100.0, 100.0]),
                    ]
                })
                .collect(),
            runs: 3,
            ..Default::default()
        };
        let v = kv_verdicts(&Ok(slow.clone()), Some(&Ok(extra)));
        let t = target(&v);
        assert!(
            t.text.contains("SET P1: 1.07x (faster in 4 of 6 rounds"),
            "{}",
            t.text
        );
        // Pipeline 16 has no extra rounds and stays at 1 of 3.
        assert!(
            t.text.contains("SET P16: 0.95x (faster in 1 of 3 rounds"),
            "{}",
            t.text
        );
        assert!(!t.passed, "{}", t.text);
        // Extra rounds that did not run leave the main rounds' verdict.
        let v = kv_verdicts(&Ok(slow), Some(&Err("no redis".to_string())));
        assert!(target(&v)
            .text
            .contains("SET P1: 0.95x (faster in 1 of 3 rounds"));
        // ... and are a failing verdict of their own: a crash there is not hidden.
        assert!(v
            .iter()
            .any(|x| x.name == "not run: Redis benchmark pipeline-1 rounds"
                && x.status == Status::Fail));
    }

    /// The issue's borderline case: 1.00x, faster in 8 of 15 rounds, is a TIE, not a PASS;
    /// 15 rounds with one slow one pass (the median's interval, x(4)..x(12), stays above).
    #[test]
    fn a_borderline_ratio_is_a_tie() {
        let rounds: Vec<f64> = [
            1.02, 0.97, 1.00, 1.04, 0.99, 1.01, 0.96, 1.03, 0.995, 0.98, 1.05, 0.99, 1.02, 0.98,
            1.01,
        ]
        .to_vec();
        let c = Check::paired("GET P1", Target::AtLeast(1.0), rounds, 0.0);
        assert_eq!(c.status, Status::Tie);
        assert_eq!(verdict_ratio(c.ratio), "1.00");
        assert_eq!(
            c.confidence(),
            "faster in 8 of 15 rounds, median within 0.98-1.02x (96%)"
        );
        let mostly: Vec<f64> = (0..15).map(|i| if i == 3 { 0.9 } else { 1.1 }).collect();
        let c = Check::paired("SET P1", Target::AtLeast(1.0), mostly, 0.0);
        assert_eq!(c.status, Status::Pass, "{}", c.confidence());
        // Ranges over unpaired runs: the range holding the target is a TIE; one run decides
        // by its ratio alone; an upper bound works the other way round.
        let c = Check::runs("x", Target::AtLeast(1.05), 1.10, 0.98, 1.2);
        assert_eq!(
            (c.status, c.confidence().as_str()),
            (Status::Tie, "runs 0.98-1.20x")
        );
        assert_eq!(
            Check::runs("x", Target::AtLeast(1.05), 1.10, 1.06, 1.2).status,
            Status::Pass
        );
        assert_eq!(
            Check::runs("x", Target::AtLeast(1.05), 0.9, 0.8, 1.0).status,
            Status::Fail
        );
        assert_eq!(
            Check::single("x", Target::AtLeast(1.0), 1.0).status,
            Status::Pass
        );
        assert_eq!(
            Check::single("x", Target::AtMost(1.5), 1.6).status,
            Status::Fail
        );
        assert_eq!(
            Check::runs("x", Target::AtMost(1.5), 1.4, 1.3, 1.6).status,
            Status::Tie
        );
        // A verdict is its worst check, and its scoreboard ratio the deciding one.
        let v = Verdict::judged(
            "n",
            "t",
            "r",
            "m",
            vec![
                Check::single("A", Target::AtLeast(1.0), 1.5),
                Check::runs("B", Target::AtLeast(1.0), 1.02, 0.95, 1.1),
                Check::single("C", Target::AtLeast(1.0), 1.01),
            ],
            "text",
        );
        assert_eq!(v.status, Status::Tie);
        assert_eq!(v.ratio_text(), "1.02x B (worst of 3)");
        assert_eq!(v.text, "text: TIE");
    }

    #[test]
    fn per_round_ratios_pair_the_rounds_in_order() {
        assert_eq!(
            per_round_ratios(&[110.0, 90.0, 100.0], &[100.0, 100.0, 80.0]),
            vec![1.1, 0.9, 1.25]
        );
        assert_eq!(per_round_ratios(&[3.0], &[2.0]), vec![1.5]);
        // A server that failed after its first round: the rounds both ran are paired.
        assert_eq!(per_round_ratios(&[1.0, 2.0], &[2.0]), vec![0.5]);
    }

    /// Each data-type test is judged against its rival at its pipeline, on paired rounds; one
    /// slow test fails the verdict, and a stage that did not run is a failing verdict.
    #[test]
    fn data_type_targets_pair_rounds_per_test_and_rival() {
        let rep = |daisy_multi: &[f64]| kvbench::Report {
            rows: vec![
                row("daisy", "hset", 16, &[105.0, 98.0, 110.0]),
                row("redis-none", "hset", 16, &[100.0, 100.0, 100.0]),
                row("redis-aof-always", "hset", 16, &[50.0, 50.0, 50.0]),
                row("daisy", "multi", 1, daisy_multi),
                row("redis-aof-always", "multi", 1, &[100.0, 100.0, 100.0]),
                row("redis-none", "multi", 1, &[200.0, 200.0, 200.0]),
            ],
            runs: 3,
            ..Default::default()
        };
        let ok = Ok(rep(&[101.0, 120.0, 99.0]));
        let v = types_verdicts(Some(&ok));
        let t = v.last().unwrap();
        // HSET P16: ratios 1.05 0.98 1.10 (a TIE with 3 rounds); MULTI P1: 1.01 1.20 0.99.
        assert_eq!(t.status, Status::Tie, "{}", t.text);
        assert!(
            t.text
                .contains("HSET P16 vs redis-none: 1.05x (faster in 2 of 3"),
            "{}",
            t.text
        );
        assert!(
            t.text.contains("MULTI P1 vs redis-aof-always: 1.01x"),
            "{}",
            t.text
        );
        assert_eq!(t.measured, "2 figures: 2 TIE");
        let slow = Ok(rep(&[90.0, 95.0, 95.0]));
        let v = types_verdicts(Some(&slow));
        assert_eq!(
            v.last().unwrap().status,
            Status::Fail,
            "{}",
            v.last().unwrap().text
        );
        let v = types_verdicts(Some(&Err("no redis".into())));
        assert_eq!(v[0].status, Status::NotRun);
        assert!(v[0].text.contains("NOT RUN"));
        assert!(types_verdicts(None).is_empty());
    }

    #[test]
    fn verdict_ratios_never_read_as_passing_when_below_the_requirement() {
        assert_eq!(verdict_ratio(1.0476), "1.04");
        assert_eq!(verdict_ratio(0.996), "0.99");
        assert_eq!(verdict_ratio(1.05), "1.05");
        assert_eq!(verdict_ratio(2.6), "2.60");
    }

    /// A tx row with its runs (nanoseconds per operation, in round order).
    fn tx_row(case: &str, mechanism: &'static str, runs_ns: &[f64]) -> crate::txbench::Row {
        let mut r = crate::report::tests::tx_row(case, mechanism, runs_ns[0]);
        r.ns_per_op = crate::stats::median(runs_ns);
        r.runs_ns = runs_ns.to_vec();
        r
    }

    #[test]
    fn c_api_targets_pair_the_rounds_with_the_rust_path_and_pmdk() {
        // update-1: the C API's runs 5-9% slower than the Rust path's round by round: PASS
        // against 1.10x; PMDK 4.2-4.6x slower than it in every round: PASS against 4x.
        // update-8: one round at 1.12x: the interval (the whole range, at 5 rounds) holds
        // 1.10: TIE; PMDK 3.9x in one round: TIE.
        let rows = vec![
            tx_row("update-1", "daisy", &[100.0, 110.0, 100.0, 105.0, 100.0]),
            tx_row("update-1", "daisy-c", &[105.0, 118.8, 109.0, 112.0, 107.0]),
            tx_row("update-1", "pmdk", &[483.0, 500.0, 480.0, 490.0, 470.0]),
            tx_row("update-8", "daisy", &[300.0, 300.0, 300.0, 300.0, 300.0]),
            tx_row("update-8", "daisy-c", &[312.0, 315.0, 336.0, 318.6, 320.0]),
            tx_row(
                "update-8",
                "pmdk",
                &[1300.0, 1300.0, 1310.4, 1300.0, 1300.0],
            ),
        ];
        let v = capi_verdicts(&rows, &Ok("/x/libdaisy.so".into()));
        assert_eq!(v.len(), 2);
        let (rust, pmdk) = (&v[0], &v[1]);
        assert_eq!(rust.name, "target: C API within 10% of Rust");
        assert_eq!(rust.checks.len(), 2);
        let u1 = &rust.checks[0];
        assert_eq!(
            (u1.label.as_str(), u1.status),
            ("update-1: C/Rust", Status::Pass)
        );
        assert_eq!(u1.rounds.len(), 5);
        assert!((u1.ratio - 1.07).abs() < 1e-9, "{}", u1.ratio);
        let u8 = &rust.checks[1];
        assert_eq!(u8.status, Status::Tie, "{}", rust.text);
        assert_eq!(rust.status, Status::Tie);
        assert!(
            rust.text
                .contains("update-8: C/Rust: 1.06x (≤ 1.10x in 4 of 5 rounds"),
            "{}",
            rust.text
        );
        assert_eq!(pmdk.name, "target: C API vs PMDK");
        assert_eq!(pmdk.checks[0].status, Status::Pass, "{}", pmdk.text);
        assert_eq!(pmdk.checks[1].status, Status::Tie, "{}", pmdk.text);
        assert!(pmdk.text.contains("/x/libdaisy.so"), "{}", pmdk.text);
        // Every round of update-8 slower than 1.10x: FAIL.
        let mut slow = rows.clone();
        slow[4].runs_ns = vec![340.0, 345.0, 350.0, 336.0, 339.0];
        let v = capi_verdicts(&slow, &Ok("/x/libdaisy.so".into()));
        assert_eq!(v[0].status, Status::Fail, "{}", v[0].text);
        // No library: both NOT RUN, with the reason; no PMDK: that one NOT RUN.
        let v = capi_verdicts(&rows, &Err("libdaisy.so: not found".into()));
        assert!(v.iter().all(|v| v.status == Status::NotRun), "{v:?}");
        assert!(
            v[0].text.contains("libdaisy.so: not found"),
            "{}",
            v[0].text
        );
        let no_pmdk: Vec<_> = rows.into_iter().filter(|r| r.mechanism != "pmdk").collect();
        let v = capi_verdicts(&no_pmdk, &Ok("/x/libdaisy.so".into()));
        assert_eq!(v[0].status, Status::Tie);
        assert_eq!(v[1].status, Status::NotRun, "{}", v[1].text);
    }
}
