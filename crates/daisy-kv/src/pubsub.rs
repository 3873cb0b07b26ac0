//! Pub/sub (Redis's pubsub.c and notify.c): SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
//! SSUBSCRIBE, SUNSUBSCRIBE (sharded pub/sub: plain pub/sub on one node), PUBLISH, SPUBLISH,
//! PUBSUB, and keyspace notifications (`notify-keyspace-events`).
//!
//! Who listens where: each client keeps its own subscriptions ([`ClientSubs`], inside
//! `Client`), and the server keeps the reverse index, channel or pattern to subscribers
//! ([`PubSub`], inside `ServerState`). A message is encoded once into [`PubSub::bodies`] and
//! queued per receiving connection in [`PubSub::outbox`]; the event loop copies it into the
//! receivers' reply buffers only after the transaction of the command that caused it has
//! committed (`server.rs`, `deliver_pubsub`), and drops it when that transaction fails. So a
//! subscriber never hears of a write that a crash could still undo. Messages themselves are
//! not persistent, as in Redis: a subscriber that is disconnected, or a server that restarts,
//! loses what was not written to its socket yet.
//!
//! The one exception to queueing is a PUBLISH whose publisher is itself a receiver (a RESP3
//! client may publish while subscribed): its own message goes straight into its reply, ahead
//! of the PUBLISH reply, as in Redis; both leave after the commit like any reply.

use crate::commands::{Client, Ctx, ServerState, Spec};
use crate::config::Config;
use crate::keyspace::Keyspace;
use crate::resp;
use std::collections::{HashMap, HashSet};
use std::ops::Range;

// ---- notification classes (server.h's NOTIFY_*) -------------------------------------------

pub const N_KEYSPACE: u32 = 1 << 0;
pub const N_KEYEVENT: u32 = 1 << 1;
pub const N_GENERIC: u32 = 1 << 2;
pub const N_STRING: u32 = 1 << 3;
pub const N_LIST: u32 = 1 << 4;
pub const N_SET: u32 = 1 << 5;
pub const N_HASH: u32 = 1 << 6;
pub const N_ZSET: u32 = 1 << 7;
pub const N_EXPIRED: u32 = 1 << 8;
pub const N_EVICTED: u32 = 1 << 9;
pub const N_STREAM: u32 = 1 << 10;
pub const N_KEY_MISS: u32 = 1 << 11;
pub const N_MODULE: u32 = 1 << 12;
pub const N_NEW: u32 = 1 << 13;

/// `notify-keyspace-events`'s letters as flags (notify.c's `keyspaceEventsStringToFlags`);
/// the value was checked by CONFIG SET, so an unknown letter is ignored.
pub fn notify_flags(classes: &str) -> u32 {
    let mut f = 0;
    for c in classes.chars() {
        f |= match c {
            'A' => {
                N_GENERIC
                    | N_STRING
                    | N_LIST
                    | N_SET
                    | N_HASH
                    | N_ZSET
                    | N_EXPIRED
                    | N_EVICTED
                    | N_STREAM
                    | N_MODULE
            }
            'g' => N_GENERIC,
            '$' => N_STRING,
            'l' => N_LIST,
            's' => N_SET,
            'h' => N_HASH,
            'z' => N_ZSET,
            'x' => N_EXPIRED,
            'e' => N_EVICTED,
            'K' => N_KEYSPACE,
            'E' => N_KEYEVENT,
            't' => N_STREAM,
            'm' => N_KEY_MISS,
            'd' => N_MODULE,
            'n' => N_NEW,
            _ => 0,
        };
    }
    // Nothing is published unless one of the two channel families is on.
    if f & (N_KEYSPACE | N_KEYEVENT) == 0 {
        0
    } else {
        f
    }
}

