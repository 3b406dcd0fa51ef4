#!/usr/bin/env bash
# Runs ON the device machine, from the repo root: pass 8 of issue 18 item 3. Before pairing the module with
# `vllm bench serve` again, measure each side's own run-to-run drift (gpu_drift.py: per cell, one side N times in
# a row, then the other), on the tiny Gemma 4 stand-in and on a larger one whose decode steps do far more GPU work
# (h200_catalog.GEMMA4_LARGE_SPEC, about 3.0 B parameters); then, with the time left, paired rounds (gpu_ratios.py,
# pass 6's A B B A) on the larger one. Before it, the kit parts of gpu-kit.sh, each carried in its own `run` call
# and copied to /tmp/kit/ (calls back to back: /tmp lasts only while the machine stays warm).
#
# STEPS, run in order (one call may not hold them all: the server of a call is left up for the next):
#   setup          kit unpacked, imports checked, the tiny stand-in generated; the larger one generated in the
#                  background on the clients' CPUs (drift and start:large wait for it)
#   start:MODEL    stop a running server, start MODEL's (tiny | large) with pass 3's planned argv (the larger one:
#                  the same argv with its own checkpoint and served name), on the server's CPUs; no wait
#   wait           until the server is healthy (logs how long it took)
#   drift          gpu_drift.py on the server's model: DRIFT_ARGS (default --repeats 5), up to the deadline
#   ratios         gpu_ratios.py paired rounds on the server's model: RATIO_ARGS, ROUNDS, up to the deadline;
#                  a later call's ratios step adds its rounds to the earlier ones (--previous)
#   stop           the server ended
#
#   STEPS="setup start:tiny wait drift start:large" bash tests/harness/device/gpu-drift.sh   # call 1
#   TAG=b STEPS="wait drift ratios" bash tests/harness/device/gpu-drift.sh                  # call 2
#   TAG=c STEPS="ratios stop" bash tests/harness/device/gpu-drift.sh                        # call 3
#   BUDGET_S=570 (this call's seconds), PIN=0 (no CPU halves)
# -> $OUT/summary.txt (this call's log; a TAG call appends to the first one's), drift-*-summary.txt,
#    ratio-rounds$TAG-summary.txt, and gpu-drift$TAG.tgz: those, drift-*.jsonl (a line a run), ratio-rounds*.jsonl
#    and logs/ (server logs, drift and ratio logs, generator output); at most 8 files come back from a call
set -u
# shellcheck source=tests/harness/device/lib.sh
. "$PWD/tests/harness/device/lib.sh"
TAG=${TAG:+-$TAG}
start_run /tmp/gpu-drift 570 "$TAG"
finish() {  # at most 8 files come back: the summaries apart, everything else in one archive
  cp "$R/summary.txt" "$OUT/summary.txt"
  cp "$R"/drift-*-summary.txt "$R"/ratio-rounds$TAG-summary.txt "$OUT/" 2>/dev/null
  ( cd "$R" && tar -czf "$OUT/gpu-drift$TAG.tgz" summary.txt logs $(ls drift-* ratio-rounds* 2>/dev/null) )
  exit "${1:-0}"
}

export PYTHONPATH=/tmp/site:$REPO/.collections
export HF_HOME=/tmp/hf HF_HUB_OFFLINE=1
pin_halves
log "call${TAG:- (first)}: steps ${STEPS:-}; budget $BUDGET_S s"

large_spec() {
  python3 -c 'import json, sys; sys.path.insert(0, "tests/harness/device"); import h200_catalog as c
print(json.dumps(c.GEMMA4_LARGE_SPEC))'
}
LARGE_ID=$(python3 -c 'import sys; sys.path.insert(0, "tests/harness/device"); import h200_catalog as c; print(c.GEMMA4_LARGE_ID)' 2>/dev/null)

