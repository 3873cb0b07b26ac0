//! redis-py for real: Debian's python3-redis runs tests/python/redis_py_check.py against the
//! server (pipelines with and without a transaction, WATCH with retries, hashes, sets, the
//! scan iterators, `Lock` acquire/extend/release and `register_script`: EVALSHA, `pubsub()`
//! with keyspace notifications, users and NOPERM). Skipped, saying so, where python3 or its
//! redis module is missing (scripts/install-deps.sh installs python3-redis).

use super::*;
use std::process::Command;

/// A python3 that can `import redis`: Debian's /usr/bin/python3 first (python3-redis installs
/// its module for that one), then each python3 on PATH. Err: why there is none.
fn python_with_redis() -> Result<PathBuf, String> {
    let mut candidates = vec![PathBuf::from("/usr/bin/python3")];
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("python3")));
    }
    let mut pythons = Vec::new();
    for p in candidates.into_iter().filter(|p| p.is_file()) {
        let ok = Command::new(&p)
            .args(["-c", "import redis"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Ok(p);
        }
        pythons.push(p.display().to_string());
    }
    Err(if pythons.is_empty() {
        "python3 is not installed".into()
    } else {
        format!(
            "no redis module for {} (apt-get install python3-redis)",
            pythons.join(", ")
        )
    })
}

#[test]
fn redis_py() {
    let py = match python_with_redis() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("skipped: redis-py against daisy serve: {why}");
            return;
        }
    };
    let d = tmp();
    let s = Server::start(&pool_in(&d));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/redis_py_check.py");
    let out = Command::new(&py)
        .arg(&script)
        .arg(s.addr.ip().to_string())
        .arg(s.addr.port().to_string())
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("checks passed"),
        "redis-py ({}) against daisy serve failed ({}):\n{stdout}\n{stderr}",
        py.display(),
        out.status
    );
    eprintln!("{}", stdout.trim());
    s.stop();
}
