//! Access control as Redis 7.0 (acl.c): users with passwords, command rules, key and channel
//! patterns and selectors; the permission check before a command runs; the ACL command;
//! AUTH's user lookup; the ACL log; the ACL file.
//!
//! Users are configuration, not data: they live in memory ([`Acl`], in `ServerState`) and in
//! the ACL file (`aclfile`), never in the pool. A restart without an ACL file starts with the
//! `default` user only (its password from `requirepass`).
//!
//! The rules work on Redis's whole command table (`admin::meta`, every command and
//! subcommand of Redis 7.0, whether this server has it or not), so that categories, ACL CAT
//! and the rules GETUSER prints are Redis's. A command's bit is its index in `meta::all()`.
//!
//! Cost on the hot path: a client of the `default` user while that user may run every
//! command on every key and channel (the default) passes with one comparison and one flag
//! ([`check`]); everyone else pays the key lookup and the pattern matches.

use crate::admin::meta::{self, Cmd};
use crate::commands::{lossy, upper, Client, Ctx, ServerState, Spec, E_INT};
use crate::resp;
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

/// Words of a command bitmap: bit `i` is `meta::all()[i]`; the last bit says "future
/// commands" (set by +@all only, as Redis's reserved bit).
const WORDS: usize = 8;
const FUTURE_BIT: usize = WORDS * 64 - 1;

/// Key pattern permissions (acl.c's ACL_READ_PERMISSION, ACL_WRITE_PERMISSION).
const READ: u8 = 1;
const WRITE: u8 = 2;
const RW: u8 = READ | WRITE;

/// The user a connection is authenticated as (or, before AUTH, the default user).
#[derive(Clone, Debug)]
pub struct UserRef {
    /// 0: the default user; others are never reused, so a deleted user's id names no one.
    pub id: u32,
    pub name: Arc<str>,
}

impl Default for UserRef {
    fn default() -> Self {
        UserRef {
            id: 0,
            name: Arc::from("default"),
        }
    }
}

/// Why a command was refused (the order is Redis's: a later reason is more relevant).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Cmd,
    Key,
    Channel,
    Auth,
}

impl Denied {
    fn reason(self) -> &'static str {
        match self {
            Denied::Cmd => "command",
            Denied::Key => "key",
            Denied::Channel => "channel",
            Denied::Auth => "auth",
        }
    }
}

/// A selector: which commands, keys and channels (acl.c's `aclSelector`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    allowed: [u64; WORDS],
    all_commands: bool,
    /// First arguments allowed of an otherwise denied command (`+select|0`), by bit.
    first_args: Vec<(usize, Vec<String>)>,
    all_keys: bool,
    keys: Vec<(Vec<u8>, u8)>,
    all_channels: bool,
    channels: Vec<Vec<u8>>,
}

impl Selector {
    fn new(all_channels: bool) -> Selector {
        Selector {
            allowed: [0; WORDS],
            all_commands: false,
            first_args: Vec::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels,
            channels: Vec::new(),
        }
    }

    fn bit(&self, i: usize) -> bool {
        self.allowed[i / 64] & (1 << (i % 64)) != 0
    }

    fn set_bit(&mut self, i: usize, on: bool) {
        if on {
            self.allowed[i / 64] |= 1 << (i % 64);
        } else {
            self.allowed[i / 64] &= !(1 << (i % 64));
            self.all_commands = false;
        }
    }

    /// Allow or deny a command, and a container's subcommands with it
    /// (`ACLChangeSelectorPerm`).
    fn change(&mut self, i: usize, on: bool) {
        self.set_bit(i, on);
        self.first_args.retain(|(b, _)| *b != i);
        for &s in subs_of(i) {
            self.set_bit(s, on);
        }
    }

    fn category(&mut self, cat: u32, on: bool) {
        let cats = cat_masks();
        for i in top_level() {
            if cats[i] & cat != 0 {
                self.change(i, on);
            }
            for &s in subs_of(i) {
                if cats[s] & cat != 0 {
                    self.change(s, on);
                }
            }
        }
    }

