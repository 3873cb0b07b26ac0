//! MULTI, EXEC, DISCARD, WATCH, UNWATCH (Redis's multi.c), with one guarantee Redis cannot
//! give: an EXEC's commands run inside one Daisy transaction (the event loop's group
//! transaction: a group never ends inside a command, and EXEC is one command), so after a
//! crash all of them or none of them are there, and EXEC's reply leaves only once that
//! transaction is durable. If the transaction fails (a full pool, more than one redo record
//! can hold), nothing of the EXEC is stored and EXEC answers with the error.
//!
//! Queuing is done by `commands::execute`: inside MULTI every command but EXEC, DISCARD,
//! MULTI, WATCH, QUIT and RESET is checked (unknown, arity, `no_multi`) and queued; a refused
//! one marks the transaction, and EXEC then answers EXECABORT. WATCH state lives in the
//! keyspace (`keyspace::Watches`): every write touches the keys it changed, and a client whose
//! watched key was touched (or expired since it watched it) gets a null EXEC.

use crate::commands::{self, Ctx, Multi};
use crate::resp;

pub fn multi(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    if c.cl.multi.is_some() {
        return c.err("ERR MULTI calls can not be nested");
    }
    c.cl.multi = Some(Multi::with_capacity());
    resp::ok(c.out);
    Ok(())
}

pub fn discard(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    if c.cl.multi.take().is_none() {
        return c.err("ERR DISCARD without MULTI");
    }
    c.ks.watches.unwatch_all(c.cl.id);
    resp::ok(c.out);
    Ok(())
}

/// Whether a key `client` watches (not already expired when watched) has expired since
/// (Redis's `isWatchedKeyExpired`).
fn watched_key_expired(c: &mut Ctx) -> daisy::Result<bool> {
    let id = c.cl.id;
    let keys: Vec<(u32, Vec<u8>)> = c.ks.watches.watched_by(id).to_vec();
    for (db, k) in keys {
        if c.ks.watches.watched_expired(id, db, &k) {
            continue;
        }
        if let Some(v) = c.ks.peek(c.tx, db as usize, &k)? {
            if v.expire_ms.is_some_and(|t| t < c.now_ms) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

pub fn exec(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    let Some(m) = c.cl.multi.take() else {
        return c.err("ERR EXEC without MULTI");
    };
    let id = c.cl.id;
    if !c.ks.watches.is_dirty(id) && watched_key_expired(c)? {
        c.ks.watches.mark_dirty(id);
    }
    let dirty = c.ks.watches.is_dirty(id);
    c.ks.watches.unwatch_all(id);
    if m.error {
        return c.err("EXECABORT Transaction discarded because of previous errors.");
    }
    if dirty {
        c.null_array();
        return Ok(());
    }
    resp::array(c.out, m.len());
    // A blocking command inside EXEC answers at once, as if its timeout passed.
    c.cl.deny_blocking = true;
    let r = exec_queued(c, &m);
    c.cl.deny_blocking = false;
    r
}

fn exec_queued(c: &mut Ctx, m: &Multi) -> daisy::Result<()> {
    let argv = m.argv();
    for (spec, r) in m.commands() {
        let args = &argv[r];
        if let Some(e) = crate::acl::check_queued(c, spec, args) {
            c.err(&e)?;
            continue;
        }
        let action = commands::call(c.table, spec, c.ks, c.tx, c.cl, c.sv, args, c.now_ms, c.out)?;
        if action != commands::Action::Continue {
            c.action = action;
        }
    }
    Ok(())
}

pub fn watch(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    if c.cl.multi.is_some() {
        return c.err("ERR WATCH inside MULTI is not allowed");
    }
    let id = c.cl.id;
    if !c.ks.watches.is_dirty(id) {
        let db = c.db();
        for k in &a[1..] {
            let expired =
                c.ks.peek(c.tx, db, k)?
                    .is_some_and(|v| v.expire_ms.is_some_and(|t| t < c.now_ms));
            c.ks.watches.watch(id, db as u32, k, expired);
        }
    }
    resp::ok(c.out);
    Ok(())
}

pub fn unwatch(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    c.ks.watches.unwatch_all(c.cl.id);
    resp::ok(c.out);
    Ok(())
}
