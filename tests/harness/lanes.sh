#!/usr/bin/env bash
# make test: the six tiers in two lanes that run side by side.
#
# Why two lanes: a stand-in engine computes on one core (a one-node plan runs one
# OpenMP thread, the catalog's cpu-build-adds-a-worker-process; a cluster rank is
# bound to one core, its log: "reserved_cpus=[1]"), so the tiers
# that serve the stand-in on this machine keep a 2-core machine only 50-55%
# busy for most of their time (sampled every 10 s through the integration
# tier). The other tiers — lint, unit, Molecule and the simulated cluster —
# are busy on the CPU the whole time. Each lane gets about one core:
#
#   serve lane:   lint, unit, integration      (stand-in engines: one thread each, unbound)
#   build lane:   molecule's static tests and one scenario, then the cluster
#                                              (cluster engines on core 1: SPARKFLEET_STANDIN_CPUS=1)
#   either lane:  a queue of shared jobs (awx, then the other Molecule scenarios one by one), each taken by the
#                 first lane that is free
#
# Why the queue (2026-12-07): the machine is saturated (91% busy), so the wall time is the larger lane, and
# the lanes' lengths move with the machine's speed and with every test added. In the fresh-clone run of 09d65d2 the
# build lane (molecule 1,065 s, cluster 3,162 s) ended 808 s after the serve lane (3,420 s); CI's run of d728734
# passed the serve lane in 5,083 s and ran out of its 5,400 s in the build lane. Jobs of a few minutes each, taken
# by whichever lane is free, end the two lanes within one job of each other.
#
# Why unit moved to the serve lane (2026-12-06): the cluster tier is the longest tier (2,422 s in the fresh-clone
# run of ecaf52d, against integration's 1,800 s), and with unit (212 s) and molecule (586 s) before it the build lane
# ran 3,221 s against the serve lane's 2,229 s. Lint and unit need no background prerequisite, so the serve lane
# runs them while the vLLM environment and the test image are built; the build lane's Molecule waits for the image.
#
# Why AWX is shared: in a fresh-clone run of 830dd1b (2026-12-04) the build lane finished its tiers 348 s
# before the serve lane, then idled while the serve lane ran AWX (271 s) alone. The lane that is free first
# takes it now; its engine keeps vLLM's default core either way (AWX does not read SPARKFLEET_STANDIN_CPUS).
#
# Lint sits in the serve lane to even them out: measured in one fresh-clone run, the build lane (with lint)
# took 1,896 s and the serve lane 1,674 s, and lint takes 174 s.
#
# The simulated cluster's ranks are bound to core 1 through the variable an
# operator would use (vllm_cluster_extra_env in inventories/sim4); left to
# vLLM's default they would all sit on core 0. Molecule runs
# its scenarios one at a time here (two at a time when run alone). Every tier
# is the same pytest run as `make test-<tier>`; nothing is left out.
#
# The lanes share nothing a test asserts on: different ports, service names,
# Docker networks and container names (see each tier's module docstring).
#
# Shared prerequisites are built once. The controller venv comes first (every tier needs it); then both lanes
# start while the vLLM CPU and Ray environments and the systemd test image are still being built in the
# background (mostly downloads and unpacking), and each tier waits only for the ones it needs (NEEDS below):
# lint and unit need nothing more, so they overlap the downloads.
#
# Usage: tests/harness/lanes.sh            (what `make test` runs)
#   SPARKFLEET_TEST_LANES=1                run the tiers one after another instead
# Output: every line is prefixed with its lane; each lane's full log is also
# written to tests/output/lanes/<lane>.log.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
MAKE_CMD=("${MAKE:-make}" --no-print-directory)
SERVE_LANE=(lint test-unit test-integration)
# The Molecule tier in parts (a pytest -k expression each; together they select every test of tests/molecule once):
# its static tests and one scenario open the build lane while the cluster's environments are still being built, and
# each other scenario is a shared job.
MOLECULE_FIRST="not test_scenario_passes or firewall/"
BUILD_LANE=("test-molecule MOLECULE_K=$MOLECULE_FIRST" test-cluster)
# The shared queue, longest first: each job runs once, in the first lane to get to it after its own tiers.
SHARED=(test-awx
        "test-molecule MOLECULE_K=test_scenario_passes and docker/"
        "test-molecule MOLECULE_K=test_scenario_passes and vllm_gateway/"
        "test-molecule MOLECULE_K=test_scenario_passes and nvidia_container_toolkit/"
        # the rest (nvidia_driver, and any scenario added later)
        "test-molecule MOLECULE_K=test_scenario_passes and not (firewall/ or docker/ or vllm_gateway/ or nvidia_container_toolkit/)")