    /// Apply one rule (acl.c's `ACLSetSelector`).
    fn apply(&mut self, op: &[u8]) -> Result<(), SetErr> {
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"allkeys" | b"~*" => {
                self.all_keys = true;
                self.keys.clear();
                return Ok(());
            }
            b"resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
                return Ok(());
            }
            b"allchannels" | b"&*" => {
                self.all_channels = true;
                self.channels.clear();
                return Ok(());
            }
            b"resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
                return Ok(());
            }
            b"allcommands" | b"+@all" => {
                self.allowed = [u64::MAX; WORDS];
                self.all_commands = true;
                self.first_args.clear();
                return Ok(());
            }
            b"nocommands" | b"-@all" => {
                self.allowed = [0; WORDS];
                self.all_commands = false;
                self.first_args.clear();
                return Ok(());
            }
            _ => {}
        }
        match op.first() {
            Some(b'~') | Some(b'%') => {
                if self.all_keys {
                    return Err(SetErr::KeysAfterAll);
                }
                let (flags, pat) = if op[0] == b'%' {
                    let mut flags = 0;
                    let mut k = 1;
                    loop {
                        match op.get(k).map(u8::to_ascii_uppercase) {
                            Some(b'R') if flags & READ == 0 => flags |= READ,
                            Some(b'W') if flags & WRITE == 0 => flags |= WRITE,
                            Some(b'~') => {
                                k += 1;
                                break;
                            }
                            _ => return Err(SetErr::Syntax),
                        }
                        k += 1;
                    }
                    (flags, &op[k..])
                } else {
                    (RW, &op[1..])
                };
                if has_spaces(pat) {
                    return Err(SetErr::Syntax);
                }
                match self.keys.iter_mut().find(|(p, _)| p == pat) {
                    Some(k) => k.1 |= flags,
                    None => self.keys.push((pat.to_vec(), flags)),
                }
                self.all_keys = false;
            }
            Some(b'&') => {
                if self.all_channels {
                    return Err(SetErr::ChannelsAfterAll);
                }
                let pat = &op[1..];
                if has_spaces(pat) {
                    return Err(SetErr::Syntax);
                }
                if !self.channels.iter().any(|c| c == pat) {
                    self.channels.push(pat.to_vec());
                }
                self.all_channels = false;
            }
            Some(b'+') if op.get(1) != Some(&b'@') => {
                let name = std::str::from_utf8(&op[1..]).map_err(|_| SetErr::NoSuchCommand)?;
                match name.rfind('|') {
                    None => {
                        let i = command_bit(name).ok_or(SetErr::NoSuchCommand)?;
                        self.change(i, true);
                    }
                    Some(bar) => {
                        let (base, sub) = (&name[..bar], &name[bar + 1..]);
                        let i = command_bit(base).ok_or(SetErr::NoSuchCommand)?;
                        let all = meta::all();
                        if all[i].name.contains('|') {
                            return Err(SetErr::FirstArgOfSub);
                        }
                        if sub.is_empty() {
                            return Err(SetErr::Syntax);
                        }
                        if !subs_of(i).is_empty() {
                            let s = command_bit(name).ok_or(SetErr::NoSuchCommand)?;
                            self.change(s, true);
                        } else {
                            match self.first_args.iter_mut().find(|(b, _)| *b == i) {
                                Some((_, v)) => {
                                    if !v.iter().any(|x| x.eq_ignore_ascii_case(sub)) {
                                        v.push(sub.to_string());
                                    }
                                }
                                None => self.first_args.push((i, vec![sub.to_string()])),
                            }
                        }
                    }
                }
            }
            Some(b'-') if op.get(1) != Some(&b'@') => {
                let name = std::str::from_utf8(&op[1..]).map_err(|_| SetErr::NoSuchCommand)?;
                let i = command_bit(name).ok_or(SetErr::NoSuchCommand)?;
                self.change(i, false);
            }
            Some(b'+') | Some(b'-') => {
                let cat = category_flag(&op[2..]).ok_or(SetErr::NoSuchCommand)?;
                self.category(cat, op[0] == b'+');
            }
            _ => return Err(SetErr::Syntax),
        }
        Ok(())
    }

    /// Whether this selector lets `cmd` (bit `i`) run with `args` (`ACLSelectorCheckCmd`):
    /// Err with the reason and the argument at fault.
    fn check(
        &self,
        i: usize,
        cmd: &Cmd,
        args: &[&[u8]],
        keys: &mut KeyCache,
    ) -> Result<(), (Denied, usize)> {
        if !self.all_commands && !cmd.has("no_auth") && !self.bit(i) {
            let idx = if cmd.name.contains('|') { 2 } else { 1 };
            let ok = args.len() >= 2
                && self.first_args.iter().any(|(b, v)| {
                    *b == i
                        && args
                            .get(idx)
                            .is_some_and(|a| v.iter().any(|x| x.as_bytes().eq_ignore_ascii_case(a)))
                });
            if !ok {
                return Err((Denied::Cmd, 0));
            }
        }
        if !self.all_keys && cmd.has_keys() {
            for (pos, flags) in keys.get(cmd, args) {
                if !self.key_ok(args[*pos], *flags) {
                    return Err((Denied::Key, *pos));
                }
            }
        }
        if !self.all_channels {
            for (pos, pattern) in channels_of(cmd, args) {
                if !channel_ok(&self.channels, args[pos], pattern) {
                    return Err((Denied::Channel, pos));
                }
            }
        }
        Ok(())
    }

    fn key_ok(&self, key: &[u8], need: u8) -> bool {
        self.keys
            .iter()
            .any(|(p, f)| f & need == need && crate::glob::matches(p, key))
    }

    /// The selector's keys as GETUSER prints them.
    fn keys_text(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let v: Vec<String> = self.keys.iter().map(|(p, f)| pattern_text(p, *f)).collect();
        v.join(" ")
    }

    fn channels_text(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let v: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        v.join(" ")
    }

    /// The selector as ACL LIST prints it (`ACLDescribeSelector`).
    fn describe(&self) -> String {
        let mut s = String::new();
        if self.all_keys {
            s.push_str("~* ");
        } else {
            for (p, f) in &self.keys {
                s.push_str(&pattern_text(p, *f));
                s.push(' ');
            }
        }
        if self.all_channels {
            s.push_str("&* ");
        } else {
            s.push_str("resetchannels ");
            for c in &self.channels {
                s.push('&');
                s.push_str(&String::from_utf8_lossy(c));
                s.push(' ');
            }
        }
        s.push_str(&self.describe_commands());
        s
    }

    /// The command rules that rebuild this selector's bitmap (acl.c's
    /// `ACLDescribeSelectorCommandRules`): +@all or -@all, the categories that fit best,
    /// then single commands.
    pub fn describe_commands(&self) -> String {
        let mut rules = String::new();
        let additive = !self.bit(FUTURE_BIT);
        let mut fake = Selector::new(false);
        if additive {
            rules.push_str("-@all ");
        } else {
            rules.push_str("+@all ");
            fake.apply(b"+@all").ok();
        }
        let mut temp = self.clone();
        let mut applied = [false; 32];
        let names = meta::ACL_CATEGORIES;
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (u64::MAX, 0u64);
            for (j, _) in names.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count_category(1 << j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            fake.category(1 << j, additive);
            temp.category(1 << j, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(names[j]);
            rules.push(' ');
            applied[j] = true;
        }
        let all = meta::all();
        let single = |i: usize, rules: &mut String, fake: &mut Selector| {
            let (u, f) = (self.bit(i), fake.bit(i));
            if u != f {
                rules.push(if u { '+' } else { '-' });
                rules.push_str(&all[i].name);
                rules.push(' ');
                fake.change(i, u);
            }
        };
        for i in top_level() {
            single(i, &mut rules, &mut fake);
            for &s in subs_of(i) {
                single(s, &mut rules, &mut fake);
            }
            if !self.bit(i) {
                if let Some((_, v)) = self.first_args.iter().find(|(b, _)| *b == i) {
                    for a in v {
                        rules.push_str(&format!("+{}|{} ", all[i].name, a));
                    }
                }
            }
        }
        rules.pop();
        rules
    }

    fn count_category(&self, cat: u32) -> (u64, u64) {
        let cats = cat_masks();
        let (mut on, mut off) = (0, 0);
        for (i, &m) in cats.iter().enumerate() {
            if m & cat != 0 {
                if self.bit(i) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }
}

fn pattern_text(p: &[u8], f: u8) -> String {
    let prefix = match f {
        READ => "%R~",
        WRITE => "%W~",
        _ => "~",
    };
    format!("{prefix}{}", String::from_utf8_lossy(p))
}

fn channel_ok(list: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| {
        if is_pattern {
            p == channel
        } else {
            crate::glob::matches(p, channel)
        }
    })
}

/// The keys of a command line, found once for all selectors.
#[derive(Default)]
struct KeyCache(Option<Vec<(usize, u8)>>);

impl KeyCache {
    fn get(&mut self, cmd: &Cmd, args: &[&[u8]]) -> &[(usize, u8)] {
        self.0.get_or_insert_with(|| {
            cmd.keys(args)
                .unwrap_or_default()
                .into_iter()
                .map(|(pos, flags)| {
                    let mut need = 0;
                    for f in flags {
                        match f {
                            "access" => need |= READ,
                            "insert" | "delete" | "update" => need |= WRITE,
                            _ => {}
                        }
                    }
                    (pos, need)
                })
                .collect()
        })
    }
}

/// The channels a command line names that ACLs check (Redis's `getChannelsFromCommand`
/// with the publish and subscribe flags): (argument, matched as a pattern literally).
fn channels_of(cmd: &Cmd, args: &[&[u8]]) -> Vec<(usize, bool)> {
    match cmd.name.as_str() {
        "publish" | "spublish" => (args.len() > 1).then_some((1, false)).into_iter().collect(),
        "subscribe" | "ssubscribe" => (1..args.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..args.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    }
}

fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&c| c == 0 || c == b' ' || (b'\t'..=b'\r').contains(&c))
}

