#!/usr/bin/env bash
# Hashes the reports of the reference scenarios: a refactor or an optimisation that
# must change no result prints the same lines before and after.
# Usage: scripts/reporthash.sh [cargo profile, default quick]
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-quick}
s=scenarios
exec cargo run -q --profile "$profile" -p vcpulab-core --example reporthash -- \
  $s/examples/weights-1-1-2-4.toml run.duration=2s -- \
  $s/examples/xen-slice-sweep.toml run.duration=2s -- \
  $s/examples/two-vms-one-pcpu.toml run.duration=2s -- \
  $s/gleaner/wakeup-d.toml -- \
  $s/gleaner/corun.toml run.duration=500ms -- \
  $s/gleaner/consolidation.toml run.duration=1s -- \
  $s/gleaner/mysql.toml run.duration=500ms -- \
  $s/cvs/kernbench-vor.toml run.duration=2s -- \
  $s/cvs/bomb-mix.toml run.duration=1s -- \
  $s/apple/pair.toml run.duration=300ms -- \
  $s/apple/pair.toml run.duration=300ms preset=apple -- \
  $s/apple/pair.toml run.duration=300ms vm.0.workload.model=streamcluster host.ple.policy=off