step_setup() {
  log "cpus: $(nproc) online, $(lscpu | sed -n 's/^Model name: *//p'); server on CPUs ${SERVER_CPUS:-all}, clients on ${CLIENT_CPUS:-all}"
  log "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader)"
  kit_ready
  local snap s
  snap=$(generate "$GEMMA4_ID" "$(gemma4_spec)")
  [ -d "$snap" ] || { log "generator failed: $(tail -3 "$R/logs/generate.err")"; finish 1; }
  echo "$snap" > "$R/snapshot-tiny"
  log "tiny stand-in generated: $GEMMA4_ID"
  s=$(now)
  ( "${CLIENT_PIN[@]}" python3 "$REPO/roles/weights/files/generate_tiny_model.py" --hf-home "$HF_HOME" \
      --repo-id "$LARGE_ID" --revision 0123456789abcdef0123456789abcdef01234567 --spec "$(large_spec)" \
      > "$R/logs/generate-large.json" 2> "$R/logs/generate-large.err"
    since "$s" > "$R/generated-large" ) &
  touch "$R/large-launched"
  log "large stand-in generating in the background: $LARGE_ID, spec $(large_spec)"
}

# wait_large: the background generator done (up to the deadline); its snapshot in $R/snapshot-large.
wait_large() {
  [ -f "$R/snapshot-large" ] && return 0
  while [ ! -f "$R/generated-large" ] && [ "$(date +%s)" -lt "$DEADLINE" ]; do sleep 1; done
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["snapshot"])' "$R/logs/generate-large.json" \
    > "$R/snapshot-large" 2>/dev/null || { log "large generator failed: $(tail -3 "$R/logs/generate-large.err")"; return 1; }
  log "large stand-in generated in $(cat "$R/generated-large") s: $(du -sh "$(cat "$R/snapshot-large")/" -L | cut -f1)"
}

stop_server() {
  [ -f "$R/server.pid" ] || return 0
  kill -- -"$(cat "$R/server.pid")" 2>/dev/null
  for _i in $(seq 30); do kill -0 "$(cat "$R/server.pid")" 2>/dev/null || break; sleep 1; done
  drain_gpu
  startup_log "$R/logs/server-$(cat "$R/model").log" "$R/logs/server-startup-$(cat "$R/model").log"
  rm -f "$R/server.pid"
}

step_start() {
  local model=$1 served snap argv
  stop_server
  case $model in
    tiny) snap=$(cat "$R/snapshot-tiny"); served=gemma-4-tiny
      mapfile -t argv < <(python3 -c 'import json, sys; print("\n".join(["--model"] + json.load(open(sys.argv[1]))["argv"]))' "$GEMMA4_PLAN") ;;
    large) wait_large || finish 1; snap=$(cat "$R/snapshot-large"); served=gemma-4-3b-standin
      mapfile -t argv < <(python3 -c 'import json, sys
argv = json.load(open(sys.argv[1]))["argv"]
argv[0] = sys.argv[2]
argv[argv.index("--served-model-name") + 1] = sys.argv[3]
print("\n".join(["--model"] + argv))' "$GEMMA4_PLAN" "$LARGE_ID" "$served") ;;
    *) log "unknown model $model (tiny, large)"; finish 1 ;;
  esac
  echo "$model" > "$R/model"; echo "$served" > "$R/served"; echo "$snap" > "$R/snapshot"
  log "start $model: ${argv[*]}"
  start_server "$R/logs/server-$model.log" "${argv[@]}"
  echo "$SERVER" > "$R/server.pid"; echo "$S_START" > "$R/server.start"
}

