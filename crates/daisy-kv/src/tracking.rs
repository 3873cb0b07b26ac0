//! Client-side caching (Redis 6+'s tracking.c): CLIENT TRACKING, CACHING, GETREDIR and
//! TRACKINGINFO, and the invalidation messages.
//!
//! Two modes, as in Redis. By default the server remembers, per key, the clients that read it
//! ([`Tracking`]'s table, filled after each read-only command of a tracking client); the
//! first write to the key sends each of them one invalidation and forgets them. In BCAST mode
//! a client names key prefixes instead (none: the empty prefix, every key), and every key
//! written that starts with one of them is sent to it, the keys of a prefix together, once
//! per group commit (Redis: once per event-loop iteration). OPTIN/OPTOUT with CLIENT CACHING
//! choose which reads are remembered; NOLOOP leaves out the client's own writes.
//!
//! When messages leave: a write notes its keys in the keyspace (`Keyspace::touch`, the hook
//! WATCH uses too); after each command [`keys_written`] turns them into messages queued in
//! [`Tracking::outbox`], and the event loop writes those into the receivers' reply buffers
//! only after the group's transaction has committed (`server.rs`, `deliver_tracking`), as it
//! does keyspace notifications. So no client hears of a write a crash could still undo, and a
//! client's own invalidation comes after the reply of the command that caused it (Redis's
//! `tracking_pending_keys`). A failed group keeps the messages it queued: an invalidation of
//! a write that did not happen only makes a client fetch the value again, whereas dropping it
//! would leave the client a stale value (the table entry is gone).
//!
//! Where they go: to the tracking client itself if it speaks RESP3 (an `invalidate` push),
//! or to the client it redirects to: a push if that one speaks RESP3, a message on the
//! `__redis__:invalidate` channel if it is a RESP2 client in subscriber mode, nothing
//! otherwise. A redirection to a client that is gone marks the tracking client (flag R,
//! `broken_redirect`) and tells it so with a `tracking-redir-broken` push (RESP3). FLUSHALL,
//! FLUSHDB (and SWAPDB, which Redis leaves out) send every tracking client a null: "all your
//! keys".
//!
//! Bounded: `tracking-table-max-keys` caps the keys remembered; beyond it, keys are
//! forgotten (their clients invalidated as if written) in growing batches after each group
//! and by the clients cron (Redis's `trackingLimitUsedSlots`). The table holds client ids and
//! is cleaned lazily: a message to a client that is gone, or no longer tracks, is dropped at
//! delivery; when no client tracks any more the table is emptied.
//!
//! Nothing here is persistent: a restart ends every connection and with it its tracking (a
//! client that reconnects must flush its cache, as with Redis).

use crate::commands::{upper, Client, Ctx, Spec, E_SYNTAX};
use crate::resp;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;

/// The channel a RESP2 client subscribes to for redirected invalidations.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// A client's tracking state (Redis's `CLIENT_TRACKING*` flags and fields).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTracking {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    /// CLIENT CACHING yes (OPTIN) or no (OPTOUT) was given for the next command (or the next
    /// MULTI ... EXEC).
    pub caching: bool,
    pub noloop: bool,
    /// The client it redirects to is gone (flag R).
    pub broken_redir: bool,
    /// The client the messages go to; 0: this one.
    pub redirect: u64,
    /// BCAST prefixes, sorted (the empty prefix when none was given).
    pub prefixes: Vec<Vec<u8>>,
}

impl ClientTracking {
    /// The keys of this client's read-only commands are remembered now (on, not BCAST, and
    /// OPTIN/OPTOUT's CACHING choice allows it: Redis's check in `trackingRememberKeys`).
    #[inline]
    pub fn remembers(&self) -> bool {
        self.on && !self.bcast && !((self.optin && !self.caching) || (self.optout && self.caching))
    }
}

/// What an invalidation says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// One key (a write, an expiry, a key forgotten for the table's limit).
    Key(Vec<u8>),
    /// Every key (FLUSHALL, FLUSHDB, SWAPDB): a null.
    All,
    /// A BCAST prefix's keys, encoded as an array in `Tracking::bodies[range]`.
    Keys(Range<usize>),
}