/// Why a rule was refused (acl.c's `ACLSetUserStringError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetErr {
    NoSuchCommand,
    Syntax,
    KeysAfterAll,
    ChannelsAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSub,
}

impl SetErr {
    pub fn text(self) -> &'static str {
        match self {
            SetErr::NoSuchCommand => "Unknown command or category name in ACL",
            SetErr::Syntax => "Syntax error",
            SetErr::KeysAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            SetErr::ChannelsAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            SetErr::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            SetErr::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            SetErr::FirstArgOfSub => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

// ---- the command table as ACLs see it ------------------------------------------------------

/// Each command's categories as a bit mask (bit j: `meta::ACL_CATEGORIES[j]`).
fn cat_masks() -> &'static [u32] {
    static M: OnceLock<Vec<u32>> = OnceLock::new();
    M.get_or_init(|| {
        meta::all()
            .iter()
            .map(|c| {
                let mut m = 0;
                for k in c.acl_categories() {
                    if let Some(j) = meta::ACL_CATEGORIES.iter().position(|x| *x == k) {
                        m |= 1 << j;
                    }
                }
                m
            })
            .collect()
    })
}

/// The top-level commands' bits, in name order.
fn top_level() -> impl Iterator<Item = usize> {
    static T: OnceLock<Vec<usize>> = OnceLock::new();
    T.get_or_init(|| {
        (0..meta::all().len())
            .filter(|&i| !meta::all()[i].name.contains('|'))
            .collect()
    })
    .iter()
    .copied()
}

/// A container's subcommands' bits (none for another command).
fn subs_of(i: usize) -> &'static [usize] {
    static S: OnceLock<Vec<Vec<usize>>> = OnceLock::new();
    let all = meta::all();
    &S.get_or_init(|| {
        let base = all.as_ptr() as usize;
        all.iter()
            .map(|c| {
                if c.name.contains('|') {
                    return Vec::new();
                }
                meta::subcommands(&c.name)
                    .iter()
                    .map(|s| (s as *const Cmd as usize - base) / std::mem::size_of::<Cmd>())
                    .collect()
            })
            .collect()
    })[i]
}

/// The bit of a command by its full name (any case), as ACL rules name it.
fn command_bit(name: &str) -> Option<usize> {
    let cmd = meta::lookup_by_fullname(name.as_bytes())?;
    Some(bit_of(cmd))
}

fn bit_of(cmd: &'static Cmd) -> usize {
    let all = meta::all();
    (cmd as *const Cmd as usize - all.as_ptr() as usize) / std::mem::size_of::<Cmd>()
}

fn category_flag(name: &[u8]) -> Option<u32> {
    meta::ACL_CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|j| 1 << j)
}

/// The Redis command (subcommand for a container) a line of this server's table runs.
fn meta_of(spec: &'static Spec, args: &[&[u8]]) -> Option<&'static Cmd> {
    static TOP: OnceLock<Vec<Option<&'static Cmd>>> = OnceLock::new();
    let top = TOP.get_or_init(|| {
        crate::commands::COMMANDS
            .iter()
            .map(|s| meta::lookup(s.name))
            .collect()
    });
    let cmd = top[spec.index()]?;
    if args.len() >= 2 && !subs_of(bit_of(cmd)).is_empty() {
        return meta::lookup_argv(args);
    }
    Some(cmd)
}

// ---- users -------------------------------------------------------------------------------

/// A user (acl.c's `user`).
#[derive(Clone, Debug)]
pub struct User {
    pub id: u32,
    pub name: Vec<u8>,
    enabled: bool,
    nopass: bool,
    /// None: neither flag was given; Some(true): skip-sanitize-payload.
    sanitize: Option<bool>,
    /// SHA-256 of each password, lowercase hex.
    passwords: Vec<String>,
    /// The root selector first.
    selectors: Vec<Selector>,
}

impl User {
    fn new(id: u32, name: &[u8], all_channels: bool) -> User {
        User {
            id,
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(all_channels)],
        }
    }

    /// Apply one rule (acl.c's `ACLSetUser`); `all_channels`: acl-pubsub-default.
    fn apply(&mut self, op: &[u8], all_channels: bool) -> Result<(), SetErr> {
        if op.is_empty() {
            return Ok(());
        }
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"skip-sanitize-payload" => self.sanitize = Some(true),
            b"sanitize-payload" => self.sanitize = Some(false),
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"clearselectors" => self.selectors.truncate(1),
            b"reset" => {
                self.nopass = false;
                self.passwords.clear();
                self.enabled = false;
                self.sanitize = Some(false);
                self.selectors.truncate(1);
                let root = &mut self.selectors[0];
                root.apply(b"resetkeys")?;
                root.apply(b"resetchannels")?;
                if all_channels {
                    root.apply(b"allchannels")?;
                }
                root.apply(b"-@all")?;
            }
            _ => match op[0] {
                b'>' | b'#' => {
                    let h = if op[0] == b'>' {
                        hex_sha256(&op[1..])
                    } else {
                        check_hash(&op[1..])?
                    };
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                b'<' | b'!' => {
                    let h = if op[0] == b'<' {
                        hex_sha256(&op[1..])
                    } else {
                        check_hash(&op[1..])?
                    };
                    let Some(p) = self.passwords.iter().position(|x| *x == h) else {
                        return Err(SetErr::NoSuchPassword);
                    };
                    self.passwords.remove(p);
                }
                b'(' if op.last() == Some(&b')') => {
                    let mut s = Selector::new(all_channels);
                    for part in op[1..op.len() - 1].split(|c| c.is_ascii_whitespace()) {
                        if !part.is_empty() {
                            s.apply(part)?;
                        }
                    }
                    self.selectors.push(s);
                }
                _ => self.selectors[0].apply(op)?,
            },
        }
        Ok(())
    }

    /// The user as ACL LIST and the ACL file write it, without `user <name>`
    /// (`ACLDescribeUser`).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for f in self.flags() {
            s.push_str(f);
            s.push(' ');
        }
        for p in &self.passwords {
            s.push('#');
            s.push_str(p);
            s.push(' ');
        }
        s.push_str(&self.selectors[0].describe());
        for sel in &self.selectors[1..] {
            s.push_str(&format!(" ({})", sel.describe()));
        }
        s
    }

    fn flags(&self) -> Vec<&'static str> {
        let mut v = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            v.push("nopass");
        }
        match self.sanitize {
            Some(true) => v.push("skip-sanitize-payload"),
            Some(false) => v.push("sanitize-payload"),
            None => {}
        }
        v
    }

    /// Whether `pass` authenticates as this user (`ACLCheckUserCredentials`).
    fn accepts(&self, pass: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let h = hex_sha256(pass);
        // Compared without an early exit.
        self.passwords.iter().fold(false, |found, p| {
            let diff = p.bytes().zip(h.bytes()).fold(0u8, |d, (a, b)| d | (a ^ b));
            found | (diff == 0)
        })
    }

    /// Whether this user may run `cmd` with `args` (`ACLCheckAllUserCommandPerm`): the first
    /// selector that allows it wins; else the most relevant refusal.
    pub fn check(&self, cmd: &'static Cmd, args: &[&[u8]]) -> Result<(), (Denied, usize)> {
        let i = bit_of(cmd);
        let mut keys = KeyCache::default();
        let mut worst = (Denied::Cmd, 0);
        for s in &self.selectors {
            match s.check(i, cmd, args, &mut keys) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    if e.0 > worst.0 || (e.0 == worst.0 && e.1 > worst.1) {
                        worst = e;
                    }
                }
            }
        }
        Err(worst)
    }

    /// Whether this user may use `channel` (a pattern, when `is_pattern`, is compared
    /// literally with the user's patterns): `ACLUserCheckChannelPerm`.
    pub fn may_use_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors
            .iter()
            .any(|s| s.all_channels || channel_ok(&s.channels, channel, is_pattern))
    }

    fn unrestricted(&self) -> bool {
        let r = &self.selectors[0];
        r.all_commands && r.all_keys && r.all_channels
    }
}

