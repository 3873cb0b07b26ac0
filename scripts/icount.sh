#!/usr/bin/env bash
# Instructions per transaction of a `daisy bench tx` case, as callgrind counts them (issue 2's
# measure). Usage: scripts/icount.sh [case]   (default update-1; needs valgrind)
# The flush instruction is forced to clflush, which valgrind 3.19 decodes (clwb it does not).
# Only the measured closure is counted (--toggle-collect), and the result is the difference of
# a 40,000- and a 20,000-transaction run (each also runs ops/10 warm-up transactions), so the
# set-up cancels out.
set -euo pipefail
cd "$(dirname "$0")/.."
case="${1:-update-1}"
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
cargo build --release --locked -p daisy-cli >/dev/null 2>&1
run() {
    DAISY_FLUSH=clflush valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        --toggle-collect='*daisy_op*' ./target/release/daisy bench tx --case "$case" \
        --ops "$1" --runs 1 2>&1 >/dev/null | awk '/Collected/ {print $4}'
}
a=$(run 20000)
b=$(run 40000)
echo "$case: $(( (b - a) / 22000 )) instructions per transaction (callgrind, DAISY_FLUSH=clflush)"