/// An invalidation for the tracking client `to` (0 with [`What::All`]: for every tracking
/// client).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub to: u64,
    /// The client whose command caused it (0: none, as active expiry): a NOLOOP client is
    /// not told of its own writes.
    pub current: u64,
    pub what: What,
}

/// A BCAST prefix: the clients that registered it, and the keys written since the last
/// broadcast, each with the client that wrote it last (0: none).
#[derive(Debug, Default)]
struct Prefix {
    clients: BTreeSet<u64>,
    keys: BTreeMap<Vec<u8>, u64>,
}

/// The server's side of tracking.
#[derive(Debug, Default)]
pub struct Tracking {
    /// Key -> the clients that may cache it (sorted ids).
    table: HashMap<Vec<u8>, Vec<u64>>,
    /// Ids in the table, all keys together (INFO's tracking_total_items).
    items: u64,
    prefixes: BTreeMap<Vec<u8>, Prefix>,
    /// Clients with tracking on (INFO's tracking_clients).
    clients: usize,
    /// Messages waiting for their group's commit.
    pub outbox: Vec<Message>,
    pub bodies: Vec<u8>,
    /// Rounds in a row the table's limit was not reached (the next round evicts more).
    evict_rounds: u32,
    /// A client's tracking changed in the running group (a failed group recounts from the
    /// clients it restored).
    pub changed: bool,
    /// The client whose command runs at the top level (Redis's `current_client`): 0 outside
    /// commands.
    pub current: u64,
    /// While a tracking client's script runs: its id and the script's declared keys, which a
    /// read-only command of the script makes remembered (Redis's rule for scripts).
    pub script: Option<(u64, Vec<Vec<u8>>)>,
}

impl Tracking {
    /// Some client tracks: writes must note their keys.
    #[inline]
    pub fn active(&self) -> bool {
        self.clients > 0
    }

    /// INFO's tracking_clients.
    pub fn clients(&self) -> usize {
        self.clients
    }

    /// INFO's tracking_total_keys, tracking_total_items, tracking_total_prefixes.
    pub fn totals(&self) -> (usize, u64, usize) {
        (self.table.len(), self.items, self.prefixes.len())
    }

    /// Remember that client `id` may cache `key`.
    fn remember(&mut self, id: u64, key: &[u8]) {
        let ids = match self.table.get_mut(key) {
            Some(ids) => ids,
            None => self.table.entry(key.to_vec()).or_default(),
        };
        if let Err(at) = ids.binary_search(&id) {
            ids.insert(at, id);
            self.items += 1;
        }
    }

    /// `key` changed (Redis's `trackingInvalidateKey`): queue a message for each client that
    /// may cache it and forget them; note it for the BCAST prefixes it matches (`writer`: the
    /// client whose command wrote it, 0 for an expiry; `bcast` false for a key forgotten for
    /// the table's limit, which did not change).
    fn invalidate(&mut self, key: &[u8], writer: u64, current: u64, bcast: bool) {
        if bcast && !self.prefixes.is_empty() {
            for (p, st) in self.prefixes.iter_mut() {
                if key.starts_with(p) {
                    match st.keys.get_mut(key) {
                        Some(w) => *w = writer,
                        None => {
                            st.keys.insert(key.to_vec(), writer);
                        }
                    }
                }
            }
        }
        let Some(ids) = self.table.remove(key) else {
            return;
        };
        self.items -= ids.len() as u64;
        for id in ids {
            self.outbox.push(Message {
                to: id,
                current,
                what: What::Key(key.to_vec()),
            });
        }
    }

    /// Every key changed (FLUSHALL, FLUSHDB, SWAPDB): a null for every tracking client, and
    /// the table is emptied (Redis's `trackingInvalidateKeysOnFlush`).
    fn invalidate_all(&mut self, current: u64) {
        if self.clients > 0 {
            self.outbox.push(Message {
                to: 0,
                current,
                what: What::All,
            });
        }
        self.table = HashMap::new();
        self.items = 0;
    }

