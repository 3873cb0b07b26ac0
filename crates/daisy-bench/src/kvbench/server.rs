//! The server processes: `daisy serve` and redis-server in each persistence mode, each on a
//! free loopback port in its own directory, killed when dropped; CPU pinning.

#![expect(
    unsafe_code,
    reason = "process control std does not offer: CPU affinity, signals other than SIGKILL, sync(2)"
)]

use super::client::{Conn, Reply};
use anyhow::{anyhow, Result};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(super) const INSTALL_HINT: &str =
    "install the Debian package with `sudo apt-get install {pkg}` \
     (scripts/install-deps.sh installs it)";

/// Where the servers and redis-benchmark run when pinned: the last CPU this process may use
/// for the server, the rest for the client.
#[derive(Clone, Copy)]
pub(super) struct Pinning {
    pub(super) server: libc::cpu_set_t,
    pub(super) client: libc::cpu_set_t,
}

/// The pinning plan, and its description; None on a single CPU (or when the affinity cannot
/// be read).
pub(super) fn pinning() -> Option<(Pinning, String)> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most the size given into `set`.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return None;
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    let cpus: Vec<usize> = (0..max)
        // SAFETY: every index is below the set's size in bits.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    let (&last, rest) = cpus.split_last()?;
    if rest.is_empty() {
        return None;
    }
    // SAFETY: as above: an all-zero cpu_set_t is the empty set.
    let mut server: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `last` is below the set's size in bits.
    unsafe { libc::CPU_SET(last, &mut server) };
    let mut client = set;
    // SAFETY: `last` is below the size in bits.
    unsafe { libc::CPU_CLR(last, &mut client) };
    let list = rest
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    Some((
        Pinning { server, client },
        format!("servers pinned to CPU {last}, redis-benchmark to CPU {list}"),
    ))
}

/// A child process that is killed (SIGKILL) and reaped when dropped, unless it has exited.
pub struct Proc {
    child: Child,
}

impl Proc {
    /// Spawn `cmd`, dying with this process, on the CPUs of `cpus` when given.
    pub(super) fn spawn(cmd: &mut Command, cpus: Option<libc::cpu_set_t>) -> std::io::Result<Proc> {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl and sched_setaffinity are plain system calls: async-signal-safe, and
        // they read only the set copied into the closure.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if let Some(set) = &cpus {
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
                }
                Ok(())
            });
        }
        Ok(Proc {
            child: cmd.spawn()?,
        })
    }

    pub(super) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Wait up to `t` for it to exit on its own.
    pub(super) fn wait_for(&mut self, t: Duration) -> Option<std::process::ExitStatus> {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if t0.elapsed() > t {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub(super) fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid (not yet reaped, so not reused).
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A directory removed (with everything in it) when dropped.
pub struct Workdir {
    pub path: PathBuf,
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Directory prefix of the benchmark's files in `--dir`.
pub const DIR_PREFIX: &str = "daisy-kvbench-";

/// Remove `daisy-kvbench-<pid>` directories of benchmarks that no longer run (killed ones).
pub(super) fn remove_stale(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(DIR_PREFIX) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A loopback port nobody listens on now.
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| anyhow!("bind: {e}"))?;
    Ok(l.local_addr()?.port())
}

/// Whether something accepts connections on the loopback port.
pub fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// `name` in $PATH.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The last `n` lines of a file (a server's log), for error messages.
fn tail(path: &Path, n: usize) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    let t = lines[lines.len().saturating_sub(n)..].join(" | ");
    if t.is_empty() {
        "(no output)".into()
    } else {
        t
    }
}

pub(super) fn dir_bytes(dir: &Path, skip: &str) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                total += dir_bytes(&e.path(), skip);
            } else if e.file_name().to_string_lossy() != skip {
                total += m.len();
            }
        }
    }
    total
}