# The background prerequisites each tier waits for: vllm (.venv-vllm), ray (.venv-ray, built after .venv-vllm:
# only the simulated cluster uses it, so integration and AWX start without waiting for it), docker (the engine and
# the systemd image).
declare -A NEEDS=([lint]="" [test-unit]="" [test-integration]="vllm docker" [test-awx]="vllm"
                  [test-molecule]="docker" [test-cluster]="vllm ray docker")
LOG_DIR="$REPO/tests/output/lanes"
PREREQ_DIR="$LOG_DIR/prerequisites"  # <name>.rc appears when a background prerequisite has finished
mkdir -p "$LOG_DIR"
rm -rf "$PREREQ_DIR"
mkdir -p "$PREREQ_DIR"

log() { printf 'lanes: %s\n' "$*"; }

# prepare NAME COMMAND...: build a prerequisite in the background; its log is prepare-NAME.log.
prepare() {
  local name="$1"
  shift
  { "$@" >"$LOG_DIR/prepare-$name.log" 2>&1; echo $? >"$PREREQ_DIR/$name.rc"; } &
}

# await NAME...: wait until each background prerequisite has finished. A failed one is not fatal here: the
# tiers that need it fail with their own message (CI=true turns a missing prerequisite into a failure).
await() {
  local name rc
  for name in "$@"; do
    while [[ ! -s "$PREREQ_DIR/$name.rc" ]]; do sleep 2; done
    rc=$(cat "$PREREQ_DIR/$name.rc")
    if [[ "$rc" != 0 ]]; then
      log "prerequisite $name failed (exit $rc); the tiers that need it will say so. Its log ends:"
      tail -n 30 "$LOG_DIR/prepare-$name.log"
    fi
  done
}