    /// Forget keys beyond `tracking-table-max-keys` (`max`, 0: no limit): up to 100 keys
    /// times the rounds in a row the limit was missed, each invalidated for its clients
    /// (Redis's `trackingLimitUsedSlots`).
    pub fn limit(&mut self, max: u64) {
        if max == 0 || self.table.len() as u64 <= max {
            self.evict_rounds = 0;
            return;
        }
        let effort = 100 * (self.evict_rounds as usize + 1);
        let over = self.table.len() - max as usize;
        let victims: Vec<Vec<u8>> = self.table.keys().take(effort.min(over)).cloned().collect();
        for k in victims {
            self.invalidate(&k, 0, 0, false);
        }
        if self.table.len() as u64 <= max {
            self.evict_rounds = 0;
        } else {
            self.evict_rounds += 1;
        }
    }

    /// The keys written under BCAST prefixes since the last call, as one message per prefix
    /// and client (Redis's `trackingBroadcastInvalidationMessages`); `noloop(id)`: client
    /// `id` is in NOLOOP mode, and is not sent the keys it wrote itself.
    pub fn broadcast(&mut self, noloop: impl Fn(u64) -> bool) {
        let Tracking {
            prefixes,
            outbox,
            bodies,
            ..
        } = self;
        for st in prefixes.values_mut() {
            if st.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut st.keys);
            let mut common: Option<Range<usize>> = None;
            for &id in &st.clients {
                let range = if noloop(id) {
                    match encode_keys(bodies, &keys, id) {
                        Some(r) => r,
                        None => continue,
                    }
                } else {
                    common
                        .get_or_insert_with(|| {
                            encode_keys(bodies, &keys, 0).expect("keys is not empty")
                        })
                        .clone()
                };
                outbox.push(Message {
                    to: id,
                    current: 0,
                    what: What::Keys(range),
                });
            }
        }
    }

    /// Some BCAST prefix has keys to send.
    pub fn broadcast_due(&self) -> bool {
        self.prefixes.values().any(|p| !p.keys.is_empty())
    }

    /// The messages were delivered.
    pub fn delivered(&mut self) {
        self.outbox.clear();
        self.bodies.clear();
    }

    /// Client `cl` is gone, or turns tracking off (Redis's `disableTracking`): its prefixes
    /// are released; its ids in the table go lazily.
    pub fn forget(&mut self, cl: &Client) {
        if !cl.tracking.on {
            return;
        }
        for p in &cl.tracking.prefixes {
            if let Some(st) = self.prefixes.get_mut(p) {
                st.clients.remove(&cl.id);
                if st.clients.is_empty() {
                    self.prefixes.remove(p);
                }
            }
        }
        self.clients -= 1;
        if self.clients == 0 {
            self.table = HashMap::new();
            self.items = 0;
        }
    }

    /// The clients and prefixes again from the clients' own state (after a failed group
    /// restored them); the table and the pending keys stay.
    pub fn rebuild<'a>(&mut self, clients: impl Iterator<Item = &'a Client>) {
        let mut pending: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, u64>> =
            std::mem::take(&mut self.prefixes)
                .into_iter()
                .map(|(p, st)| (p, st.keys))
                .collect();
        self.clients = 0;
        for cl in clients.filter(|c| c.tracking.on) {
            self.clients += 1;
            for p in &cl.tracking.prefixes {
                let st = self.prefixes.entry(p.clone()).or_insert_with(|| Prefix {
                    keys: pending.remove(p).unwrap_or_default(),
                    ..Prefix::default()
                });
                st.clients.insert(cl.id);
            }
        }
        if self.clients == 0 {
            self.table = HashMap::new();
            self.items = 0;
        }
        self.changed = false;
    }
}

