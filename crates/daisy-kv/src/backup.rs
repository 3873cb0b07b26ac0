//! SAVE, BGSAVE and LASTSAVE: online backups of the served pool.
//!
//! Every acknowledged write is already durable in the pool, so Redis's reason for saving (an
//! RDB file as the durable copy) does not exist here; its other use does: a backup, a file
//! that can be kept elsewhere and served later. `cp` of a live pool is not one (it mixes
//! states; see `daisy::Backup`). BGSAVE and SAVE write a consistent copy of the pool, itself a
//! pool, to `dir`/`dbfilename` (by default the pool's directory and `<pool file>.backup`),
//! replacing the previous backup atomically. Restoring is serving the copy:
//! `daisy serve --pool <backup>`.
//!
//! BGSAVE replies at once (as Redis's "Background saving started"); the event loop starts the
//! backup once the command's transaction committed, lets the copier thread copy while clients
//! are served, and finishes it between two transactions (the pause, measured and shown in INFO
//! as `daisy_backup_last_pause_us`). SAVE does the same without serving anyone meanwhile and
//! replies when the copy is in place. A failed background save is logged and shown as
//! `rdb_last_bgsave_status:err`, as in Redis.

use crate::commands::{Ctx, E_SYNTAX};
use crate::config::Config;
use crate::resp;
use std::fmt::Write as _;
use std::path::PathBuf;

/// What SAVE or BGSAVE asked the event loop to do once its transaction commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveKind {
    /// SAVE: back up now, then reply.
    Save,
    /// BGSAVE: start a background backup (the reply was sent).
    Bgsave,
}

/// Backup state and history (INFO persistence, LASTSAVE).
#[derive(Clone, Debug)]
pub struct SaveState {
    /// Set by SAVE/BGSAVE; taken by the event loop after the command's transaction.
    pub request: Option<SaveKind>,
    /// A background backup runs since (ms since the epoch).
    pub running_since_ms: Option<i64>,
    /// BGSAVE SCHEDULE while one runs: start another when it ends.
    pub scheduled: bool,
    /// Unix time of the last successful backup (the start time until there is one, as Redis).
    pub last_save_s: i64,
    pub last_ok: bool,
    /// Seconds the last background backup took (-1: none yet).
    pub last_secs: i64,
    /// Successful backups.
    pub saves: u64,
    pub last_pause_us: u64,
    pub last_bytes: u64,
    pub last_path: String,
    pub last_error: String,
    /// The keyspace's change count (`Keyspace::dirty`) the last backup holds: INFO's
    /// rdb_changes_since_last_save is the count now less this.
    pub dirty_saved: u64,
}

impl SaveState {
    pub fn new(now_ms: i64) -> SaveState {
        SaveState {
            request: None,
            running_since_ms: None,
            scheduled: false,
            last_save_s: now_ms / 1000,
            last_ok: true,
            last_secs: -1,
            saves: 0,
            last_pause_us: 0,
            last_bytes: 0,
            last_path: String::new(),
            last_error: String::new(),
            dirty_saved: 0,
        }
    }

    /// Record a finished backup (or its failure); `dirty`: the keyspace's change count when
    /// the copy's state was taken. A backup holds the state at its end (the pause), not at
    /// its start as a forked Redis's snapshot does, so every change counted until then is
    /// in it (Redis subtracts the count at the fork instead).
    pub fn finished(&mut self, now_ms: i64, r: &Result<daisy::BackupReport, String>, dirty: u64) {
        if let Some(since) = self.running_since_ms.take() {
            self.last_secs = (now_ms - since) / 1000;
        }
        match r {
            Ok(rep) => {
                self.last_ok = true;
                self.last_save_s = now_ms / 1000;
                self.saves += 1;
                self.last_pause_us = rep.pause.as_micros() as u64;
                self.last_bytes = rep.file_size;
                self.last_path = rep.path.display().to_string();
                self.last_error.clear();
                self.dirty_saved = dirty;
            }
            Err(e) => {
                self.last_ok = false;
                self.last_error = e.clone();
            }
        }
    }

    /// INFO persistence's save fields (Redis's names, then Daisy's).
    pub fn info(&self, now_ms: i64, t: &mut String) {
        let _ = write!(
            t,
            "rdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\n\
             rdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\n",
            u8::from(self.running_since_ms.is_some()),
            self.last_save_s,
            if self.last_ok { "ok" } else { "err" },
            self.last_secs,
            self.running_since_ms.map_or(-1, |s| (now_ms - s) / 1000),
            self.saves,
        );
        let _ = write!(
            t,
            "daisy_backup_last_path:{}\r\ndaisy_backup_last_bytes:{}\r\n\
             daisy_backup_last_pause_us:{}\r\ndaisy_backup_last_error:{}\r\n",
            self.last_path, self.last_bytes, self.last_pause_us, self.last_error,
        );
    }
}

/// Where SAVE and BGSAVE write: `dir`/`dbfilename`.
pub fn destination(config: &Config) -> PathBuf {
    let dir = config.get("dir").unwrap_or("");
    let name = config.get("dbfilename").unwrap_or("dump.pool");
    if dir.is_empty() {
        PathBuf::from(name)
    } else {
        PathBuf::from(dir).join(name)
    }
}

/// SAVE: the event loop backs up once this command's transaction commits, then replies.
pub fn save(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    if c.sv.save.running_since_ms.is_some() {
        return c.err("ERR Background save already in progress");
    }
    c.sv.save.request = Some(SaveKind::Save);
    Ok(())
}

/// BGSAVE [SCHEDULE].
pub fn bgsave(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let schedule = match a.len() {
        1 => false,
        2 if a[1].eq_ignore_ascii_case(b"SCHEDULE") => true,
        _ => return c.err(E_SYNTAX),
    };
    if c.sv.save.running_since_ms.is_some() || c.sv.save.request.is_some() {
        if schedule {
            c.sv.save.scheduled = true;
            resp::simple(c.out, "Background saving scheduled");
            return Ok(());
        }
        return c.err("ERR Background save already in progress");
    }
    c.sv.save.request = Some(SaveKind::Bgsave);
    resp::simple(c.out, "Background saving started");
    Ok(())
}

/// LASTSAVE: when the last backup succeeded (the server's start until then, as Redis).
pub fn lastsave(c: &mut Ctx, _a: &[&[u8]]) -> daisy::Result<()> {
    resp::int(c.out, c.sv.save.last_save_s);
    Ok(())
}
