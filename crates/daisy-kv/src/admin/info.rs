//! INFO (server.c's `genRedisInfoString`): every field Redis 7.0 prints, in its sections and
//! order, with this server's values where it has them (the keyspace's memory is the pool's;
//! there is no fork, no replication, no scripting: those read 0), and Daisy's own fields
//! (`daisy_*`) at the end of their sections.

use super::meta;
use crate::commands::{lossy, Ctx, COMMANDS};
use crate::resp;
use std::fmt::Write as _;

/// The sections INFO prints with no argument or `default`.
const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "module_list",
    "errorstats",
    "cluster",
    "keyspace",
];

/// Redis's `bytesToHuman`.
pub fn human(n: u64) -> String {
    const UNITS: [&str; 6] = ["K", "M", "G", "T", "P", ""];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut d = n as f64 / 1024.0;
    for u in UNITS {
        if u.is_empty() {
            break;
        }
        if d < 1024.0 {
            return format!("{d:.2}{u}");
        }
        d /= 1024.0;
    }
    format!("{n}B")
}

/// INFO's text for `c` (which sections: `want`, as INFO's arguments, lowercase).
fn report(c: &mut Ctx, want: &[String]) -> daisy::Result<String> {
    let everything = want.iter().any(|w| w == "everything");
    let all = everything || want.iter().any(|w| w == "all");
    let mut wanted: Vec<&str> = want.iter().map(String::as_str).collect();
    if want.is_empty() || want.iter().any(|w| w == "default") {
        wanted.extend(DEFAULT);
    }
    let on = |s: &str| all || wanted.contains(&s);
    let mut t = String::new();
    let now = c.now_ms;
    if on("server") {
        section(&mut t, "Server");
        server(c, &mut t, now);
    }
    if on("clients") {
        section(&mut t, "Clients");
        let sv = &c.sv;
        let _ = write!(
            t,
            "connected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\n\
             client_recent_max_input_buffer:{}\r\nclient_recent_max_output_buffer:{}\r\n\
             blocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:0\r\n",
            sv.connected_clients,
            sv.max_clients,
            sv.admin.stats.recent_max_input,
            sv.admin.stats.recent_max_output,
            sv.admin.blocked_clients,
            sv.tracking.clients(),
        );
    }
    if on("memory") {
        section(&mut t, "Memory");
        memory(c, &mut t)?;
    }
    if on("persistence") {
        section(&mut t, "Persistence");
        persistence(c, &mut t, now);
    }
    if on("stats") {
        section(&mut t, "Stats");
        stats(c, &mut t);
    }
    if on("replication") {
        section(&mut t, "Replication");
        let backlog = c.sv.config.get("repl-backlog-size").unwrap_or("1048576");
        let _ = write!(
            t,
            "role:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\n\
             master_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:0\r\n\
             second_repl_offset:-1\r\nrepl_backlog_active:0\r\nrepl_backlog_size:{backlog}\r\n\
             repl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n",
            run_id(c.sv.started_ms, 1),
            "0".repeat(40),
        );
    }
    if on("cpu") {
        section(&mut t, "CPU");
        let [me, children, thread] = crate::server::cpu_times();
        let tv = |(s, us): (i64, i64)| format!("{s}.{us:06}");
        let _ = write!(
            t,
            "used_cpu_sys:{}\r\nused_cpu_user:{}\r\nused_cpu_sys_children:{}\r\n\
             used_cpu_user_children:{}\r\nused_cpu_sys_main_thread:{}\r\n\
             used_cpu_user_main_thread:{}\r\n",
            tv(me.0),
            tv(me.1),
            tv(children.0),
            tv(children.1),
            tv(thread.0),
            tv(thread.1),
        );
    }
    if on("module_list") || on("modules") {
        section(&mut t, "Modules");
    }
    if on("commandstats") {
        section(&mut t, "Commandstats");
        commandstats(c, &mut t);
    }
    if on("errorstats") {
        section(&mut t, "Errorstats");
        let mut e: Vec<(&String, &u64)> = c.sv.errorstats.iter().collect();
        e.sort();
        for (k, n) in e {
            let _ = write!(t, "errorstat_{}:count={n}\r\n", safe(k));
        }
    }
    if on("latencystats") {
        section(&mut t, "Latencystats");
        if c.sv.config.latency_tracking {
            latencystats(c, &mut t);
        }
    }
    if on("cluster") {
        section(&mut t, "Cluster");
        t.push_str("cluster_enabled:0\r\n");
    }
    if on("keyspace") {
        section(&mut t, "Keyspace");
        for db in 0..c.ks.databases() {
            let n = c.ks.len(c.tx, db)?;
            let e = c.ks.expires(c.tx, db)?;
            if n > 0 || e > 0 {
                let _ = write!(t, "db{db}:keys={n},expires={e},avg_ttl=0\r\n");
            }
        }
    }
    Ok(t)
}

