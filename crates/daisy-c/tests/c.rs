//! The C side: build the C test program and the examples with the system `cc` against the
//! built libdaisy (shared and static), run them, and assert their output; the same with
//! AddressSanitizer + UBSan; and valgrind memcheck over the examples (DAISY_FLUSH=clflush).
//! A tool that is genuinely missing (no cc, no valgrind, a cc without sanitizer runtimes)
//! skips its part with a printed reason; everything else must pass.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory holding the libdaisy.so and libdaisy.a cargo built for this test run:
/// target/<profile>/deps, beside the test binary (`cargo test` leaves them there; `cargo
/// build` also copies them up to target/<profile>).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().expect("target/<profile>/deps");
    // `cargo test` builds a cdylib/staticlib-only crate's libraries only when something else
    // asked for them (a clean clone's `cargo test` does not), and libraries left by an earlier
    // build may predate the sources under test: always ask cargo (a no-op when they are
    // current), into the same target directory and profile, once for all the tests here.
    static BUILD: std::sync::Once = std::sync::Once::new();
    BUILD.call_once(|| {
        let profile_dir = dir.parent().expect("target/<profile>");
        let target = profile_dir.parent().expect("target");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-p", "daisy-c", "--locked"])
            .env("CARGO_TARGET_DIR", target);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("cargo build -p daisy-c");
        assert!(
            out.status.success(),
            "cargo build -p daisy-c: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    // cargo build puts them in target/<profile> (current after the build above).
    let dir = dir.parent().expect("target/<profile>");
    assert!(
        dir.join("libdaisy.so").exists() && dir.join("libdaisy.a").exists(),
        "libdaisy.so/.a not found in {} (cargo builds them with the tests)",
        dir.display()
    );
    dir.to_path_buf()
}

fn cc() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    match Command::new(&cc).arg("--version").output() {
        Ok(o) if o.status.success() => Some(cc),
        _ => {
            println!("SKIP: no C compiler ({cc}) found");
            None
        }
    }
}

fn seed() -> u64 {
    let s = std::env::var("DAISY_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000_007
        });
    println!("seed {s} (DAISY_TEST_SEED={s} repeats it)");
    s
}