/// Whether `new` may deny a channel `old` allowed, as Redis 7.0 decides it
/// (`ACLKillPubsubClientsIfNeeded`'s two shortcuts): not when a selector of `new` allows
/// every channel, nor when every pattern of `old` is among `new`'s (and `old` did not allow
/// every channel). Then each subscriber of the user is checked against `new`.
fn revokes_channels(old: &User, new: &User) -> bool {
    if new.selectors.iter().any(|s| s.all_channels) {
        return false;
    }
    let upcoming: Vec<&Vec<u8>> = new.selectors.iter().flat_map(|s| &s.channels).collect();
    !old.selectors
        .iter()
        .all(|s| !s.all_channels && s.channels.iter().all(|c| upcoming.contains(&c)))
}

fn check_hash(h: &[u8]) -> Result<String, SetErr> {
    if h.len() != 64 || !h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(SetErr::BadHash);
    }
    Ok(String::from_utf8_lossy(h).into_owned())
}

/// Join the arguments of a selector written over several arguments (`(` ... `)`):
/// `ACLMergeSelectorArguments`. Err: the argument with the unmatched `(`.
fn merge_selectors(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, a) in args.iter().enumerate() {
        if let Some((start, mut acc)) = open.take() {
            acc.push(b' ');
            acc.extend_from_slice(a);
            if a.last() == Some(&b')') {
                out.push(acc);
            } else {
                open = Some((start, acc));
            }
            continue;
        }
        if a.first() == Some(&b'(') && a.last() != Some(&b')') {
            open = Some((j, a.to_vec()));
            continue;
        }
        out.push(a.to_vec());
    }
    match open {
        Some((start, _)) => Err(start),
        None => Ok(out),
    }
}

/// An ACL log entry (acl.c's `ACLLogEntry`).
#[derive(Clone, Debug)]
pub struct LogEntry {
    count: u64,
    reason: Denied,
    /// toplevel, multi, lua.
    context: &'static str,
    object: Vec<u8>,
    username: Vec<u8>,
    created_ms: i64,
    updated_ms: i64,
    client_info: String,
    entry_id: u64,
}

/// What a failed group restores: the users, the next id, the log, the next entry id.
type Undo = (Vec<User>, u32, VecDeque<LogEntry>, u64);

/// The users, the ACL log, and what the event loop must do about them.
#[derive(Clone, Debug)]
pub struct Acl {
    /// The default user (id 0) is always there.
    users: Vec<User>,
    next_id: u32,
    log: VecDeque<LogEntry>,
    next_entry_id: u64,
    /// The default user may run everything (the hot path's one check).
    pub(crate) default_unrestricted: bool,
    /// The default user needs no password and is on: connections start authenticated.
    default_open: bool,
    /// Users (ids) whose connections the event loop must close (DELUSER, ACL LOAD).
    pub kill_users: Vec<u32>,
    /// Users (ids) whose channel permissions ACL SETUSER narrowed: the event loop closes
    /// their subscribers that listen to a channel or pattern no longer allowed, once the
    /// command's transaction commits (Redis 7.0's `ACLKillPubsubClientsIfNeeded`).
    pub kill_subscribers: Vec<u32>,
    /// The state before the first change in the running group (the event loop restores it
    /// if the group fails, and drops it when it commits).
    undo: Option<Box<Undo>>,
}

impl Default for Acl {
    fn default() -> Self {
        Acl::new()
    }
}

impl Acl {
    pub fn new() -> Acl {
        let mut a = Acl {
            users: vec![default_user()],
            next_id: 1,
            log: VecDeque::new(),
            next_entry_id: 0,
            default_unrestricted: true,
            default_open: true,
            kill_users: Vec::new(),
            kill_subscribers: Vec::new(),
            undo: None,
        };
        a.refresh();
        a
    }

    fn refresh(&mut self) {
        let d = &self.users[0];
        self.default_unrestricted = d.unrestricted();
        self.default_open = d.enabled && d.nopass;
    }

    /// Connections must authenticate (the default user has a password, or is off).
    #[inline]
    pub fn auth_required(&self) -> bool {
        !self.default_open
    }

    fn save_undo(&mut self) {
        if self.undo.is_none() {
            self.undo = Some(Box::new((
                self.users.clone(),
                self.next_id,
                self.log.clone(),
                self.next_entry_id,
            )));
        }
    }

    /// The group's transaction committed: its changes stay.
    #[inline]
    pub fn committed(&mut self) {
        if self.undo.is_some() {
            self.undo = None;
        }
    }

    /// The group failed: its commands run again, so their changes go.
    pub fn rollback(&mut self) {
        if let Some(u) = self.undo.take() {
            (self.users, self.next_id, self.log, self.next_entry_id) = *u;
            self.refresh();
        }
        self.kill_users.clear();
        self.kill_subscribers.clear();
    }

    pub fn user(&self, name: &[u8]) -> Option<&User> {
        self.users.iter().find(|u| u.name == name)
    }

    pub fn user_by_id(&self, id: u32) -> Option<&User> {
        self.users.iter().find(|u| u.id == id)
    }

    /// Set the default user's password (`requirepass`; empty: nopass):
    /// `ACLUpdateDefaultUserPassword`.
    pub fn set_requirepass(&mut self, pass: Option<&[u8]>) {
        self.save_undo();
        let d = &mut self.users[0];
        let _ = d.apply(b"resetpass", false);
        match pass {
            Some(p) => {
                let mut op = b">".to_vec();
                op.extend_from_slice(p);
                let _ = d.apply(&op, false);
            }
            None => {
                let _ = d.apply(b"nopass", false);
            }
        }
        self.refresh();
    }