/// The `pubsub` class of `client-output-buffer-limit`: (hard bytes, soft bytes, soft
/// seconds), 0 for none.
pub fn obuf_limits(cfg: &Config) -> (u64, u64, i64) {
    let v = cfg.get("client-output-buffer-limit").unwrap_or("");
    let w: Vec<&str> = v.split_whitespace().collect();
    for g in w.chunks(4) {
        if g.len() == 4 && (g[0] == "pubsub" || g[0] == "2") {
            return (
                g[1].parse().unwrap_or(0),
                g[2].parse().unwrap_or(0),
                g[3].parse().unwrap_or(0),
            );
        }
    }
    (32 << 20, 8 << 20, 60)
}

// ---- state ---------------------------------------------------------------------------------

/// A client's subscriptions.
#[derive(Clone, Debug, Default)]
pub struct ClientSubs {
    pub channels: HashSet<Vec<u8>>,
    /// In subscription order (Redis keeps a list).
    pub patterns: Vec<Vec<u8>>,
    pub shard: HashSet<Vec<u8>>,
    /// The connection's slot in the event loop (set when it is accepted).
    pub conn: usize,
    /// The end of the push replies the running command wrote to its reply (subscription
    /// confirmations, its own messages): CLIENT REPLY OFF or SKIP keeps them (Redis's
    /// `CLIENT_PUSHING`). Taken by the event loop after each command.
    pub pushed: usize,
}

impl ClientSubs {
    /// Redis's `clientSubscriptionsCount`: channels and patterns.
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// In subscriber mode (Redis's `CLIENT_PUBSUB`): any subscription, sharded included.
    #[inline]
    pub fn active(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty() || !self.shard.is_empty()
    }
}

/// A subscriber: its client id and connection slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sub {
    id: u64,
    conn: usize,
}

/// A message for one connection: the push of `len` elements whose encoded elements are
/// `PubSub::bodies[body]`.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub conn: usize,
    pub id: u64,
    pub len: u8,
    pub body: Range<usize>,
}

/// The server's side: who listens where, and the messages waiting for their commit.
#[derive(Debug, Default)]
pub struct PubSub {
    channels: HashMap<Vec<u8>, Vec<Sub>>,
    patterns: Vec<(Vec<u8>, Vec<Sub>)>,
    shard: HashMap<Vec<u8>, Vec<Sub>>,
    pub outbox: Vec<Delivery>,
    pub bodies: Vec<u8>,
    /// A subscription changed in the running group (a failed group rebuilds the index from
    /// the clients it restored).
    pub changed: bool,
}

fn remove_sub(map: &mut HashMap<Vec<u8>, Vec<Sub>>, ch: &[u8], id: u64) {
    if let Some(v) = map.get_mut(ch) {
        v.retain(|s| s.id != id);
        if v.is_empty() {
            map.remove(ch);
        }
    }
}

impl PubSub {
    /// Channels with subscribers (INFO's pubsub_channels).
    pub fn num_channels(&self) -> usize {
        self.channels.len()
    }

    /// Patterns with subscribers (INFO's pubsub_patterns, PUBSUB NUMPAT).
    pub fn num_patterns(&self) -> usize {
        self.patterns.len()
    }

    /// Shard channels with subscribers (INFO's pubsubshard_channels).
    pub fn num_shard_channels(&self) -> usize {
        self.shard.len()
    }

    /// Nobody listens to anything.
    #[inline]
    pub fn idle(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty()
    }

    /// Forget a client that is gone.
    pub fn remove_client(&mut self, cl: &Client) {
        let s = &cl.pubsub;
        for ch in &s.channels {
            remove_sub(&mut self.channels, ch, cl.id);
        }
        for ch in &s.shard {
            remove_sub(&mut self.shard, ch, cl.id);
        }
        for p in &s.patterns {
            self.unsub_pattern(p, cl.id);
        }
    }

    fn unsub_pattern(&mut self, p: &[u8], id: u64) {
        if let Some(i) = self.patterns.iter().position(|(q, _)| q == p) {
            self.patterns[i].1.retain(|s| s.id != id);
            if self.patterns[i].1.is_empty() {
                self.patterns.remove(i);
            }
        }
    }