# Every tier of a lane runs even when one before it failed (a lint finding must not hide what integration would
# have said); the lane fails when any of its tiers did.
# A job is a make target, optionally followed by one VARIABLE=value (a tier's part): "test-molecule MOLECULE_K=...".
run_lane() {
  local name="$1" started=$SECONDS job target setting failed=() own=$(($# - 1)) index=0
  shift
  for job in "$@" "${SHARED[@]}"; do
    index=$((index + 1))
    target="${job%% *}"
    setting="${job#"$target"}"
    setting="${setting# }"
    # A shared job runs once, in the first lane to get here (mkdir is atomic: the other lane skips it).
    if ((index > own)) && ! mkdir "$PREREQ_DIR/claimed-$((index - own))" 2>/dev/null; then
      continue
    fi
    # shellcheck disable=SC2086  # NEEDS holds a list of names
    await ${NEEDS[$target]}
    log "$name lane: $job starts at $((SECONDS - started)) s"
    # Each part of a tier keeps its own timing record (tests/timing.py).
    if ! SPARKFLEET_TIMES_PART="${setting:+$name-$index}" "${MAKE_CMD[@]}" "$target" ${setting:+"$setting"}; then
      log "$name lane: $job FAILED after $((SECONDS - started)) s"
      failed+=("$job")
    fi
  done
  if [[ ${#failed[@]} -gt 0 ]]; then
    log "$name lane: ${failed[*]} FAILED; the lane took $((SECONDS - started)) s"
    return 1
  fi
  log "$name lane: passed in $((SECONDS - started)) s"
}

# How busy the machine was, every 5 s (tests/output/lanes/cpu.tsv: seconds since start, busy % of all cores,
# 1-min load, GiB free on the disk holding the checkout): the measure of whether overlapping more could still gain
# (idle cores) or only work removed can (a saturated machine), and how close the run came to a disk check's limit
# (preflight sizes the stand-in's need from the catalog; a CI machine had 39 GiB free where the old fixed 40 GiB
# need refused it). Measurement only; nothing gates on it.
sample_cpu() {
  local prev_total=0 prev_idle=0 total idle busy t0=$SECONDS
  local -a f
  printf 'elapsed_s\tbusy_pct\tload1\tfree_gib\n' >"$LOG_DIR/cpu.tsv"
  while true; do
    read -ra f </proc/stat
    total=0; for v in "${f[@]:1:8}"; do total=$((total + v)); done
    idle=$((f[4] + f[5]))
    if ((prev_total > 0 && total > prev_total)); then
      busy=$((100 * ((total - prev_total) - (idle - prev_idle)) / (total - prev_total)))
      printf '%s\t%s\t%s\t%s\n' "$((SECONDS - t0))" "$busy" "$(cut -d' ' -f1 /proc/loadavg)" \
        "$(df -Pk "$REPO" | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }')" >>"$LOG_DIR/cpu.tsv"
    fi
    prev_total=$total; prev_idle=$idle
    sleep 5
  done
}
sample_cpu &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT

cpu_summary() {
  awk -F'\t' 'NR > 1 { n++; sum += $2; if ($2 < 75) low++; w = int($1 / 300); ws[w] += $2; wn[w]++
                      if (n == 1) first = $4; if (n == 1 || $4 < least) least = $4 }
    END { if (!n) exit; printf "lanes: cpu busy %.0f%% on average over %d s; under 75%% busy %.0f%% of the time; per 5 min:", sum / n, n * 5, 100 * low / n
          for (i = 0; i in wn; i++) printf " %.0f", ws[i] / wn[i]; printf "\n"
          printf "lanes: disk %s GiB free at the start, %s GiB at the least\n", first, least }' "$LOG_DIR/cpu.tsv"
}

# The machine's speed today: the CPU seconds one core takes for a fixed Python loop, at the start and the end. Runs
# are compared in wall time and CPU seconds, and both scale with it: the same commit took 1.4-1.7 times longer in
# every tier on one day than on the day before (lint 240 s then 407 s) with the machine as busy. Compare two runs'
# figures only where their reference times agree, or scale by the ratio. Measurement only; nothing gates on it.
reference_loop() {
  python3 -c 'import time
t = time.process_time()
total = 0
for i in range(3000000):
    total += i * i % 7
print("%.2f" % (time.process_time() - t))'
}

log "machine speed: the reference loop took $(reference_loop) CPU-s at the start"
started=$SECONDS
log "prerequisites: the controller venv first; the vLLM CPU and Ray environments and the systemd test image in the background"
# The Ray environment (the simulated cluster's) is made with the interpreter .venv-vllm links to: after it, as a
# prerequisite of its own, so the tiers that need only vLLM start as soon as .venv-vllm is ready.
prepare vllm bash tests/harness/vllm-cpu-env.sh
prepare ray bash -c "while [[ ! -s '$PREREQ_DIR/vllm.rc' ]]; do sleep 2; done; bash tests/harness/ray-env.sh"
prepare docker bash tests/harness/docker-up.sh
if ! "${MAKE_CMD[@]}" venv >"$LOG_DIR/prepare-venv.log" 2>&1; then
  log "make venv failed:"
  tail -n 30 "$LOG_DIR/prepare-venv.log"
fi
log "controller venv ready after $((SECONDS - started)) s; the lanes start"

if [[ "${SPARKFLEET_TEST_LANES:-2}" == "1" ]]; then
  run_lane serial "${SERVE_LANE[@]}" "${BUILD_LANE[@]}"
  rc=$?
  await vllm ray docker  # no background job outlives the run
  cpu_summary
  exit $rc
fi

(run_lane serve "${SERVE_LANE[@]}" 2>&1 | tee "$LOG_DIR/serve.log" | sed -u 's/^/[serve] /'; exit "${PIPESTATUS[0]}") &
serve=$!
(export SPARKFLEET_STANDIN_CPUS=1 SPARKFLEET_MOLECULE_WORKERS=1
 run_lane build "${BUILD_LANE[@]}" 2>&1 | tee "$LOG_DIR/build.log" | sed -u 's/^/[build] /'; exit "${PIPESTATUS[0]}") &
build=$!
await vllm ray docker
log "background prerequisites done after $((SECONDS - started)) s"
wait "$serve"; serve_rc=$?
wait "$build"; build_rc=$?
log "both lanes done in $((SECONDS - started)) s (serve lane exit $serve_rc, build lane exit $build_rc)"
cpu_summary
log "machine speed: the reference loop took $(reference_loop) CPU-s at the end"

# The lanes' lines are interleaved, and a CI report keeps only the end of the output: repeat what failed
# (pytest's short summary of each failed lane, or its last lines when pytest never got that far) last.
failure_summary() {
  local name="$1" log_file="$LOG_DIR/$1.log"
  log "$name lane failed; what it reported:"
  if grep -q 'short test summary info' "$log_file"; then
    sed -n '/short test summary info/,$p' "$log_file" | grep -E '^(FAILED|ERROR)|short test summary' | cut -c1-400
  else
    tail -n 20 "$log_file"
  fi
}
[[ $serve_rc -eq 0 ]] || failure_summary serve
[[ $build_rc -eq 0 ]] || failure_summary build
[[ $serve_rc -eq 0 && $build_rc -eq 0 ]]
