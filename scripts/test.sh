#!/usr/bin/env bash
# The test suite: what CI runs (.ci/run calls exactly this).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cargo test --workspace --locked "$@"