    /// The index again from the clients' own subscriptions (after a failed group restored
    /// them).
    pub fn rebuild<'a>(&mut self, clients: impl Iterator<Item = &'a Client>) {
        self.channels.clear();
        self.patterns.clear();
        self.shard.clear();
        let mut cls: Vec<&Client> = clients.filter(|c| c.pubsub.active()).collect();
        cls.sort_by_key(|c| c.id);
        for cl in cls {
            let sub = Sub {
                id: cl.id,
                conn: cl.pubsub.conn,
            };
            for ch in &cl.pubsub.channels {
                self.channels.entry(ch.clone()).or_default().push(sub);
            }
            for ch in &cl.pubsub.shard {
                self.shard.entry(ch.clone()).or_default().push(sub);
            }
            for p in &cl.pubsub.patterns {
                self.pattern_entry(p).push(sub);
            }
        }
        self.changed = false;
    }

    fn pattern_entry(&mut self, p: &[u8]) -> &mut Vec<Sub> {
        let i = match self.patterns.iter().position(|(q, _)| q == p) {
            Some(i) => i,
            None => {
                self.patterns.push((p.to_vec(), Vec::new()));
                self.patterns.len() - 1
            }
        };
        &mut self.patterns[i].1
    }

    /// Publish `msg` on `channel` (Redis's `pubsubPublishMessage`): the number of receivers.
    /// `me`: the publishing client and its reply, when it may be a receiver itself.
    pub fn publish(
        &mut self,
        channel: &[u8],
        msg: &[u8],
        shard: bool,
        mut me: Option<(&mut Client, &mut Vec<u8>)>,
    ) -> usize {
        let PubSub {
            channels,
            patterns,
            shard: shard_channels,
            outbox,
            bodies,
            ..
        } = self;
        let mut n = 0;
        let map = if shard { &*shard_channels } else { &*channels };
        if let Some(subs) = map.get(channel) {
            let start = bodies.len();
            let kind: &[u8] = if shard { b"smessage" } else { b"message" };
            resp::bulk(bodies, kind);
            resp::bulk(bodies, channel);
            resp::bulk(bodies, msg);
            n += subs.len();
            send(outbox, bodies, subs, 3, start, &mut me);
        }
        if shard {
            return n;
        }
        for (pat, subs) in patterns.iter() {
            if !crate::glob::matches(pat, channel) {
                continue;
            }
            let start = bodies.len();
            resp::bulk(bodies, b"pmessage");
            resp::bulk(bodies, pat);
            resp::bulk(bodies, channel);
            resp::bulk(bodies, msg);
            n += subs.len();
            send(outbox, bodies, subs, 4, start, &mut me);
        }
        n
    }

    /// Forget the messages of a failed group.
    pub fn discard(&mut self) {
        self.outbox.clear();
        self.bodies.clear();
    }
}

/// Queue the message `bodies[start..]` for `subs` (or write it to `me`'s reply when `me` is
/// one of them).
fn send(
    outbox: &mut Vec<Delivery>,
    bodies: &[u8],
    subs: &[Sub],
    len: u8,
    start: usize,
    me: &mut Option<(&mut Client, &mut Vec<u8>)>,
) {
    let body = start..bodies.len();
    for s in subs {
        if let Some((cl, out)) = me.as_mut().filter(|(cl, _)| cl.id == s.id) {
            push_header(out, len as usize, cl.resp3);
            out.extend_from_slice(&bodies[body.clone()]);
            cl.pubsub.pushed = out.len();
            continue;
        }
        outbox.push(Delivery {
            conn: s.conn,
            id: s.id,
            len,
            body: body.clone(),
        });
    }
}

