//! `daemonize yes` and `pidfile` (server.c's `daemonize` and `createPidFile`).

#![expect(
    unsafe_code,
    reason = "fork, setsid and dup2: the system calls that detach a daemon, which std does not offer"
)]

use std::os::fd::AsRawFd;
use std::path::Path;

/// Detach from the terminal as Redis does: fork (the parent exits at once, status 0), start
/// a new session, and point standard input, output and error at /dev/null (a `logfile`
/// keeps the log). Called before any thread is started, so the child is a complete copy.
pub fn daemonize() -> Result<(), String> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("daemonize: /dev/null: {e}"))?;
    // SAFETY: the process has one thread here (the server starts none before), so the
    // child's copy of the address space is consistent; the parent only calls _exit.
    match unsafe { libc::fork() } {
        -1 => {
            return Err(format!(
                "daemonize: fork: {}",
                std::io::Error::last_os_error()
            ))
        }
        0 => {}
        // SAFETY: _exit ends the parent without running anything of the child's state
        // (no destructors: the pool and sockets now belong to the child).
        _ => unsafe { libc::_exit(0) },
    }
    // SAFETY: setsid and dup2 take no pointers; `null` is an open descriptor for the whole
    // block, and descriptors 0, 1 and 2 are this process's own.
    unsafe {
        libc::setsid();
        for fd in 0..3 {
            libc::dup2(null.as_raw_fd(), fd);
        }
    }
    Ok(())
}

/// Write this process's id to `path` (Redis: a failure is only logged).
pub fn write_pidfile(path: &Path) {
    if let Err(e) = std::fs::write(path, format!("{}\n", std::process::id())) {
        crate::log::warning(&format!("Failed to write PID file {}: {e}", path.display()));
    }
}