    /// ACL SETUSER's work: all the rules or none (`ACLStringSetUser`); Err is the reply's text.
    pub fn set_user(
        &mut self,
        name: &[u8],
        ops: &[&[u8]],
        all_channels: bool,
    ) -> Result<(), String> {
        let merged = merge_selectors(ops).map_err(|j| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                lossy(ops[j])
            )
        })?;
        let existing = self.users.iter().position(|u| u.name == name);
        let mut u = match existing {
            Some(i) => self.users[i].clone(),
            None => User::new(0, name, all_channels),
        };
        for op in &merged {
            u.apply(op, all_channels).map_err(|e| {
                format!(
                    "Error in ACL SETUSER modifier '{}': {}",
                    lossy(op),
                    e.text()
                )
            })?;
        }
        self.save_undo();
        match existing {
            Some(i) => {
                if revokes_channels(&self.users[i], &u) {
                    self.kill_subscribers.push(u.id);
                }
                self.users[i] = u
            }
            None => {
                u.id = self.next_id;
                self.next_id += 1;
                self.users.push(u);
            }
        }
        self.refresh();
        Ok(())
    }

    /// Remove users; their connections are to be closed. The number removed.
    fn delete(&mut self, names: &[&[u8]]) -> usize {
        self.save_undo();
        let mut n = 0;
        for name in names {
            if let Some(i) = self.users.iter().position(|u| u.name == *name && u.id != 0) {
                let u = self.users.remove(i);
                self.kill_users.push(u.id);
                n += 1;
            }
        }
        n
    }

    /// ACL LIST's lines (`user <name> <rules>`), by name: also what ACL SAVE writes and
    /// CONFIG REWRITE puts in the config file.
    pub fn list_lines(&self) -> Vec<Vec<u8>> {
        self.sorted()
            .iter()
            .map(|u| {
                let mut l = b"user ".to_vec();
                l.extend_from_slice(&u.name);
                l.push(b' ');
                l.extend_from_slice(u.describe().as_bytes());
                l
            })
            .collect()
    }

    /// Check a config file's `user` line's rules (`ACLAppendUserForLoading`): Err is Redis's
    /// error, with the argument it is about (the name for a bad name, else the rule).
    pub fn check_user_line(args: &[String]) -> Result<(), (String, String)> {
        let name = args[0].as_bytes();
        if has_spaces(name) {
            return Err((
                args[0].clone(),
                "Usernames can't contain spaces or null characters".into(),
            ));
        }
        let ops: Vec<&[u8]> = args[1..].iter().map(|a| a.as_bytes()).collect();
        let merged = merge_selectors(&ops).map_err(|j| {
            (
                args[1 + j].clone(),
                "Unmatched parenthesis in acl selector".into(),
            )
        })?;
        let mut u = User::new(0, name, false);
        for op in &merged {
            if let Err(e) = u.apply(op, false) {
                return Err((lossy(op), e.text().to_string()));
            }
        }
        Ok(())
    }

    /// The users by name (rax order: bytewise).
    fn sorted(&self) -> Vec<&User> {
        let mut v: Vec<&User> = self.users.iter().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Whether the connection's user may run `spec` with `args`.
    pub fn check(
        &self,
        cl: &Client,
        spec: &'static Spec,
        args: &[&[u8]],
    ) -> Result<(), (Denied, usize, &'static str)> {
        let Some(cmd) = meta_of(spec, args) else {
            return Ok(());
        };
        // A user removed while this connection runs (it closes once the group commits): no
        // permission at all meanwhile.
        let Some(user) = self.user_by_id(cl.user.id) else {
            return Err((Denied::Cmd, 0, cmd.name.as_str()));
        };
        user.check(cmd, args)
            .map_err(|(d, pos)| (d, pos, cmd.name.as_str()))
    }

    /// Add an entry to the ACL log, or count it on a similar recent one
    /// (`addACLLogEntry`).
    #[allow(clippy::too_many_arguments)]
    pub fn log(
        &mut self,
        reason: Denied,
        context: &'static str,
        object: &[u8],
        username: &[u8],
        client_info: String,
        now_ms: i64,
        max_len: usize,
    ) {
        self.save_undo();
        let found = self.log.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && (e.updated_ms - now_ms).abs() <= 60_000
                && e.object == object
                && e.username == username
        });
        if let Some(i) = found {
            let mut e = self.log.remove(i).expect("found");
            e.count += 1;
            e.updated_ms = now_ms;
            e.client_info = client_info;
            self.log.push_front(e);
            return;
        }
        self.log.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            username: username.to_vec(),
            created_ms: now_ms,
            updated_ms: now_ms,
            client_info,
            entry_id: self.next_entry_id,
        });
        self.next_entry_id += 1;
        self.log.truncate(max_len);
    }

    /// Replace the users with an ACL file's (`ACLLoadFromFile`): Err is the error text and
    /// nothing changes. Every connection of a user other than `default` is to be closed.
    pub fn load_file(&mut self, path: &str, all_channels: bool) -> Result<(), String> {
        let text = std::fs::read(path).map_err(|e| {
            format!(
                "Error loading ACLs, opening file '{path}': {}",
                strip_os_error(&e)
            )
        })?;
        let mut errors = String::new();
        let mut users: Vec<User> = Vec::new();
        for (n, line) in text.split(|&c| c == b'\n').enumerate() {
            let line = trim(line);
            let linenum = n + 1;
            if line.is_empty() {
                continue;
            }
            let argv: Vec<&[u8]> = line.split(|&c| c == b' ').collect();
            if argv[0] != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{path}:{linenum} should start with user keyword followed by the username. "
                ));
                continue;
            }
            if has_spaces(argv[1]) {
                errors.push_str(&format!(
                    "'{path}:{linenum}: username '{}' contains invalid characters. ",
                    lossy(argv[1])
                ));
                continue;
            }
            if users.iter().any(|u| u.name == argv[1]) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {linenum}. ",
                    lossy(argv[1])
                ));
                continue;
            }
            let mut u = User::new(0, argv[1], all_channels);
            let ops = match merge_selectors(&argv[2..]) {
                Ok(ops) => ops,
                Err(_) => {
                    errors.push_str(&format!(
                        "{path}:{linenum}: Unmatched parenthesis in selector definition."
                    ));
                    continue;
                }
            };
            let mut syntax = false;
            for op in &ops {
                let op = trim(op);
                if let Err(e) = u.apply(op, all_channels) {
                    if e == SetErr::NoSuchCommand {
                        errors.push_str(&format!(
                            "{path}:{linenum}: Error in applying operation '{}': {}. ",
                            lossy(op),
                            e.text()
                        ));
                    } else if !syntax {
                        errors.push_str(&format!("{path}:{linenum}: {}. ", e.text()));
                        syntax = true;
                    }
                }
            }
            users.push(u);
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            return Err(errors);
        }
        self.save_undo();
        let default = match users.iter().position(|u| u.name == b"default") {
            Some(i) => users.remove(i),
            None => default_user(),
        };
        for u in &self.users[1..] {
            self.kill_users.push(u.id);
        }
        self.users.truncate(1);
        self.users[0] = User { id: 0, ..default };
        for mut u in users {
            u.id = self.next_id;
            self.next_id += 1;
            self.users.push(u);
        }
        self.refresh();
        Ok(())
    }

    /// The ACL file's text (`ACLSaveToFile`).
    pub fn file_text(&self) -> String {
        let mut s = String::new();
        for u in self.sorted() {
            s.push_str(&format!(
                "user {} {}\n",
                String::from_utf8_lossy(&u.name),
                u.describe()
            ));
        }
        s
    }
}