/// A scratch directory in /dev/shm (pools are memory-backed there), removed on drop.
struct Scratch(PathBuf);
impl Scratch {
    fn new(name: &str) -> Scratch {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("daisy-c-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("scratch dir");
        Scratch(d)
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compile `src` (files under tests/c or examples) into `out`; `extra` flags; linked against
/// the shared library (with an rpath) or the static one.
fn build(cc: &str, srcs: &[PathBuf], out: &Path, extra: &[&str], static_lib: bool) -> Output {
    let lib = lib_dir();
    let mut c = Command::new(cc);
    c.args(["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .args(extra)
        .args(srcs)
        .arg("-o")
        .arg(out);
    if static_lib {
        c.arg(lib.join("libdaisy.a"))
            .args(["-lpthread", "-ldl", "-lm"]);
    } else {
        c.arg("-L")
            .arg(&lib)
            .arg("-ldaisy")
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .arg("-lpthread");
    }
    c.output().expect("running cc")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn built(o: Output, what: &str) {
    assert!(o.status.success(), "building {what} failed:\n{}", text(&o));
}

fn api_test_src() -> Vec<PathBuf> {
    vec![crate_dir().join("tests/c/api_test.c")]
}

fn run_api_test(bin: &Path, scratch: &Path, seed: u64, env: &[(&str, &str)]) {
    let o = Command::new(bin)
        .arg(scratch)
        .arg(seed.to_string())
        .envs(env.iter().copied())
        .env_remove("DAISY_TEST_HOOKS")
        // cargo's LD_LIBRARY_PATH names target/<profile> too, whose libdaisy.so may be an
        // older `cargo build`'s: the rpath must decide.
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("running api_test");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("api_test: ok") && out.contains("crash: killed after"),
        "api_test failed:\n{}",
        text(&o)
    );
    let checks: u64 = out
        .split("api_test: ok, ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("check count");
    assert!(checks > 300, "only {checks} checks ran");
    println!("{}", out.trim());
}

#[test]
fn c_api_test_shared_and_static() {
    let Some(cc) = cc() else { return };
    let s = Scratch::new("api");
    let seed = seed();
    let bin = s.0.join("api_test");
    built(build(&cc, &api_test_src(), &bin, &[], false), "api_test");
    run_api_test(&bin, &s.0, seed, &[]);
    let sbin = s.0.join("api_test_static");
    built(
        build(&cc, &api_test_src(), &sbin, &[], true),
        "api_test (static)",
    );
    run_api_test(&sbin, &s.0, seed, &[]);
}

/// Whether `cc` can build and run a program with these sanitizer flags.
fn sanitizers_work(cc: &str, dir: &Path, flags: &[&str]) -> bool {
    let src = dir.join("probe.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let bin = dir.join("probe");
    let ok = Command::new(cc)
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .output()
        .is_ok_and(|o| o.status.success())
        && Command::new(&bin).status().is_ok_and(|s| s.success());
    if !ok {
        println!("SKIP: {cc} cannot build and run with {flags:?} (no sanitizer runtime)");
    }
    ok
}

#[test]
fn c_api_test_under_asan_and_ubsan() {
    let Some(cc) = cc() else { return };
    let s = Scratch::new("asan");
    let seed = seed();
    let flags = [
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
    ];
    if !sanitizers_work(&cc, &s.0, &flags) {
        return;
    }
    let bin = s.0.join("api_test_asan");
    built(
        build(&cc, &api_test_src(), &bin, &flags, false),
        "api_test (ASan+UBSan)",
    );
    // Leak checking covers the C side; the library's own allocations are Rust's and freed by
    // the close calls the test makes (a leak there fails this run too).
    run_api_test(
        &bin,
        &s.0,
        seed,
        &[
            ("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1"),
            ("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1"),
        ],
    );
}

fn example(name: &str) -> PathBuf {
    crate_dir().join("examples").join(name)
}

/// Build an example, run it with `args` (and `env`), return its stdout.
fn run_example(cc: &str, dir: &Path, src: &str, args: &[&str], wrapper: &[&str]) -> String {
    let bin = dir.join(src.trim_end_matches(".c"));
    if !bin.exists() {
        built(build(cc, &[example(src)], &bin, &[], false), src);
    }
    let mut cmd = if wrapper.is_empty() {
        Command::new(&bin)
    } else {
        let mut c = Command::new(wrapper[0]);
        c.args(&wrapper[1..]).arg(&bin);
        c
    };
    let o = cmd
        .args(args)
        .env("DAISY_FLUSH", "clflush")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("running an example");
    assert!(o.status.success(), "{src} {args:?} failed:\n{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn examples_build_run_and_agree() {
    let Some(cc) = cc() else { return };
    let s = Scratch::new("ex");
    let pool = s.0.join("list.pool");
    let p = pool.to_str().unwrap();
    // Each run adds a node holding the count before it; the list prints newest first.
    let first = run_example(&cc, &s.0, "list.c", &[p], &[]);
    assert_eq!(first.trim(), "0", "first run:\n{first}");
    run_example(&cc, &s.0, "list.c", &[p], &[]);
    let third = run_example(&cc, &s.0, "list.c", &[p], &[]);
    assert_eq!(
        third.lines().map(str::trim).collect::<Vec<_>>(),
        ["2", "1", "0"],
        "third run:\n{third}"
    );
    let seed = seed().to_string();
    let hp = s.0.join("hash.pool");
    let out = run_example(
        &cc,
        &s.0,
        "hashbench.c",
        &[hp.to_str().unwrap(), "20000", &seed],
        &[],
    );
    assert!(
        out.contains("inserted 20000 pairs") && out.contains("verified 20000"),
        "hashbench:\n{out}"
    );
    println!("{}", out.trim());
}

#[test]
fn examples_are_valgrind_memcheck_clean() {
    let Some(cc) = cc() else { return };
    if !Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        println!("SKIP: valgrind not installed");
        return;
    }
    let s = Scratch::new("vg");
    let vg = [
        "valgrind",
        "--tool=memcheck",
        "--error-exitcode=99",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite",
        "--quiet",
    ];
    let pool = s.0.join("list.pool");
    let p = pool.to_str().unwrap();
    run_example(&cc, &s.0, "list.c", &[p], &vg);
    let out = run_example(&cc, &s.0, "list.c", &[p], &vg);
    assert_eq!(out.lines().count(), 2, "{out}");
    let hp = s.0.join("hash.pool");
    let out = run_example(
        &cc,
        &s.0,
        "hashbench.c",
        &[hp.to_str().unwrap(), "2000", "7"],
        &vg,
    );
    assert!(out.contains("verified 2000"), "{out}");
}

#[test]
fn install_script_and_pkg_config() {
    let Some(cc) = cc() else { return };
    if !Command::new("pkg-config")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        println!("SKIP: pkg-config not installed");
        return;
    }
    let s = Scratch::new("install");
    let prefix = s.0.join("prefix");
    let o = Command::new(crate_dir().join("install.sh"))
        .arg("--prefix")
        .arg(&prefix)
        .arg("--lib-dir")
        .arg(lib_dir())
        .env_remove("DESTDIR")
        .output()
        .expect("install.sh");
    assert!(o.status.success(), "install.sh failed:\n{}", text(&o));
    for f in [
        "lib/libdaisy.so",
        "lib/libdaisy.a",
        "include/daisy.h",
        "lib/pkgconfig/daisy.pc",
    ] {
        assert!(prefix.join(f).is_file(), "{f} not installed");
    }
    let pc = Command::new("pkg-config")
        .args(["--cflags", "--libs", "daisy"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .expect("pkg-config");
    assert!(pc.status.success(), "pkg-config failed:\n{}", text(&pc));
    let flags = String::from_utf8_lossy(&pc.stdout).into_owned();
    assert!(
        flags.contains(&format!("-I{}/include", prefix.display())) && flags.contains("-ldaisy"),
        "pkg-config flags: {flags}"
    );
    // A program built only with what pkg-config says, against the installed copy.
    let bin = s.0.join("list");
    let o = Command::new(&cc)
        .arg(example("list.c"))
        .arg("-o")
        .arg(&bin)
        .args(flags.split_whitespace())
        .arg(format!("-Wl,-rpath,{}/lib", prefix.display()))
        .output()
        .expect("cc");
    built(o, "list.c with pkg-config");
    let pool = s.0.join("l.pool");
    let o = Command::new(&bin)
        .arg(&pool)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("list");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0");
}