/// `keys` (each with its last writer) as a RESP array, leaving out those `skip` wrote (when
/// not 0), appended to `bodies`: its range, or None when no key is left.
fn encode_keys(
    bodies: &mut Vec<u8>,
    keys: &BTreeMap<Vec<u8>, u64>,
    skip: u64,
) -> Option<Range<usize>> {
    let n = keys.values().filter(|&&w| skip == 0 || w != skip).count();
    if n == 0 {
        return None;
    }
    let start = bodies.len();
    resp::array(bodies, n);
    for (k, &w) in keys {
        if skip == 0 || w != skip {
            resp::bulk(bodies, k);
        }
    }
    Some(start..bodies.len())
}

/// The keys the command just run wrote (noted by `Keyspace::touch`): invalidate them.
/// `writer`: the client that ran it (a script's own client inside a script; 0 for active
/// expiry).
pub fn keys_written(
    ks: &mut crate::keyspace::Keyspace,
    sv: &mut crate::commands::ServerState,
    writer: u64,
) {
    let current = sv.tracking.current;
    for (key, expired) in std::mem::take(&mut ks.touched) {
        // An expiry has no writer (Redis's `signalModifiedKey(NULL, ...)`), but a NOLOOP
        // client still is not told of one its own command caused (`current_client`).
        let w = if expired { 0 } else { writer };
        sv.tracking.invalidate(&key, w, current, true);
    }
}

/// After a command of `cl` ran: remember the keys a read-only command read (Redis's
/// `trackingRememberKeys`, called from `call`). Read-only scripts (EVAL_RO, FCALL_RO) are
/// left out: their read commands make their declared keys remembered instead.
pub fn after_read(sv: &mut crate::commands::ServerState, cl: &Client, args: &[&[u8]]) {
    let Some(cmd) = crate::admin::meta::lookup_argv(args) else {
        return;
    };
    if !cmd.has("readonly")
        || cmd.has("pubsub")
        || matches!(cmd.name.as_str(), "eval_ro" | "evalsha_ro" | "fcall_ro")
    {
        return;
    }
    for (pos, _) in cmd.keys(args).unwrap_or_default() {
        if let Some(k) = args.get(pos) {
            sv.tracking.remember(cl.id, k);
        }
    }
}

/// A read-only command ran inside a script of a tracking client: its declared keys are
/// remembered for it.
pub fn script_read(sv: &mut crate::commands::ServerState, spec: &Spec) {
    if !spec.has("readonly") {
        return;
    }
    if let Some((id, keys)) = sv.tracking.script.take() {
        for k in &keys {
            sv.tracking.remember(id, k);
        }
        sv.tracking.script = Some((id, keys));
    }
}

/// FLUSHALL, FLUSHDB, SWAPDB ran: every tracking client is told its keys are invalid.
pub fn flushed(c: &mut Ctx) {
    let current = c.sv.tracking.current;
    c.sv.tracking.invalidate_all(current);
}

/// Turn tracking off for `c`'s client (CLIENT TRACKING OFF, RESET).
pub fn disable(c: &mut Ctx) {
    if c.cl.tracking.on {
        c.sv.tracking.forget(c.cl);
        c.sv.tracking.changed = true;
        c.cl.tracking = ClientTracking::default();
        c.ks.track = c.sv.tracking.active();
    }
}