/// The programs the benchmark runs.
pub(super) struct Tools {
    pub(super) redis_server: Option<PathBuf>,
    pub(super) redis_benchmark: Option<PathBuf>,
    pub(super) daisy: PathBuf,
    pub(super) daisy_busy_poll_us: u32,
    pub(super) pin: Option<Pinning>,
}

pub(super) const LOG: &str = "server.log";

/// The command line of `name` on `port` with its files in `sub`.
fn server_command(tools: &Tools, name: &str, port: u16, sub: &Path) -> Result<Command> {
    let log = std::fs::File::create(sub.join(LOG))
        .map_err(|e| anyhow!("{}: {e}", sub.join(LOG).display()))?;
    let log2 = log.try_clone()?;
    let mut c;
    if name == "daisy" {
        c = Command::new(&tools.daisy);
        c.arg("serve")
            .arg("--pool")
            .arg(sub.join("kv.pool"))
            .args(["--bind", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .arg("--busy-poll-us")
            .arg(tools.daisy_busy_poll_us.to_string());
    } else {
        let exe = tools.redis_server.as_ref().ok_or_else(|| {
            anyhow!(
                "redis-server not found in PATH: {}",
                INSTALL_HINT.replace("{pkg}", "redis-server")
            )
        })?;
        c = Command::new(exe);
        c.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
            .arg(sub)
            .args(["--daemonize", "no", "--protected-mode", "no"])
            .args(redis_mode_args(name));
    }
    c.stdin(Stdio::null()).stdout(log).stderr(log2);
    Ok(c)
}

/// The persistence flags of each Redis mode.
pub fn redis_mode_args(name: &str) -> Vec<&'static str> {
    match name {
        "redis-none" => vec!["--save", "", "--appendonly", "no"],
        "redis-rdb" => vec!["--save", "3600 1 300 100 60 10000", "--appendonly", "no"],
        "redis-aof-everysec" => vec![
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--aof-use-rdb-preamble",
            "no",
        ],
        "redis-aof-always" => vec![
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--aof-use-rdb-preamble",
            "no",
        ],
        _ => vec![],
    }
}

/// What each server is, in words (printed before the tables).
pub fn describe_server(name: &str, daisy_busy_poll_us: u32) -> String {
    match name {
        "daisy" => format!(
            "`daisy serve --pool <dir>/kv.pool`: every write durable in the pool before its \
             reply; under load it polls for requests up to {} us before sleeping (the \
             default --busy-poll-us; Redis always sleeps in epoll_wait)",
            daisy_busy_poll_us
        ),
        "redis-none" => "redis-server --save \"\" --appendonly no: nothing persisted".into(),
        "redis-rdb" => "redis-server with Redis's default save points (--save \"3600 1 300 100 \
                        60 10000\"): a snapshot now and then, writes since it lost on a crash"
            .into(),
        "redis-aof-everysec" => "redis-server --appendonly yes --appendfsync everysec: the log \
                                 fsynced once a second (up to a second lost)"
            .into(),
        "redis-aof-always" => "redis-server --appendonly yes --appendfsync always: the log \
                               fsynced before replies (every write durable)"
            .into(),
        _ => String::new(),
    }
}

/// A running server.
pub(super) struct Server {
    name: String,
    pub(super) port: u16,
    sub: PathBuf,
    pub(super) proc: Proc,
    spawned: Instant,
}

impl Server {
    /// Spawn `name` with its files in `sub` (created if needed) on a free port. Does not wait.
    pub(super) fn spawn(tools: &Tools, name: &str, sub: &Path) -> Result<Server> {
        std::fs::create_dir_all(sub).map_err(|e| anyhow!("{}: {e}", sub.display()))?;
        let port = free_port()?;
        let mut cmd = server_command(tools, name, port, sub)?;
        let spawned = Instant::now();
        let proc = Proc::spawn(&mut cmd, tools.pin.map(|p| p.server))
            .map_err(|e| anyhow!("{}: {e}", cmd.get_program().to_string_lossy().into_owned()))?;
        Ok(Server {
            name: name.to_string(),
            port,
            sub: sub.to_path_buf(),
            proc,
            spawned,
        })
    }

    /// Spawn and wait until it answers PING (a port taken meanwhile is retried).
    pub(super) fn start(
        tools: &Tools,
        name: &str,
        sub: &Path,
        timeout: Duration,
    ) -> Result<Server> {
        let mut last = anyhow!("{name} did not start");
        for _ in 0..3 {
            let mut s = Server::spawn(tools, name, sub)?;
            match s.wait_ready(timeout) {
                Ok(_) => return Ok(s),
                Err(e) => {
                    if !e.to_string().contains("in use") {
                        return Err(e);
                    }
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// Poll with a fresh connection every ~1 ms until PING answers +PONG; the time since
    /// spawn. -LOADING (Redis reading its files) and refused connections keep polling.
    pub(super) fn wait_ready(&mut self, timeout: Duration) -> Result<Duration> {
        loop {
            if let Ok(mut c) = Conn::connect(self.port, Duration::from_millis(100)) {
                c.set_read_timeout(Duration::from_secs(5));
                if let Ok(Reply::Simple(s)) = c.cmd(&["PING"]) {
                    if s == "PONG" {
                        return Ok(self.spawned.elapsed());
                    }
                }
            }
            if let Some(st) = self.proc.exited() {
                return Err(anyhow!(
                    "{} exited ({st}) before answering PING; its output: {}",
                    self.what(),
                    tail(&self.sub.join(LOG), 6)
                ));
            }
            if self.spawned.elapsed() > timeout {
                return Err(anyhow!(
                    "{} did not answer PING within {:.0} s; its output: {}",
                    self.what(),
                    timeout.as_secs_f64(),
                    tail(&self.sub.join(LOG), 6)
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn what(&self) -> String {
        if self.name == "daisy" {
            format!("`daisy serve` on port {}", self.port)
        } else {
            format!("redis-server ({}) on port {}", self.name, self.port)
        }
    }

    pub(super) fn conn(&self) -> Result<Conn> {
        Conn::connect(self.port, Duration::from_secs(2))
            .map_err(|e| anyhow!("connect to {}: {e}", self.what()))
    }

    /// Stop it with `shutdown` (e.g. ["SHUTDOWN", "NOSAVE"]; daisy gets plain SHUTDOWN: its
    /// writes are durable when answered); SIGTERM if it refuses the command or does not exit
    /// within 30 s, SIGKILL 10 s later, which is reported as an error.
    pub(super) fn stop(mut self, shutdown: &[&str]) -> Result<()> {
        let shutdown = if self.name == "daisy" {
            &["SHUTDOWN"][..]
        } else {
            shutdown
        };
        if let Ok(mut c) = self.conn() {
            c.set_read_timeout(Duration::from_secs(30));
            // A server that exits answers nothing (connection closed): that is success. One
            // that refuses the command gets SIGTERM.
            if let Ok(Reply::Error(_)) = c.cmd(shutdown) {
                self.proc.signal(libc::SIGTERM);
            }
        }
        if self.proc.wait_for(Duration::from_secs(30)).is_some() {
            return Ok(());
        }
        self.proc.signal(libc::SIGTERM);
        if self.proc.wait_for(Duration::from_secs(10)).is_some() {
            return Ok(());
        }
        Err(anyhow!(
            "{} did not exit after {} and SIGTERM (killed)",
            self.what(),
            shutdown.join(" ")
        ))
    }
}

/// `-v`/`--version` of a program: the first line.
pub(super) fn version(exe: &Path) -> Option<String> {
    let o = Command::new(exe).arg("--version").output().ok()?;
    let s = String::from_utf8_lossy(&o.stdout);
    s.lines().next().map(|l| l.trim().to_string())
}

/// Write every dirty page of the machine back (sync(2)), so that work done before a
/// measurement is not written back during it.
pub(super) fn sync_disks() {
    // SAFETY: sync takes no arguments and cannot fail.
    unsafe { libc::sync() };
}