fn trim(s: &[u8]) -> &[u8] {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let start = s.iter().position(|c| !ws(c)).unwrap_or(s.len());
    let end = s.iter().rposition(|c| !ws(c)).map_or(start, |e| e + 1);
    &s[start..end]
}

/// An I/O error as strerror prints it (without Rust's "(os error n)").
fn strip_os_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn default_user() -> User {
    let mut u = User::new(0, b"default", true);
    for op in [&b"+@all"[..], b"~*", b"&*", b"on", b"nopass"] {
        let _ = u.apply(op, true);
    }
    u
}

// ---- what the command path calls ---------------------------------------------------------

/// The permission check before a command runs (server.c's `processCommand`, after the
/// authentication check): None to go ahead, or the NOPERM reply, logged in the ACL log.
#[inline]
pub fn check(
    spec: &'static Spec,
    args: &[&[u8]],
    cl: &Client,
    sv: &mut ServerState,
    now_ms: i64,
) -> Option<String> {
    if cl.user.id == 0 && sv.acl.default_unrestricted {
        return None;
    }
    check_slow(spec, args, cl, sv, now_ms)
}

#[cold]
fn check_slow(
    spec: &'static Spec,
    args: &[&[u8]],
    cl: &Client,
    sv: &mut ServerState,
    now_ms: i64,
) -> Option<String> {
    let (why, pos, name) = sv.acl.check(cl, spec, args).err()?;
    let context = if cl.multi.is_some() {
        "multi"
    } else {
        "toplevel"
    };
    log_denied(sv, cl, why, pos, name, args, context, now_ms);
    Some(match why {
        Denied::Cmd => format!("NOPERM this user has no permissions to run the '{name}' command"),
        Denied::Key => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        _ => "NOPERM this user has no permissions to access one of the channels used as arguments"
            .into(),
    })
}

/// EXEC's check of a queued command (multi.c: the rules may have changed since it was
/// queued): None to run it, or the error reply.
pub fn check_queued(c: &mut Ctx, spec: &'static Spec, args: &[&[u8]]) -> Option<String> {
    if c.cl.user.id == 0 && c.sv.acl.default_unrestricted {
        return None;
    }
    let (why, pos, name) = c.sv.acl.check(c.cl, spec, args).err()?;
    log_denied(c.sv, c.cl, why, pos, name, args, "multi", c.now_ms);
    let reason = match why {
        Denied::Cmd => "no permission to execute the command or subcommand",
        Denied::Key => "no permission to touch the specified keys",
        _ => "no permission to access one of the channels used as arguments",
    };
    Some(format!(
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"
    ))
}

/// The check of a command a script runs (script.c's `scriptVerifyACL`), for the scripting
/// commands: None to run it, or the error text the script raises (without a code), logged
/// in the ACL log with the `lua` context.
pub fn check_script(c: &mut Ctx, spec: &'static Spec, args: &[&[u8]]) -> Option<String> {
    if c.cl.user.id == 0 && c.sv.acl.default_unrestricted {
        return None;
    }
    let (why, pos, name) = c.sv.acl.check(c.cl, spec, args).err()?;
    log_denied(c.sv, c.cl, why, pos, name, args, "lua", c.now_ms);
    let what = match why {
        Denied::Cmd => "can't run this command or subcommand",
        Denied::Key => "can't access at least one of the keys mentioned in the command arguments",
        _ => "can't publish to the channel mentioned in the command",
    };
    Some(format!("The user executing the script {what}"))
}

#[allow(clippy::too_many_arguments)]
fn log_denied(
    sv: &mut ServerState,
    cl: &Client,
    why: Denied,
    pos: usize,
    name: &str,
    args: &[&[u8]],
    context: &'static str,
    now_ms: i64,
) {
    let object: &[u8] = match why {
        Denied::Cmd => name.as_bytes(),
        _ => args.get(pos).copied().unwrap_or(b""),
    };
    // The client as Redis shows it then: its last command is the refused one.
    let mut shown = cl.clone();
    shown.last_cmd = meta::lookup(name).map_or(shown.last_cmd, |m| m.name.as_str());
    let info = crate::admin::client_line(&shown, now_ms, false, false);
    let max = log_max_len(sv);
    let user = cl.user.name.as_bytes().to_vec();
    sv.acl.log(why, context, object, &user, info, now_ms, max);
}

fn log_max_len(sv: &ServerState) -> usize {
    sv.config
        .get("acllog-max-len")
        .and_then(|v| v.parse().ok())
        .unwrap_or(128)
}

fn pubsub_default_all(sv: &ServerState) -> bool {
    sv.config.get("acl-pubsub-default") == Some("allchannels")
}

/// Whether the connection's user may publish or subscribe to `channel` (`is_pattern`: a
/// PSUBSCRIBE pattern, compared literally): for the pub/sub commands.
pub fn may_use_channel(sv: &ServerState, cl: &Client, channel: &[u8], is_pattern: bool) -> bool {
    if cl.user.id == 0 && sv.acl.default_unrestricted {
        return true;
    }
    sv.acl
        .user_by_id(cl.user.id)
        .is_some_and(|u| u.may_use_channel(channel, is_pattern))
}

/// AUTH and HELLO AUTH (`ACLAuthenticateUser`): the client becomes `user` when `pass` is one
/// of its passwords; else the attempt is logged and false returned, the client unchanged.
pub fn authenticate(c: &mut Ctx, user: &[u8], pass: &[u8], cmd_name: &[u8]) -> bool {
    if let Some(u) = c.sv.acl.user(user).filter(|u| u.accepts(pass)) {
        c.cl.user = UserRef {
            id: u.id,
            name: Arc::from(String::from_utf8_lossy(&u.name).as_ref()),
        };
        c.cl.authed = true;
        return true;
    }
    let context = if c.cl.multi.is_some() {
        "multi"
    } else {
        "toplevel"
    };
    let info = crate::admin::client_line(c.cl, c.now_ms, false, false);
    let max = log_max_len(c.sv);
    c.sv.acl
        .log(Denied::Auth, context, cmd_name, user, info, c.now_ms, max);
    false
}

/// The default user has no password (AUTH with one argument is refused then).
pub fn default_nopass(sv: &ServerState) -> bool {
    sv.acl.users[0].nopass
}

// ---- ACL -----------------------------------------------------------------------------------

const HELP: &[&str] = &[
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
];

/// The connection's user was removed: it closes once this reply is written, unauthenticated.
fn drop_own_user(c: &mut Ctx) {
    if c.sv.acl.kill_users.contains(&c.cl.user.id) {
        c.cl.user = UserRef::default();
        c.cl.authed = false;
        c.action = crate::commands::Action::Close;
    }
}