/// A section's title, after a blank line unless it is the first.
fn section(t: &mut String, name: &str) {
    if !t.is_empty() {
        t.push_str("\r\n");
    }
    let _ = write!(t, "# {name}\r\n");
}

/// A 40-digit hexadecimal id that stays the same for the server's life (run_id, replid).
fn run_id(started_ms: i64, salt: u64) -> String {
    let mut x = (started_ms as u64 ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
    let mut s = String::new();
    while s.len() < 40 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let _ = write!(s, "{:016x}", x);
    }
    s.truncate(40);
    s
}

/// A name as INFO prints it: `#`, `:`, CR and LF become `_` (`getSafeInfoString`).
fn safe(s: &str) -> String {
    s.chars()
        .map(|ch| if "#:\n\r".contains(ch) { '_' } else { ch })
        .collect()
}

fn server(c: &mut Ctx, t: &mut String, now: i64) {
    let sv = &c.sv;
    let hz = sv.config.get("hz").unwrap_or("10");
    let uptime = (now - sv.started_ms).max(0) / 1000;
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let conf = sv
        .admin
        .config_file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let _ = write!(
        t,
        "redis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n\
         redis_build_id:{}\r\nredis_mode:standalone\r\nos:{}\r\narch_bits:64\r\n\
         monotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\n\
         atomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\n\
         process_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\n\
         uptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{hz}\r\nconfigured_hz:{hz}\r\n\
         lru_clock:{}\r\nexecutable:{exe}\r\nconfig_file:{conf}\r\nio_threads_active:0\r\n\
         daisy_version:{}\r\n",
        crate::REDIS_VERSION,
        &run_id(0, 7)[..16],
        crate::server::uname(),
        std::process::id(),
        run_id(sv.started_ms, 0),
        sv.port,
        now * 1000,
        uptime / 86_400,
        (now / 1000) & ((1 << 24) - 1),
        env!("CARGO_PKG_VERSION"),
    );
}

fn memory(c: &mut Ctx, t: &mut String) -> daisy::Result<()> {
    // used_memory: bytes allocated in the pool (the keyspace lives there, not in DRAM), the
    // figure maxmemory limits (evict.rs); the object count needs a scan of the allocator.
    let (_, objects) = c.sv.pool.usage()?;
    let used = c.sv.used_memory();
    let stats = &mut c.sv.admin.stats;
    stats.peak_memory = stats.peak_memory.max(used);
    let peak = stats.peak_memory;
    let rss = crate::server::rss_bytes();
    let system = crate::server::system_memory();
    // maxmemory: the size the pool may grow to (Redis's 0, "no limit", when that is the
    // pool's capacity); used_memory can stay well below it when the pool is full, since
    // partly used runs of small blocks count as pool size, not as used memory.
    let pool = &c.sv.pool;
    let maxmemory: u64 = if pool.max_size() == pool.capacity() {
        0
    } else {
        pool.max_size()
    };
    let pool_size = c.sv.pool_size.max(c.sv.pool.size());
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let (lua_mem, scripts) = (
        c.sv.scripting.used_memory(),
        c.sv.scripting.cached_scripts(),
    );
    let (libs, funcs) = (
        c.sv.scripting.functions.libs.len(),
        c.sv.scripting.functions.functions_count(),
    );
    let _ = write!(
        t,
        "used_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
         used_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\n\
         used_memory_peak_perc:{:.2}%\r\nused_memory_overhead:0\r\nused_memory_startup:0\r\n\
         used_memory_dataset:{used}\r\nused_memory_dataset_perc:100.00%\r\n\
         allocator_allocated:{used}\r\nallocator_active:{used}\r\nallocator_resident:{pool_size}\r\n\
         total_system_memory:{system}\r\ntotal_system_memory_human:{}\r\n\
         used_memory_lua:{lua_mem}\r\nused_memory_vm_eval:{lua_mem}\r\nused_memory_lua_human:0B\r\n\
         used_memory_scripts_eval:0\r\nnumber_of_cached_scripts:{scripts}\r\nnumber_of_functions:{funcs}\r\n\
         number_of_libraries:{libs}\r\nused_memory_vm_functions:0\r\nused_memory_vm_total:0\r\n\
         used_memory_vm_total_human:0B\r\nused_memory_functions:0\r\nused_memory_scripts:0\r\n\
         used_memory_scripts_human:0B\r\nmaxmemory:{maxmemory}\r\nmaxmemory_human:{}\r\n\
         maxmemory_policy:{}\r\nallocator_frag_ratio:1.00\r\nallocator_frag_bytes:0\r\n\
         allocator_rss_ratio:{:.2}\r\nallocator_rss_bytes:{}\r\nrss_overhead_ratio:1.00\r\n\
         rss_overhead_bytes:0\r\nmem_fragmentation_ratio:{:.2}\r\nmem_fragmentation_bytes:{}\r\n\
         mem_not_counted_for_evict:0\r\nmem_replication_backlog:0\r\n\
         mem_total_replication_buffers:0\r\nmem_clients_slaves:0\r\nmem_clients_normal:{}\r\n\
         mem_cluster_links:0\r\nmem_aof_buffer:0\r\nmem_allocator:daisy\r\n\
         active_defrag_running:0\r\nlazyfree_pending_objects:{}\r\nlazyfreed_objects:{}\r\n\
         daisy_pool_objects:{objects}\r\ndaisy_pool_size:{pool_size}\r\ndaisy_pool_max_size:{}\r\n\
         daisy_pool_capacity:{}\r\n",
        human(used),
        human(rss),
        human(peak),
        100.0 * ratio(used, peak),
        human(system),
        human(maxmemory),
        c.sv.config.get("maxmemory-policy").unwrap_or("noeviction"),
        ratio(pool_size, used),
        pool_size as i64 - used as i64,
        ratio(rss, used),
        rss as i64 - used as i64,
        c.sv.admin.stats.clients_memory,
        c.ks.lazy_pending(),
        c.ks.lazyfreed_objects,
        c.sv.pool.max_size(),
        c.sv.pool.capacity(),
    );
    Ok(())
}

