#!/usr/bin/env bash
# Runs ON the device machine (one NVIDIA H200 lent by the workplace's `run` tool), from the repo root:
# the paired ratios of issue 18 item 3 (gpu_ratios.py), the module's standard and sweep modes against
# `vllm bench serve` at 1, 8 and 64 streams. Before it, as for gpu-run.sh: the kit parts of gpu-kit.sh, each
# carried in its own `run` call and copied to /tmp/kit/ (calls back to back: /tmp lasts only while warm).
#
#   bash tests/harness/device/gpu-ratios.sh      # -> $OUT/summary.txt, ratio-rounds*.{jsonl,txt}, h200-ratios.tgz
#   KEEP_SERVER=1 bash tests/harness/device/gpu-ratios.sh     # leave the server up (setsid) for a next call...
#   TAG=b bash tests/harness/device/gpu-ratios.sh             # ...which, within the warm window, finds it healthy
#                                                             # and only runs more rounds (ratio-rounds-b.*)
#   MODEL=tiny_gemma4_h200 bash tests/harness/device/gpu-ratios.sh   # the test catalog's tiny Gemma 4 MoE
#   RATIO_ARGS="--repeats 2 --cell-warmup --sweep-prompts 16,64,256 --c64-tokens 1024" ...  # pass 6's rounds
#   PIN=0 ...                                   # server and clients unpinned (passes 1-5)
#
# Pass 6: the server (API process and engine core) and the clients (gpu_ratios.py, `vllm bench serve` in it)
# run on disjoint halves of the CPUs (cpu_halves), unless PIN=0: a tiny model on an H200 is bound by Python on
# the CPU, on both sides of the socket, and the two competed for the same cores before.
#
# The server: without MODEL, the one gpu-run.sh measures (the random 4-layer Llama of lib.sh,
# --gpu-memory-utilization 0.5); with MODEL=tiny_gemma4_h200, the Gemma 4 stand-in (h200_catalog.GEMMA4_SPEC)
# started with the argv the planner gave it on the H200 (lib.sh's GEMMA4_PLAN, the launcher's `--model` + argv;
# tests/unit/test_gpu_records.py holds today's planner to it). lib.sh's start_server sets the environment.
set -u
# shellcheck source=tests/harness/device/lib.sh
. "$PWD/tests/harness/device/lib.sh"
TAG=${TAG:+-$TAG}
start_run /tmp/gpu-ratios 570 "$TAG"   # a TAG call adds to the first call's summary
finish() {
  cp "$R/summary.txt" "$OUT/summary.txt"
  cp "$R"/ratio-rounds* "$OUT/" 2>/dev/null
  tar -C "$R" -czf "$OUT/h200-ratios$TAG.tgz" --exclude='vb/*.json' . 2>/dev/null
  tar -C "$R" -czf "$OUT/vllm-bench-json$TAG.tgz" vb 2>/dev/null
  exit "${1:-0}"
}

export PYTHONPATH=/tmp/site:$REPO/.collections
export HF_HOME=/tmp/hf HF_HUB_OFFLINE=1
pin_halves
PREVIOUS=()
if [ -n "$TAG" ] && up && [ -f "$R/snapshot" ]; then
  SNAP=$(cat "$R/snapshot")
  log "server from the previous call still healthy: rounds only"
  mapfile -t PREVIOUS < <(ls "$R"/ratio-rounds*.jsonl | grep -v "/ratio-rounds$TAG.jsonl\$")
  [ "${#PREVIOUS[@]}" = 0 ] || PREVIOUS=(--previous "${PREVIOUS[@]}")
else
PINNING="server (API process and engine core) on CPUs $SERVER_CPUS, clients on CPUs $CLIENT_CPUS"
[ -n "${SERVER_CPUS:-}" ] || PINNING="server and clients unpinned"
log "cpus: $(nproc) online, $(lscpu | sed -n 's/^Model name: *//p'), $(lscpu | sed -n 's/^Thread(s) per core: *//p') threads a core; $PINNING"
kit_ready

case ${MODEL:-} in
  tiny_gemma4_h200)
    SPEC=$(gemma4_spec)
    REPO_ID=$GEMMA4_ID
    SERVED=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["served_name"])' "$GEMMA4_PLAN")
    mapfile -t SERVER_ARGV < <(python3 -c 'import json, sys; print("\n".join(["--model"] + json.load(open(sys.argv[1]))["argv"]))' "$GEMMA4_PLAN") ;;
  "")
    SPEC=$LLAMA_SPEC
    REPO_ID=$LLAMA_ID
    SERVED=tiny
    SERVER_ARGV=(--served-model-name tiny --max-model-len 4096 --model "$REPO_ID" --port 8000 --gpu-memory-utilization 0.5) ;;
  *) log "unknown MODEL $MODEL (tiny_gemma4_h200, or unset for the Llama)"; finish 1 ;;
esac
SNAP=$(generate "$REPO_ID" "$SPEC")
[ -d "$SNAP" ] || { log "generator failed: $(tail -3 "$R/logs/generate.err")"; finish 1; }
echo "$SNAP" > "$R/snapshot"; echo "$SERVED" > "$R/served"
log "model ${MODEL:-llama} generated: $REPO_ID, spec $SPEC"
log "server argv: ${SERVER_ARGV[*]}"

start_server "$R/logs/server.log" "${SERVER_ARGV[@]}"
echo "$SERVER" > "$R/server.pid"   # setsid: its process group, ended by id after the rounds
wait_healthy $((T0 + BUDGET_S - 100)) \
  || { log "not healthy"; tail -30 "$R/logs/server.log"; kill -- -"$SERVER" 2>/dev/null; finish 1; }
log "healthy after $healthy s"
affinity "$SERVER" > "$R/logs/server-affinity.txt"
log "server processes and their CPUs: $(awk '{printf "%s%s %s [%s]", (NR > 1 ? "; " : ""), $1, $2, $3}' "$R/logs/server-affinity.txt")"
fi

log "rounds${TAG:+ ($TAG)}: ${CLIENT_PIN[*]:-unpinned} gpu_ratios.py ${RATIO_ARGS:-}"
# shellcheck disable=SC2086  # RATIO_ARGS: words
"${CLIENT_PIN[@]}" python3 tests/harness/device/gpu_ratios.py --url http://127.0.0.1:8000 --model "$(cat "$R/served")" \
  --tokenizer "$SNAP" --rounds "${ROUNDS:-8}" --tokens "${TOKENS:-256}" --prompt-tokens 64 --deadline $((DEADLINE - 8)) \
  --only "${ONLY:-}" ${RATIO_ARGS:-} "${PREVIOUS[@]}" --out "$R/ratio-rounds$TAG.jsonl" --workdir "$R/vb" \
  > "$R/logs/ratios$TAG.log" 2>&1
log "ratios rc=$?"
cat "$R/ratio-rounds$TAG-summary.txt" >> "$R/summary.txt" 2>/dev/null || tail -20 "$R/logs/ratios$TAG.log" >> "$R/summary.txt"
[ -n "${KEEP_SERVER:-}" ] || kill -- -"$(cat "$R/server.pid")" 2>/dev/null
startup_log "$R/logs/server.log" "$R/logs/server-startup.log"
log "done"
finish 0