/// ACL SETUSER | GETUSER | DELUSER | LIST | USERS | WHOAMI | CAT | LOG | GENPASS | DRYRUN |
/// LOAD | SAVE | HELP.
pub fn acl(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let n = a.len();
    let aclfile = c.sv.config.get("aclfile").unwrap_or("").to_string();
    match (&upper(a[1])[..], n) {
        (b"SETUSER", n) if n >= 3 => {
            if has_spaces(a[2]) {
                return c.err("ERR Usernames can't contain spaces or null characters");
            }
            let all = pubsub_default_all(c.sv);
            match c.sv.acl.set_user(a[2], &a[3..], all) {
                Ok(()) => resp::ok(c.out),
                Err(e) => return c.err(&format!("ERR {e}")),
            }
        }
        (b"DELUSER", n) if n >= 3 => {
            if a[2..].iter().any(|u| *u == b"default") {
                return c.err("ERR The 'default' user cannot be removed");
            }
            let k = c.sv.acl.delete(&a[2..]);
            drop_own_user(c);
            resp::int(c.out, k as i64);
        }
        (b"GETUSER", 3) => getuser(c, a[2]),
        (b"LIST", 2) | (b"USERS", 2) => {
            let lines: Vec<Vec<u8>> = if a[1].eq_ignore_ascii_case(b"users") {
                c.sv.acl.sorted().iter().map(|u| u.name.clone()).collect()
            } else {
                c.sv.acl.list_lines()
            };
            resp::array(c.out, lines.len());
            for l in lines {
                resp::bulk(c.out, &l);
            }
        }
        (b"WHOAMI", 2) => {
            let name = c.cl.user.name.clone();
            resp::bulk(c.out, name.as_bytes());
        }
        (b"LOAD", _) | (b"SAVE", _) if aclfile.is_empty() => {
            return c.err("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.");
        }
        (b"LOAD", 2) => {
            let all = pubsub_default_all(c.sv);
            match c.sv.acl.load_file(&aclfile, all) {
                Ok(()) => {
                    drop_own_user(c);
                    resp::ok(c.out)
                }
                Err(e) => return c.err(&format!("ERR {e}")),
            }
        }
        (b"SAVE", 2) => {
            let text = c.sv.acl.file_text();
            let tmp = format!("{aclfile}.tmp-{}", std::process::id());
            let r = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, &aclfile));
            match r {
                Ok(()) => resp::ok(c.out),
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    eprintln!("daisy serve: ACL SAVE to {aclfile} failed: {e}");
                    return c.err("ERR There was an error trying to save the ACLs. Please check the server logs for more information");
                }
            }
        }
        (b"CAT", 2) => {
            resp::array(c.out, meta::ACL_CATEGORIES.len());
            for k in meta::ACL_CATEGORIES {
                resp::bulk(c.out, k.as_bytes());
            }
        }
        (b"CAT", 3) => {
            let Some(flag) = category_flag(a[2]) else {
                return c.err(&format!("ERR Unknown category '{}'", lossy(a[2])));
            };
            let cats = cat_masks();
            let all = meta::all();
            let mut names = Vec::new();
            for i in top_level() {
                for j in std::iter::once(i).chain(subs_of(i).iter().copied()) {
                    if cats[j] & flag != 0 {
                        names.push(all[j].name.as_str());
                    }
                }
            }
            resp::array(c.out, names.len());
            for name in names {
                resp::bulk(c.out, name.as_bytes());
            }
        }
        (b"GENPASS", 2 | 3) => {
            let mut bits = 256;
            if n == 3 {
                match crate::resp::parse_i64(a[2]) {
                    Some(b) => bits = b,
                    None => return c.err(E_INT),
                }
            }
            if !(1..=4096).contains(&bits) {
                return c.err("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096");
            }
            let chars = ((bits + 3) / 4) as usize;
            let hex = random_hex(chars);
            resp::bulk(c.out, hex.as_bytes());
        }
        (b"LOG", 2 | 3) => {
            let mut count = 10i64;
            if n == 3 {
                if a[2].eq_ignore_ascii_case(b"reset") {
                    c.sv.acl.save_undo();
                    c.sv.acl.log.clear();
                    resp::ok(c.out);
                    return Ok(());
                }
                match crate::resp::parse_i64(a[2]) {
                    Some(v) => count = v.max(0),
                    None => return c.err(E_INT),
                }
            }
            let entries: Vec<LogEntry> =
                c.sv.acl.log.iter().take(count as usize).cloned().collect();
            resp::array(c.out, entries.len());
            for e in entries {
                c.map(10);
                resp::bulk(c.out, b"count");
                resp::int(c.out, e.count as i64);
                resp::bulk(c.out, b"reason");
                resp::bulk(c.out, e.reason.reason().as_bytes());
                resp::bulk(c.out, b"context");
                resp::bulk(c.out, e.context.as_bytes());
                resp::bulk(c.out, b"object");
                resp::bulk(c.out, &e.object);
                resp::bulk(c.out, b"username");
                resp::bulk(c.out, &e.username);
                resp::bulk(c.out, b"age-seconds");
                let age = (c.now_ms - e.updated_ms).max(0) as f64 / 1000.0;
                resp::double(c.out, &format!("{age}"), c.cl.resp3);
                resp::bulk(c.out, b"client-info");
                resp::bulk(c.out, e.client_info.as_bytes());
                resp::bulk(c.out, b"entry-id");
                resp::int(c.out, e.entry_id as i64);
                resp::bulk(c.out, b"timestamp-created");
                resp::int(c.out, e.created_ms);
                resp::bulk(c.out, b"timestamp-last-updated");
                resp::int(c.out, e.updated_ms);
            }
        }
        (b"DRYRUN", n) if n >= 4 => {
            let Some(user) = c.sv.acl.user(a[2]).cloned() else {
                return c.err(&format!("ERR User '{}' not found", lossy(a[2])));
            };
            let args = &a[3..];
            let Some(cmd) = meta::lookup_argv(args) else {
                return c.err(&format!("ERR Command '{}' not found", lossy(a[3])));
            };
            let k = args.len() as i32;
            if (cmd.arity > 0 && cmd.arity != k) || k < -cmd.arity {
                return c.err(&format!(
                    "ERR wrong number of arguments for '{}' command",
                    cmd.name
                ));
            }
            match user.check(cmd, args) {
                Ok(()) => resp::ok(c.out),
                Err((why, pos)) => {
                    let text = match why {
                        Denied::Cmd => format!(
                            "This user has no permissions to run the '{}' command",
                            cmd.name
                        ),
                        Denied::Key => format!(
                            "This user has no permissions to access the '{}' key",
                            lossy(args[pos])
                        ),
                        _ => format!(
                            "This user has no permissions to access the '{}' channel",
                            lossy(args[pos])
                        ),
                    };
                    resp::bulk(c.out, text.as_bytes());
                }
            }
        }
        (b"HELP", 2) => crate::admin::help_reply(c, a[0], HELP),
        _ => {
            return c.err(&format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
                lossy(a[1]),
                lossy(a[0]).to_ascii_uppercase()
            ))
        }
    }
    Ok(())
}