fn persistence(c: &mut Ctx, t: &mut String, now: i64) {
    let sv = &c.sv;
    let rec = sv.pool.recovery_report();
    // Every acknowledged write is already durable; the rdb_* fields describe backups
    // (BGSAVE/SAVE write a consistent copy of the pool, backup.rs).
    let _ = write!(
        t,
        "loading:0\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\n\
         current_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:0\r\n\
         current_save_keys_total:0\r\nrdb_changes_since_last_save:{}\r\n",
        c.ks.dirty.saturating_sub(sv.save.dirty_saved),
    );
    sv.save.info(now, t);
    let _ = write!(
        t,
        "rdb_last_cow_size:0\r\nrdb_last_load_keys_expired:0\r\nrdb_last_load_keys_loaded:0\r\n\
         aof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\n\
         aof_last_rewrite_time_sec:-1\r\naof_current_rewrite_time_sec:-1\r\n\
         aof_last_bgrewrite_status:ok\r\naof_rewrites:0\r\naof_rewrites_consecutive_failures:0\r\n\
         aof_last_write_status:ok\r\naof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\n\
         module_fork_last_cow_size:0\r\n\
         daisy_durability:every write durable in the pool before its reply\r\n\
         daisy_medium:{}\r\ndaisy_survives_power_loss:{}\r\n\
         daisy_pool:{}\r\ndaisy_persistence:{}\r\ndaisy_recovery_ms:{:.3}\r\n\
         daisy_recovery_transactions_replayed:{}\r\ndaisy_recovery_lines_replayed:{}\r\n\
         daisy_recovery_log_bytes_read:{}\r\ndaisy_group_commits:{}\r\n\
         daisy_group_retries:{}\r\n",
        sv.durability,
        u8::from(sv.survives_power_loss),
        sv.pool_path,
        sv.pool_mode,
        sv.recovery_ms,
        rec.records_replayed,
        rec.replayed_lines,
        rec.log_bytes_read,
        sv.group_commits,
        sv.group_retries,
    );
}