/// A push's header: `>n` in RESP3, an array in RESP2.
pub fn push_header(out: &mut Vec<u8>, n: usize, resp3: bool) {
    if resp3 {
        out.push(b'>');
        out.extend_from_slice(n.to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
    } else {
        resp::array(out, n);
    }
}

// ---- keyspace notifications ---------------------------------------------------------------

/// Publish a keyspace event (notify.c's `notifyKeyspaceEvent`) of class `class` on `key` of
/// database `db`; the caller checked that the class is on.
pub fn notify_event(sv: &mut ServerState, class: u32, event: &str, key: &[u8], db: usize) {
    let flags = sv.config.notify_flags;
    if flags & class == 0 || sv.pubsub.idle() {
        return;
    }
    if flags & N_KEYSPACE != 0 {
        let mut chan = format!("__keyspace@{db}__:").into_bytes();
        chan.extend_from_slice(key);
        sv.pubsub.publish(&chan, event.as_bytes(), false, None);
    }
    if flags & N_KEYEVENT != 0 {
        let chan = format!("__keyevent@{db}__:{event}").into_bytes();
        sv.pubsub.publish(&chan, key, false, None);
    }
}

/// Publish the events the keyspace noted (keys removed because their time passed, keys
/// created), in the order they happened.
pub fn flush_key_events(ks: &mut Keyspace, sv: &mut ServerState) {
    for (ev, db, key) in std::mem::take(&mut ks.events) {
        let (class, name) = match ev {
            crate::keyspace::KeyEvent::Expired => (N_EXPIRED, "expired"),
            crate::keyspace::KeyEvent::New => (N_NEW, "new"),
        };
        notify_event(sv, class, name, &key, db);
    }
}

impl Ctx<'_, '_> {
    /// A keyspace event of class `class` on `key` of the selected database: costs a branch
    /// when that class of notifications is off. Events the keyspace noted during the command
    /// (expired, new) go first, as Redis sends them when they happen; with this class off
    /// they go after the command (`commands::call`).
    #[inline]
    pub fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        if self.sv.config.notify_flags & class == 0 {
            return;
        }
        self.notify_slow(class, event, key);
    }

    #[cold]
    fn notify_slow(&mut self, class: u32, event: &str, key: &[u8]) {
        let db = self.cl.db;
        self.notify_db(class, event, key, db);
    }

    /// [`Self::notify`] for a key of database `db` (MOVE, COPY ... DB).
    pub fn notify_db(&mut self, class: u32, event: &str, key: &[u8], db: usize) {
        if !self.ks.events.is_empty() {
            flush_key_events(self.ks, self.sv);
        }
        notify_event(self.sv, class, event, key, db);
    }
}

// ---- commands ------------------------------------------------------------------------------

fn changed(c: &mut Ctx) {
    c.sv.pubsub.changed = true;
}

fn confirm(c: &mut Ctx, kind: &[u8], name: Option<&[u8]>, count: usize) {
    push_header(c.out, 3, c.cl.resp3);
    resp::bulk(c.out, kind);
    match name {
        Some(n) => resp::bulk(c.out, n),
        None => resp::null(c.out, c.cl.resp3),
    }
    resp::int(c.out, count as i64);
    c.cl.pubsub.pushed = c.out.len();
}

fn me(c: &Ctx) -> Sub {
    Sub {
        id: c.cl.id,
        conn: c.cl.pubsub.conn,
    }
}

/// SUBSCRIBE channel [channel ...]
pub fn subscribe(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    changed(c);
    for ch in &a[1..] {
        if c.cl.pubsub.channels.insert(ch.to_vec()) {
            let s = me(c);
            c.sv.pubsub.channels.entry(ch.to_vec()).or_default().push(s);
        }
        let n = c.cl.pubsub.count();
        confirm(c, b"subscribe", Some(ch), n);
    }
    Ok(())
}

/// SSUBSCRIBE shardchannel [shardchannel ...]
pub fn ssubscribe(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if c.cl.deny_blocking {
        return c.err("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client");
    }
    changed(c);
    for ch in &a[1..] {
        if c.cl.pubsub.shard.insert(ch.to_vec()) {
            let s = me(c);
            c.sv.pubsub.shard.entry(ch.to_vec()).or_default().push(s);
        }
        let n = c.cl.pubsub.shard.len();
        confirm(c, b"ssubscribe", Some(ch), n);
    }
    Ok(())
}