step_wait() {
  local pgid start
  pgid=$(cat "$R/server.pid"); start=$(cat "$R/server.start")
  while [ "$(date +%s)" -lt "$DEADLINE" ]; do
    kill -0 "$pgid" 2>/dev/null || { log "server exited before healthy"; tail -30 "$R/logs/server-$(cat "$R/model").log"; finish 1; }
    if up; then
      log "$(cat "$R/model") healthy after $(since "$start") s since its start"
      affinity "$pgid" > "$R/logs/server-affinity-$(cat "$R/model").txt"
      log "server processes and their CPUs: $(awk '{printf "%s%s %s [%s]", (NR > 1 ? "; " : ""), $1, $2, $3}' "$R/logs/server-affinity-$(cat "$R/model").txt")"
      grep -m3 -E "Model loading took|Available KV cache memory|init engine .* took" "$R/logs/server-$(cat "$R/model").log" \
        | sed 's/^.*\] //' | while read -r line; do log "  $line"; done
      return 0
    fi
    sleep 1
  done
  log "not healthy by the deadline"; finish 1
}

step_drift() {
  local model
  model=$(cat "$R/model")
  [ ! -f "$R/large-launched" ] || wait_large || finish 1   # no generator beside the measured runs
  log "drift $model: ${CLIENT_PIN[*]:-unpinned} gpu_drift.py ${DRIFT_ARGS:---repeats 5}"
  # shellcheck disable=SC2086  # DRIFT_ARGS: words
  "${CLIENT_PIN[@]}" python3 tests/harness/device/gpu_drift.py --url http://127.0.0.1:8000 --model "$(cat "$R/served")" \
    --tokenizer "$(cat "$R/snapshot")" --label "$model" --prompt-tokens 64 --deadline $((DEADLINE - ${DRIFT_RESERVE:-8})) \
    --server-pgid "$(cat "$R/server.pid")" ${DRIFT_ARGS:---repeats 5} --out "$R/drift-$model.jsonl" --workdir "$R/vb" \
    > "$R/logs/drift-$model.log" 2>&1
  log "drift rc=$?"
  cat "$R/drift-$model-summary.txt" >> "$R/summary.txt" 2>/dev/null || tail -20 "$R/logs/drift-$model.log" >> "$R/summary.txt"
}

step_ratios() {
  local previous=()
  mapfile -t previous < <(ls "$R"/ratio-rounds*.jsonl 2>/dev/null | grep -v "/ratio-rounds$TAG.jsonl\$")
  [ "${#previous[@]}" = 0 ] || previous=(--previous "${previous[@]}")
  log "rounds${TAG:+ ($TAG)} on $(cat "$R/model"): ${CLIENT_PIN[*]:-unpinned} gpu_ratios.py ${RATIO_ARGS:-}"
  # shellcheck disable=SC2086  # RATIO_ARGS: words
  "${CLIENT_PIN[@]}" python3 tests/harness/device/gpu_ratios.py --url http://127.0.0.1:8000 --model "$(cat "$R/served")" \
    --tokenizer "$(cat "$R/snapshot")" --rounds "${ROUNDS:-8}" --tokens "${TOKENS:-256}" --prompt-tokens 64 \
    --deadline $((DEADLINE - 8)) ${RATIO_ARGS:-} "${previous[@]}" --out "$R/ratio-rounds$TAG.jsonl" --workdir "$R/vb" \
    > "$R/logs/ratios$TAG.log" 2>&1
  log "ratios rc=$?"
  cat "$R/ratio-rounds$TAG-summary.txt" >> "$R/summary.txt" 2>/dev/null || tail -20 "$R/logs/ratios$TAG.log" >> "$R/summary.txt"
}

for step in ${STEPS:-}; do
  case $step in
    setup) step_setup ;;
    start:*) step_start "${step#start:}" ;;
    wait) step_wait ;;
    drift) step_drift ;;
    ratios) step_ratios ;;
    stop) stop_server ;;
    *) log "unknown step $step"; finish 1 ;;
  esac
done
# the running server's start-up log so far, for this call's files
[ ! -f "$R/model" ] || startup_log "$R/logs/server-$(cat "$R/model").log" "$R/logs/server-startup-$(cat "$R/model").log"
log "done"
finish 0