fn stats(c: &mut Ctx, t: &mut String) {
    let sv = &c.sv;
    let st = &sv.admin.stats;
    let errors: u64 = sv.errorstats.values().sum();
    let tk = sv.tracking.totals();
    let _ = write!(
        t,
        "total_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
         instantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\n\
         total_net_repl_input_bytes:0\r\ntotal_net_repl_output_bytes:0\r\n\
         instantaneous_input_kbps:{:.2}\r\ninstantaneous_output_kbps:{:.2}\r\n\
         instantaneous_input_repl_kbps:0.00\r\ninstantaneous_output_repl_kbps:0.00\r\n\
         rejected_connections:{}\r\nsync_full:0\r\nsync_partial_ok:0\r\nsync_partial_err:0\r\n\
         expired_keys:{}\r\nexpired_stale_perc:0.00\r\nexpired_time_cap_reached_count:0\r\n\
         expire_cycle_cpu_milliseconds:0\r\nevicted_keys:{}\r\nevicted_clients:0\r\n\
         total_eviction_exceeded_time:0\r\ncurrent_eviction_exceeded_time:0\r\n\
         keyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\n\
         pubsubshard_channels:{}\r\nlatest_fork_usec:0\r\ntotal_forks:0\r\n\
         migrate_cached_sockets:0\r\nslave_expires_tracked_keys:0\r\nactive_defrag_hits:0\r\n\
         active_defrag_misses:0\r\nactive_defrag_key_hits:0\r\nactive_defrag_key_misses:0\r\n\
         total_active_defrag_time:0\r\ncurrent_active_defrag_time:0\r\ntracking_total_keys:{}\r\n\
         tracking_total_items:{}\r\ntracking_total_prefixes:{}\r\nunexpected_error_replies:0\r\n\
         total_error_replies:{errors}\r\ndump_payload_sanitizations:0\r\n\
         total_reads_processed:{}\r\ntotal_writes_processed:{}\r\n\
         io_threaded_reads_processed:0\r\nio_threaded_writes_processed:0\r\n\
         reply_buffer_shrinks:0\r\nreply_buffer_expands:0\r\n",
        sv.total_connections,
        sv.counters.total_commands,
        st.ops_per_sec,
        st.net_input_bytes,
        st.net_output_bytes,
        st.input_kbps,
        st.output_kbps,
        sv.rejected_connections,
        c.ks.expired_keys,
        sv.counters.evicted_keys,
        sv.counters.keyspace_hits,
        sv.counters.keyspace_misses,
        sv.pubsub.num_channels(),
        sv.pubsub.num_patterns(),
        sv.pubsub.num_shard_channels(),
        tk.0,
        tk.1,
        tk.2,
        st.reads_processed,
        st.writes_processed,
    );
}

/// `cmdstat_<name>` lines: every command called, a container's per subcommand.
fn commandstats(c: &mut Ctx, t: &mut String) {
    let mut line = |name: &str, st: crate::commands::CmdStat| {
        if st.calls == 0 && st.failed == 0 && st.rejected == 0 {
            return;
        }
        let per = if st.calls == 0 {
            0.0
        } else {
            st.usec as f64 / st.calls as f64
        };
        let _ = write!(
            t,
            "cmdstat_{}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}\r\n",
            safe(name),
            st.calls,
            st.usec,
            st.rejected,
            st.failed
        );
    };
    let all = meta::all();
    for (i, s) in COMMANDS.iter().enumerate() {
        line(s.name, c.sv.cmdstats[i]);
        for sub in meta::subcommands(s.name) {
            let j = all.iter().position(|m| std::ptr::eq(m, sub)).unwrap_or(0);
            line(
                &sub.name,
                c.sv.admin.sub_stats.get(j).copied().unwrap_or_default(),
            );
        }
    }
}

/// `latency_percentiles_usec_<name>` lines (server.c's `fillPercentileDistributionLatencies`),
/// from the calls timed (one in eight: the percentiles are those of a sample).
fn latencystats(c: &mut Ctx, t: &mut String) {
    let percentiles: Vec<(String, f64)> =
        c.sv.config
            .get("latency-tracking-info-percentiles")
            .unwrap_or("")
            .split(' ')
            .filter_map(|p| Some((p.to_string(), p.parse().ok()?)))
            .collect();
    let all = meta::all();
    let hist = &c.sv.admin.latency;
    let mut line = |name: &str, slot: usize| {
        let Some(Some(h)) = hist.get(slot) else {
            return;
        };
        let values: Vec<String> = percentiles
            .iter()
            .map(|(p, v)| format!("p{p}={:.3}", h.percentile(*v) as f64 / 1000.0))
            .collect();
        let _ = write!(
            t,
            "latency_percentiles_usec_{}:{}\r\n",
            safe(name),
            values.join(",")
        );
    };
    for (i, s) in COMMANDS.iter().enumerate() {
        line(s.name, i);
        for sub in meta::subcommands(s.name) {
            let j = all.iter().position(|m| std::ptr::eq(m, sub)).unwrap_or(0);
            line(&sub.name, COMMANDS.len() + j);
        }
    }
}

pub fn info(c: &mut Ctx, a: &[&[u8]]) -> daisy::Result<()> {
    let want: Vec<String> = a[1..]
        .iter()
        .map(|s| lossy(s).to_ascii_lowercase())
        .collect();
    let text = report(c, &want)?;
    resp::verbatim(c.out, text.as_bytes(), c.cl.resp3);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_as_redis() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(1024), "1.00K");
        assert_eq!(human(1536 << 10), "1.50M");
        assert_eq!(human(3 << 30), "3.00G");
    }

    #[test]
    fn ids_are_40_hex_digits() {
        let id = run_id(1234, 0);
        assert_eq!(id.len(), 40);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(id, run_id(1234, 0));
        assert_ne!(id, run_id(1234, 1));
    }
}