/// Two prefixes that would both match some key (one starts the other).
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP]
/// (networking.c's checks, in its order); `ids`: the clients connected.
pub fn client_tracking(c: &mut Ctx, a: &[&[u8]], ids: &[u64]) -> daisy::Result<()> {
    let mut redirect: i64 = 0;
    let (mut bcast, mut optin, mut optout, mut noloop) = (false, false, false, false);
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut j = 3;
    while j < a.len() {
        let more = a.len() - 1 - j > 0;
        match &upper(a[j])[..] {
            b"REDIRECT" if more => {
                j += 1;
                if redirect != 0 {
                    return c.err("ERR A client can only redirect to a single other client");
                }
                let Some(id) = crate::commands::parse_i64(a[j]) else {
                    return c.err(crate::commands::E_INT);
                };
                if id <= 0 || !ids.contains(&(id as u64)) {
                    return c.err("ERR The client ID you want redirect to does not exist");
                }
                redirect = id;
            }
            b"BCAST" => bcast = true,
            b"OPTIN" => optin = true,
            b"OPTOUT" => optout = true,
            b"NOLOOP" => noloop = true,
            b"PREFIX" if more => {
                j += 1;
                prefixes.push(a[j]);
            }
            _ => return c.err(E_SYNTAX),
        }
        j += 1;
    }
    match &upper(a[2])[..] {
        b"ON" => {}
        b"OFF" => {
            disable(c);
            resp::ok(c.out);
            return Ok(());
        }
        _ => return c.err(E_SYNTAX),
    }
    let t = &c.cl.tracking;
    if !bcast && !prefixes.is_empty() {
        return c.err("ERR PREFIX option requires BCAST mode to be enabled");
    }
    if t.on && t.bcast != bcast {
        return c.err(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, \
             and then re-enabling it with a different mode.",
        );
    }
    if bcast && (optin || optout) {
        return c.err("ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    if optin && optout {
        return c.err("ERR You can't specify both OPTIN mode and OPTOUT mode");
    }
    if (optin && t.optout) || (optout && t.optin) {
        return c.err(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, \
             and then re-enabling it with a different mode.",
        );
    }
    if bcast {
        for (i, p) in prefixes.iter().enumerate() {
            if let Some(old) = t.prefixes.iter().find(|q| overlap(q, p)) {
                let msg = format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    crate::commands::lossy(p),
                    crate::commands::lossy(old)
                );
                return c.err(&msg);
            }
            if let Some(q) = prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                let msg = format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    crate::commands::lossy(p),
                    crate::commands::lossy(q)
                );
                return c.err(&msg);
            }
        }
    }
    // Redis's `enableTracking`: the flags are set anew (CACHING stays), BCAST prefixes add
    // to those the client has.
    let id = c.cl.id;
    let sv = &mut c.sv.tracking;
    let t = &mut c.cl.tracking;
    if !t.on {
        sv.clients += 1;
    }
    sv.changed = true;
    t.on = true;
    t.bcast = bcast;
    t.optin = optin;
    t.optout = optout;
    t.noloop = noloop;
    t.broken_redir = false;
    t.redirect = redirect as u64;
    if bcast {
        let empty: [&[u8]; 1] = [b""];
        let wanted: &[&[u8]] = if prefixes.is_empty() {
            &empty
        } else {
            &prefixes
        };
        for p in wanted {
            sv.prefixes
                .entry(p.to_vec())
                .or_default()
                .clients
                .insert(id);
            if let Err(at) = t.prefixes.binary_search_by(|q| q.as_slice().cmp(p)) {
                t.prefixes.insert(at, p.to_vec());
            }
        }
    }
    c.ks.track = true;
    resp::ok(c.out);
    Ok(())
}

/// CLIENT CACHING YES|NO.
pub fn client_caching(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let t = &mut c.cl.tracking;
    if !t.on {
        return c.err(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with \
             OPTIN or OPTOUT mode enabled",
        );
    }
    match &upper(a[2])[..] {
        b"YES" if t.optin => t.caching = true,
        b"YES" => {
            return c.err(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            )
        }
        b"NO" if t.optout => t.caching = true,
        b"NO" => {
            return c.err(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            )
        }
        _ => return c.err(E_SYNTAX),
    }
    resp::ok(c.out);
    Ok(())
}

/// CLIENT GETREDIR.
pub fn client_getredir(c: &mut Ctx) {
    let t = &c.cl.tracking;
    resp::int(c.out, if t.on { t.redirect as i64 } else { -1 });
}

/// CLIENT TRACKINGINFO.
pub fn client_trackinginfo(c: &mut Ctx) {
    let t = c.cl.tracking.clone();
    let mut flags: Vec<&[u8]> = vec![if t.on { b"on" } else { b"off" }];
    if t.bcast {
        flags.push(b"bcast");
    }
    if t.optin {
        flags.push(b"optin");
        if t.caching {
            flags.push(b"caching-yes");
        }
    }
    if t.optout {
        flags.push(b"optout");
        if t.caching {
            flags.push(b"caching-no");
        }
    }
    if t.noloop {
        flags.push(b"noloop");
    }
    if t.broken_redir {
        flags.push(b"broken_redirect");
    }
    c.map(3);
    resp::bulk(c.out, b"flags");
    c.set_header(flags.len());
    for f in flags {
        resp::bulk(c.out, f);
    }
    resp::bulk(c.out, b"redirect");
    resp::int(c.out, if t.on { t.redirect as i64 } else { -1 });
    resp::bulk(c.out, b"prefixes");
    resp::array(c.out, t.prefixes.len());
    for p in &t.prefixes {
        resp::bulk(c.out, p);
    }
}

