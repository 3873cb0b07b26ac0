#!/usr/bin/env bash
# The test suite: what CI runs (.ci/run calls exactly this, with no arguments).
#
#   scripts/test.sh            the full suite (about 11 minutes on 2 cores from a clean clone)
#   scripts/test.sh --quick    the edit loop's tier: unit and integration tests without the
#                              benchmarks, the kill tortures, the power-failure budgets and the
#                              report (which opens Chromium); under a minute once built
#
# Further arguments go to `cargo test` (before `--`), e.g. `scripts/test.sh --quick -p daisy`.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
./scripts/install-deps.sh
if [ "$quick" = 1 ]; then
  # Skipped by name (the test harness's --skip matches substrings): the slow tiers.
  skip=(
    kill9_ crashtest_loses crashtest_in_msync   # kill tortures (library and server)
    bench_ report_                              # benchmarks against the rivals, the report
    redis_cli_and_redis_benchmark               # redis-benchmark against the server
    busy_polling_serves                         # measures CPU over seconds of idling
    default_budget every_rule_a_workload        # power-failure budgets and canaries
  )
  args=()
  for s in "${skip[@]}"; do args+=(--skip "$s"); done
  exec cargo test --workspace --locked "$@" -- "${args[@]}"
fi
# Lints: unsafe code is denied outside the modules that say why (rustc enforces that in every
# build); clippy adds that every unsafe block documents its safety, and its other warnings.
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets --locked -- -D warnings
  cargo clippy -p daisy-powerfail --all-targets --locked -- -D warnings
else
  echo "test.sh: cargo clippy is not installed (rustup component add clippy); lints skipped" >&2
fi
# The library's documentation: every public item documented, no broken link.
RUSTDOCFLAGS="-D warnings" cargo doc -p daisy --no-deps --locked
exec cargo test --workspace --locked "$@"