/// ACL GETUSER (7.0's reply: flags, passwords, the root selector's commands, keys and
/// channels, and the other selectors).
fn getuser(c: &mut Ctx, name: &[u8]) {
    let Some(u) = c.sv.acl.user(name).cloned() else {
        c.nil();
        return;
    };
    c.map(6);
    resp::bulk(c.out, b"flags");
    let flags = u.flags();
    c.set_header(flags.len());
    for f in flags {
        resp::bulk(c.out, f.as_bytes());
    }
    resp::bulk(c.out, b"passwords");
    resp::array(c.out, u.passwords.len());
    for p in &u.passwords {
        resp::bulk(c.out, p.as_bytes());
    }
    selector_fields(c, &u.selectors[0]);
    resp::bulk(c.out, b"selectors");
    resp::array(c.out, u.selectors.len() - 1);
    for s in &u.selectors[1..] {
        c.map(3);
        selector_fields(c, s);
    }
}

fn selector_fields(c: &mut Ctx, s: &Selector) {
    resp::bulk(c.out, b"commands");
    resp::bulk(c.out, s.describe_commands().as_bytes());
    resp::bulk(c.out, b"keys");
    resp::bulk(c.out, s.keys_text().as_bytes());
    resp::bulk(c.out, b"channels");
    resp::bulk(c.out, s.channels_text().as_bytes());
}

/// `chars` random lowercase hex digits (from the kernel's random source).
fn random_hex(chars: usize) -> String {
    use std::io::Read;
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    if !ok {
        // No /dev/urandom: the clock through SHA-256, still unpredictable enough to vary.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let mut h = sha256(&seed.to_le_bytes());
        for (i, b) in bytes.iter_mut().enumerate() {
            if i % 32 == 0 && i > 0 {
                h = sha256(&h);
            }
            *b = h[i % 32];
        }
    }
    let mut s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    s.truncate(chars);
    s
}

// ---- SHA-256 (passwords are stored hashed, as Redis stores them) --------------------------

fn hex_sha256(data: &[u8]) -> String {
    sha256(data).iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_known_digests() {
        assert_eq!(
            hex_sha256(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex_sha256(b"passwd4"),
            "34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6"
        );
        let long = vec![b'a'; 1000];
        assert_eq!(
            hex_sha256(&long),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        );
    }

    fn user(rules: &[&str]) -> User {
        let mut u = User::new(1, b"u", false);
        for r in rules {
            u.apply(r.as_bytes(), false).unwrap();
        }
        u
    }

    #[test]
    fn describe_rebuilds_the_bitmap() {
        for rules in [
            &["+@all", "-@string", "+incr", "-debug", "+debug|digest"][..],
            &[
                "+@string",
                "-incr",
                "+acl",
                "+debug|digest",
                "+debug|segfault",
            ],
            &["+@all", "-client", "+client|id", "+client|setname"],
            &["-@all", "+select|0", "+select|1"],
            &["+@read", "+@write", "-@keyspace", "+del"],
        ] {
            let u = user(rules);
            let d = u.selectors[0].describe_commands();
            let mut again = User::new(1, b"u", false);
            for r in d.split(' ') {
                again.apply(r.as_bytes(), false).unwrap();
            }
            assert_eq!(
                again.selectors[0].allowed, u.selectors[0].allowed,
                "{rules:?} -> {d}"
            );
            assert_eq!(
                again.selectors[0].first_args, u.selectors[0].first_args,
                "{d}"
            );
        }
        for cat in meta::ACL_CATEGORIES {
            let u = user(&["+@all", &format!("-@{cat}")]);
            assert_eq!(u.selectors[0].describe_commands(), format!("+@all -@{cat}"));
            let u = user(&["-@all", &format!("+@{cat}")]);
            assert_eq!(u.selectors[0].describe_commands(), format!("-@all +@{cat}"));
        }
    }

    #[test]
    fn channel_rules_and_their_revocation() {
        let mut acl = Acl::new();
        acl.set_user(b"u", &[b"on", b"resetchannels", b"&a*"], false)
            .unwrap();
        assert!(
            acl.kill_subscribers.is_empty(),
            "a new user revokes nothing"
        );
        let u = acl.user(b"u").unwrap();
        assert!(u.may_use_channel(b"abc", false));
        assert!(!u.may_use_channel(b"bcd", false));
        // A pattern (PSUBSCRIBE) is compared literally.
        assert!(u.may_use_channel(b"a*", true));
        assert!(!u.may_use_channel(b"ab*", true));
        acl.set_user(b"u", &[b"+get"], false).unwrap();
        acl.set_user(b"u", &[b"&b"], false).unwrap();
        assert!(acl.kill_subscribers.is_empty(), "no channel taken away");
        acl.set_user(b"u", &[b"resetchannels", b"&b"], false)
            .unwrap();
        assert_eq!(acl.kill_subscribers, [1]);
        // A refused SETUSER changes nothing.
        assert!(acl.set_user(b"u", &[b"&c", b"+nosuch"], false).is_err());
        assert!(!acl.user(b"u").unwrap().may_use_channel(b"c", false));
        assert_eq!(acl.kill_subscribers, [1]);
        // From every channel to some: revoked; to every channel again: nothing.
        acl.set_user(b"v", &[b"on", b"allchannels"], false).unwrap();
        acl.set_user(b"v", &[b"resetchannels", b"&x"], false)
            .unwrap();
        assert_eq!(acl.kill_subscribers, [1, 2]);
        acl.set_user(b"v", &[b"allchannels"], false).unwrap();
        assert_eq!(acl.kill_subscribers, [1, 2]);
    }

    #[test]
    fn rule_errors_are_redis_errors() {
        let mut u = User::new(1, b"u", false);
        assert_eq!(u.apply(b"+nosuch", false), Err(SetErr::NoSuchCommand));
        assert_eq!(u.apply(b"+config|get|x", false), Err(SetErr::FirstArgOfSub));
        assert_eq!(u.apply(b"+config|asdf", false), Err(SetErr::NoSuchCommand));
        assert_eq!(u.apply(b"+get|a|b", false), Err(SetErr::NoSuchCommand));
        assert_eq!(u.apply(b"-select|0", false), Err(SetErr::NoSuchCommand));
        assert_eq!(u.apply(b"#abc", false), Err(SetErr::BadHash));
        assert_eq!(u.apply(b"<nopw", false), Err(SetErr::NoSuchPassword));
        assert_eq!(u.apply(b"%X~a", false), Err(SetErr::Syntax));
        assert_eq!(u.apply(b"bogus", false), Err(SetErr::Syntax));
        u.apply(b"allkeys", false).unwrap();
        assert_eq!(u.apply(b"~a", false), Err(SetErr::KeysAfterAll));
        assert_eq!(merge_selectors(&[b"(a", b"b"]), Err(0));
        assert_eq!(
            merge_selectors(&[b"x", b"(a", b"b)"]).unwrap(),
            vec![b"x".to_vec(), b"(a b)".to_vec()]
        );
    }
}