/// The header of an invalidation for a receiver: a push in RESP3, a pub/sub message on
/// [`CHANNEL`] for a RESP2 subscriber a client redirects to; None: nothing can be sent to it
/// (RESP2 without a redirection: RESP2 has no pushes).
pub fn header(out: &mut Vec<u8>, resp3: bool, redirected: bool, subscriber: bool) -> bool {
    if resp3 {
        out.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else if redirected && subscriber {
        resp::array(out, 3);
        resp::bulk(out, b"message");
        resp::bulk(out, CHANNEL);
    } else {
        return false;
    }
    true
}

/// The push that tells a RESP3 client its redirection target is gone.
pub fn redir_broken(out: &mut Vec<u8>, redirect: u64) {
    out.extend_from_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n");
    resp::int(out, redirect as i64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_invalidates_each_reader_once() {
        let mut t = Tracking {
            clients: 2,
            ..Default::default()
        };
        t.remember(7, b"k");
        t.remember(3, b"k");
        t.remember(7, b"k");
        assert_eq!(t.totals(), (1, 2, 0));
        t.invalidate(b"k", 9, 9, true);
        assert_eq!(t.totals(), (0, 0, 0));
        let to: Vec<u64> = t.outbox.iter().map(|m| m.to).collect();
        assert_eq!(to, [3, 7]);
        t.outbox.clear();
        t.invalidate(b"k", 9, 9, true);
        assert!(t.outbox.is_empty(), "forgotten after the first write");
    }

    #[test]
    fn bcast_groups_keys_per_prefix_and_noloop_skips_own_writes() {
        let mut t = Tracking {
            clients: 2,
            ..Default::default()
        };
        t.prefixes
            .entry(b"a:".to_vec())
            .or_default()
            .clients
            .insert(1);
        t.prefixes
            .entry(b"a:".to_vec())
            .or_default()
            .clients
            .insert(2);
        t.invalidate(b"a:2", 1, 1, true);
        t.invalidate(b"a:1", 2, 2, true);
        t.invalidate(b"b:1", 2, 2, true);
        t.broadcast(|id| id == 1);
        assert_eq!(t.outbox.len(), 2);
        let body = |m: &Message| match &m.what {
            What::Keys(r) => t.bodies[r.clone()].to_vec(),
            w => panic!("{w:?}"),
        };
        // Client 1 (NOLOOP) wrote a:2: it gets a:1 only; client 2 gets both, sorted.
        assert_eq!(body(&t.outbox[0]), b"*1\r\n$3\r\na:1\r\n");
        assert_eq!(body(&t.outbox[1]), b"*2\r\n$3\r\na:1\r\n$3\r\na:2\r\n");
        assert!(!t.broadcast_due());
    }

    #[test]
    fn the_table_limit_evicts_in_growing_batches() {
        let mut t = Tracking {
            clients: 1,
            ..Default::default()
        };
        for i in 0..250 {
            t.remember(1, format!("k{i}").as_bytes());
        }
        t.limit(1);
        assert_eq!(t.totals().0, 150, "100 in the first round");
        t.limit(1);
        assert_eq!(t.totals().0, 1, "up to 200 in the second");
        assert_eq!(t.outbox.len(), 249);
    }

    #[test]
    fn prefixes_overlap_when_one_starts_the_other() {
        assert!(overlap(b"FOO", b"FOOBAR"));
        assert!(overlap(b"FOOBAR", b"FOO"));
        assert!(overlap(b"", b"x"));
        assert!(!overlap(b"FOO", b"BAR"));
    }
}
