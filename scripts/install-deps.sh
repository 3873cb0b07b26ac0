#!/usr/bin/env bash
# Install the Debian packages Daisy's tests and reports use, when they are missing.
# As root it runs apt-get; otherwise it prints what to install and carries on (the benchmarks
# then report the rivals they could not measure).
set -euo pipefail

# chromium: the report test opens report.html in headless Chromium and takes a screenshot.
# python3-redis: redis-py runs against daisy serve (crates/daisy-kv/tests/server/redis_py.rs).
# prometheus-redis-exporter: scrapes daisy serve (crates/daisy-kv/tests/server/monitoring.rs).
# valgrind, pkgconf: the C API's tests (crates/daisy-c/tests/c.rs: memcheck of the examples,
# a program built with `pkg-config --cflags --libs daisy`).
# fio, libpmemblk-dev: `daisy bench io` (seed 002's fio matrix: fio's own engines, and PMDK's
# libpmemblk through a shim compiled at run time against its header).
# libsqlite3-dev: the build itself needs it: daisy-bench links Debian's libsqlite3 (rusqlite,
# the SQLite rival of `daisy bench hashmap` and `bench tx`); LMDB and redb are compiled from
# their crates.
want=(libsqlite3-dev libpmemobj-dev redis-server redis-tools chromium python3-redis
  prometheus-redis-exporter valgrind pkgconf fio libpmemblk-dev)
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || echo "install-deps: apt-get update failed" >&2
  # One at a time, so one package that cannot be installed (or whose service cannot start in
  # a container) leaves the others installed; the tests and reports then name what is missing.
  for p in "${missing[@]}"; do
    apt-get install -y -qq "$p" >/dev/null \
      || echo "install-deps: could not install $p; what needs it is skipped or reported missing" >&2
  done
else
  echo "install-deps: missing ${missing[*]}; install them with: sudo apt-get install ${missing[*]}" >&2
  echo "install-deps: continuing without them (comparisons with those rivals are skipped)" >&2
fi