/// PSUBSCRIBE pattern [pattern ...]
pub fn psubscribe(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    changed(c);
    for p in &a[1..] {
        if !c.cl.pubsub.patterns.iter().any(|q| q == p) {
            c.cl.pubsub.patterns.push(p.to_vec());
            let s = me(c);
            c.sv.pubsub.pattern_entry(p).push(s);
        }
        let n = c.cl.pubsub.count();
        confirm(c, b"psubscribe", Some(p), n);
    }
    Ok(())
}

fn unsub_channel(c: &mut Ctx, ch: &[u8], shard: bool, notify: bool) {
    let id = c.cl.id;
    let (set, map) = if shard {
        (&mut c.cl.pubsub.shard, &mut c.sv.pubsub.shard)
    } else {
        (&mut c.cl.pubsub.channels, &mut c.sv.pubsub.channels)
    };
    if set.remove(ch) {
        remove_sub(map, ch, id);
    }
    if notify {
        let (kind, n): (&[u8], usize) = if shard {
            (b"sunsubscribe", c.cl.pubsub.shard.len())
        } else {
            (b"unsubscribe", c.cl.pubsub.count())
        };
        confirm(c, kind, Some(ch), n);
    }
}

fn unsub_pattern(c: &mut Ctx, p: &[u8], notify: bool) {
    if let Some(i) = c.cl.pubsub.patterns.iter().position(|q| q == p) {
        c.cl.pubsub.patterns.remove(i);
        c.sv.pubsub.unsub_pattern(p, c.cl.id);
    }
    if notify {
        let n = c.cl.pubsub.count();
        confirm(c, b"punsubscribe", Some(p), n);
    }
}

/// Unsubscribe from every channel (sharded or not), pattern, with a confirmation each when
/// `notify` (and one with a null name when there was none).
fn unsub_all_channels(c: &mut Ctx, shard: bool, notify: bool) {
    let all: Vec<Vec<u8>> = if shard {
        c.cl.pubsub.shard.iter().cloned().collect()
    } else {
        c.cl.pubsub.channels.iter().cloned().collect()
    };
    for ch in &all {
        unsub_channel(c, ch, shard, notify);
    }
    if notify && all.is_empty() {
        let (kind, n): (&[u8], usize) = if shard {
            (b"sunsubscribe", c.cl.pubsub.shard.len())
        } else {
            (b"unsubscribe", c.cl.pubsub.count())
        };
        confirm(c, kind, None, n);
    }
}

fn unsub_all_patterns(c: &mut Ctx, notify: bool) {
    let all = c.cl.pubsub.patterns.clone();
    for p in &all {
        unsub_pattern(c, p, notify);
    }
    if notify && all.is_empty() {
        let n = c.cl.pubsub.count();
        confirm(c, b"punsubscribe", None, n);
    }
}

/// UNSUBSCRIBE [channel ...]
pub fn unsubscribe(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    changed(c);
    if a.len() == 1 {
        unsub_all_channels(c, false, true);
    } else {
        for ch in &a[1..] {
            unsub_channel(c, ch, false, true);
        }
    }
    Ok(())
}

/// SUNSUBSCRIBE [shardchannel ...]
pub fn sunsubscribe(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    changed(c);
    if a.len() == 1 {
        unsub_all_channels(c, true, true);
    } else {
        for ch in &a[1..] {
            unsub_channel(c, ch, true, true);
        }
    }
    Ok(())
}

/// PUNSUBSCRIBE [pattern ...]
pub fn punsubscribe(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    changed(c);
    if a.len() == 1 {
        unsub_all_patterns(c, true);
    } else {
        for p in &a[1..] {
            unsub_pattern(c, p, true);
        }
    }
    Ok(())
}

/// Leave subscriber mode without confirmations (RESET).
pub fn unsubscribe_all(c: &mut Ctx) {
    if c.cl.pubsub.active() {
        changed(c);
        unsub_all_channels(c, false, false);
        unsub_all_channels(c, true, false);
        unsub_all_patterns(c, false);
    }
}

/// PUBLISH channel message
pub fn publish(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let n =
        c.sv.pubsub
            .publish(a[1], a[2], false, Some((&mut *c.cl, &mut *c.out)));
    resp::int(c.out, n as i64);
    Ok(())
}

