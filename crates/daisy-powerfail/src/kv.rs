//! The KV server's workload under the simulator: numbered transactions, each a group of one
//! to six real server commands (SET, SET PX, DEL, INCR, APPEND, MSET, EXPIRE, PERSIST run by
//! `daisy_kv::cmd::execute`, as the event loop's group commit runs them), on a keyspace pool.
//!
//! The model replays the same commands (a function of the seed and the transaction id) on a
//! `BTreeMap`; a crash image must recover to a keyspace that passes `pool check` (records,
//! expiry count, reachability) and equals the model after the transactions that returned,
//! or after the one in flight too.

use anyhow::{anyhow, bail, Result};
use daisy::{Pool, PoolOptions};
use daisy_kv::cmd::{self, Client, ServerState};
use daisy_kv::store::{self, Store, LAYOUT};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;

/// Payload and whether an expiry time is set, per key.
type Keys = BTreeMap<Vec<u8>, (Vec<u8>, bool)>;

/// The keyspace after `applied` transactions.
#[derive(Clone, Debug, Default)]
pub struct KvModel {
    pub applied: u64,
    pub keys: Keys,
}

/// The commands of transaction `id`.
pub fn commands(seed: u64, id: u64) -> Vec<Vec<Vec<u8>>> {
    let mut rng = SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0xA076_1D64_78BD_642F));
    let key = |rng: &mut SmallRng| format!("k{}", rng.gen_range(0..12)).into_bytes();
    let value = |rng: &mut SmallRng| {
        // Mostly small; now and then a few KB (a new, larger block).
        let n = if rng.gen_range(0..10) == 0 {
            rng.gen_range(1000..5000)
        } else {
            rng.gen_range(1..80)
        };
        vec![b'a' + rng.gen_range(0..26u8); n]
    };
    let v = |s: &str| s.as_bytes().to_vec();
    (0..rng.gen_range(1..=6))
        .map(|_| match rng.gen_range(0..9) {
            0 | 1 => vec![v("SET"), key(&mut rng), value(&mut rng)],
            2 => vec![
                v("SET"),
                key(&mut rng),
                value(&mut rng),
                v("PX"),
                v("3600000"),
            ],
            3 => vec![v("DEL"), key(&mut rng)],
            4 => vec![v("INCR"), v("counter")],
            5 => vec![v("APPEND"), key(&mut rng), value(&mut rng)],
            6 => vec![
                v("MSET"),
                key(&mut rng),
                value(&mut rng),
                key(&mut rng),
                value(&mut rng),
            ],
            7 => vec![v("EXPIRE"), key(&mut rng), v("3600")],
            _ => vec![v("PERSIST"), key(&mut rng)],
        })
        .collect()
}

fn apply(m: &mut Keys, cmd: &[Vec<u8>]) {
    match &cmd[0][..] {
        b"SET" => {
            m.insert(cmd[1].clone(), (cmd[2].clone(), cmd.len() > 3));
        }
        b"DEL" => {
            m.remove(&cmd[1]);
        }
        b"INCR" => {
            let e = m.entry(cmd[1].clone()).or_insert((b"0".to_vec(), false));
            let n: i64 = String::from_utf8_lossy(&e.0).parse().unwrap_or(0);
            e.0 = (n + 1).to_string().into_bytes();
        }
        b"APPEND" => {
            m.entry(cmd[1].clone())
                .or_insert((Vec::new(), false))
                .0
                .extend_from_slice(&cmd[2]);
        }
        b"MSET" => {
            for kv in cmd[1..].chunks(2) {
                m.insert(kv[0].clone(), (kv[1].clone(), false));
            }
        }
        b"EXPIRE" => {
            if let Some(e) = m.get_mut(&cmd[1]) {
                e.1 = true;
            }
        }
        b"PERSIST" => {
            if let Some(e) = m.get_mut(&cmd[1]) {
                e.1 = false;
            }
        }
        other => unreachable!("{other:?}"),
    }
}

impl KvModel {
    pub fn advance_to(&mut self, seed: u64, id: u64) {
        while self.applied < id {
            self.applied += 1;
            for c in commands(seed, self.applied) {
                apply(&mut self.keys, &c);
            }
        }
    }
}

/// Recover the image at `path` and compare it with `model` (transactions that returned) or
/// `next` (and the one in flight); Ok: the transactions the image holds. (When both states
/// are equal, the one in flight changed nothing the keyspace shows, so running it again from
/// here gives the same state: either count is right.)
pub fn verify(path: &Path, model: &KvModel, next: &KvModel) -> Result<u64> {
    let pool =
        Pool::open_snapshot(path, Some(LAYOUT)).map_err(|e| anyhow!("recovery failed: {e}"))?;
    let (reach, problems) = store::check(&pool).map_err(|e| anyhow!("{e}"))?;
    if let Some(p) = problems.first() {
        bail!("keyspace check: {p}");
    }
    let rep = pool.check(Some(&reach));
    if let Some(p) = rep.problems.first() {
        bail!("pool check: {p}");
    }
    let got = store::dump(&pool).map_err(|e| anyhow!("{e}"))?;
    if got == model.keys {
        return Ok(model.applied);
    }
    if got == next.keys {
        return Ok(next.applied);
    }
    let diff: Vec<String> = model
        .keys
        .keys()
        .chain(got.keys())
        .filter(|k| got.get(*k) != model.keys.get(*k))
        .take(3)
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    Err(anyhow!(
        "keyspace is neither the state after transaction {} nor after {}; keys differing from the first: {diff:?}",
        model.applied, next.applied
    ))
}

/// The workload's pool, keyspace and server state.
pub struct KvWork {
    pub pool: Pool,
    store: Store,
    sv: ServerState,
    cl: Client,
    table: cmd::Table,
}

impl KvWork {
    /// A new keyspace pool for the workload (small, growing on demand; 8 log slots per lane).
    pub fn create_pool(path: &Path) -> Result<Pool> {
        Pool::create(
            path,
            &PoolOptions::new(LAYOUT)
                .size(1 << 20)
                .max_size(32 << 20)
                .lanes(2)
                .log_slots_per_lane(8),
        )
        .map_err(anyhow::Error::from)
    }

    /// The workload on `pool` (a new keyspace is created in it on first use).
    pub fn open(pool: &Pool) -> Result<KvWork> {
        let pool = pool.clone();
        let store = Store::open(&pool).map_err(|e| anyhow!("{e}"))?;
        let sv = ServerState::new(&pool, 0);
        Ok(KvWork {
            pool,
            store,
            sv,
            cl: Client::default(),
            table: cmd::Table::new(),
        })
    }

    /// Run transaction `id`: its commands in one transaction, replies checked for errors.
    pub fn run_tx(&mut self, seed: u64, id: u64) -> Result<()> {
        let cmds = commands(seed, id);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let pool = self.pool.clone();
        let mut out = Vec::new();
        pool.transaction(|tx| {
            for c in &cmds {
                let args: Vec<&[u8]> = c.iter().map(|a| &a[..]).collect();
                cmd::execute(
                    &self.table,
                    &mut self.store,
                    tx,
                    &mut self.cl,
                    &mut self.sv,
                    &args,
                    now,
                    &mut out,
                )?;
            }
            Ok::<_, daisy::Error>(())
        })?;
        if out.first() == Some(&b'-') || out.windows(3).any(|w| w == b"\r\n-") {
            bail!(
                "transaction {id}: an error reply: {}",
                String::from_utf8_lossy(&out)
            );
        }
        Ok(())
    }
}