/// SPUBLISH shardchannel message
pub fn spublish(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let n =
        c.sv.pubsub
            .publish(a[1], a[2], true, Some((&mut *c.cl, &mut *c.out)));
    resp::int(c.out, n as i64);
    Ok(())
}

/// PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB|HELP
pub fn pubsub(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let sub = a[1].to_ascii_lowercase();
    match (&sub[..], a.len()) {
        (b"help", 2) => {
            crate::admin::help(
                c,
                a[0],
                &[
                    "CHANNELS [<pattern>]",
                    "    Return the currently active channels matching a <pattern> (default: '*').",
                    "NUMPAT",
                    "    Return number of subscriptions to patterns.",
                    "NUMSUB [<channel> ...]",
                    "    Return the number of subscribers for the specified channels, excluding",
                    "    pattern subscriptions(default: no channels).",
                    "SHARDCHANNELS [<pattern>]",
                    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
                    "SHARDNUMSUB [<shardchannel> ...]",
                    "    Return the number of subscribers for the specified shard level channel(s)",
                ],
            );
        }
        (b"channels" | b"shardchannels", 2 | 3) => {
            let map = if sub[0] == b's' {
                &c.sv.pubsub.shard
            } else {
                &c.sv.pubsub.channels
            };
            let names: Vec<&Vec<u8>> = map
                .keys()
                .filter(|ch| a.len() == 2 || crate::glob::matches(a[2], ch))
                .collect();
            resp::array(c.out, names.len());
            for n in names {
                resp::bulk(c.out, n);
            }
        }
        (b"numsub" | b"shardnumsub", _) => {
            let map = if sub[0] == b's' {
                &c.sv.pubsub.shard
            } else {
                &c.sv.pubsub.channels
            };
            resp::array(c.out, (a.len() - 2) * 2);
            for ch in &a[2..] {
                resp::bulk(c.out, ch);
                resp::int(c.out, map.get(*ch).map_or(0, |v| v.len()) as i64);
            }
        }
        (b"numpat", 2) => resp::int(c.out, c.sv.pubsub.patterns.len() as i64),
        _ => return crate::admin::subcommand_error(c, a),
    }
    Ok(())
}

/// The error for a command a RESP2 client in subscriber mode may not run (Redis's check in
/// `processCommand`; the caller checked the mode), or None.
pub fn subscriber_mode_error(spec: &'static Spec, args: &[&[u8]]) -> Option<String> {
    match spec.name {
        "ping" | "subscribe" | "ssubscribe" | "unsubscribe" | "sunsubscribe" | "psubscribe"
        | "punsubscribe" | "quit" | "reset" => None,
        _ => Some(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            crate::admin::full_name(spec, args)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_follow_redis_letters() {
        assert_eq!(notify_flags(""), 0);
        assert_eq!(notify_flags("g$"), 0, "no K or E: nothing is published");
        assert_eq!(notify_flags("KEA") & N_NEW, 0, "A leaves n out");
        assert_ne!(notify_flags("Kn") & N_NEW, 0);
        assert_ne!(notify_flags("Ex") & N_EXPIRED, 0);
        assert_eq!(notify_flags("Ex") & N_GENERIC, 0);
    }

    #[test]
    fn publish_counts_channels_and_patterns() {
        let mut ps = PubSub::default();
        let a = Sub { id: 1, conn: 0 };
        let b = Sub { id: 2, conn: 1 };
        ps.channels.entry(b"news".to_vec()).or_default().push(a);
        ps.pattern_entry(b"n*").push(b);
        ps.pattern_entry(b"x*").push(a);
        assert_eq!(ps.publish(b"news", b"hi", false, None), 2);
        assert_eq!(ps.outbox.len(), 2);
        let d = &ps.outbox[1];
        assert_eq!(
            &ps.bodies[d.body.clone()],
            b"$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        assert_eq!(ps.publish(b"news", b"hi", true, None), 0, "shard is apart");
        ps.unsub_pattern(b"n*", 2);
        assert_eq!(ps.num_patterns(), 1);
    }
}
