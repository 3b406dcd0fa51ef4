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
#
#   MODEL=tiny_gemma4_h200 bash tests/harness/device/gpu-ratios.sh   # the test catalog's tiny Gemma 4 MoE
#
# The server is the one gpu-run.sh measures (same random 4-layer Llama, --gpu-memory-utilization 0.5) or, with
# MODEL=tiny_gemma4_h200, the Gemma 4 stand-in (h200_catalog.GEMMA4_SPEC, served as gemma-4-tiny) with the rest of
# the argv the planner gave it in pass 3 (tests/fixtures/h200/gemma4-run/plan-h200.json); both with
# VLLM_USE_FLASHINFER_SAMPLER=0: flashinfer's sampler compiles with ninja for ~120 s on a fresh machine, time
# the rounds need more; both sides of every pair share the server, so the sampler does not bias a ratio.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
BUDGET_S=${BUDGET_S:-570}
DEADLINE=$((T0 + BUDGET_S))
REPO=$PWD
R=/tmp/gpu-ratios
TAG=${TAG:+-$TAG}
mkdir -p "$R/logs" /tmp/kit /tmp/site
: > "$R/summary.txt"
up() { python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8000/health", timeout=2)' 2>/dev/null; }
# shellcheck source=tests/harness/device/lib.sh
. "$REPO/tests/harness/device/lib.sh"
finish() {
  cp "$R/summary.txt" "$OUT/summary.txt"
  cp "$R"/ratio-rounds* "$OUT/" 2>/dev/null
  tar -C "$R" -czf "$OUT/h200-ratios$TAG.tgz" --exclude='vb/*.json' . 2>/dev/null
  tar -C "$R" -czf "$OUT/vllm-bench-json$TAG.tgz" vb 2>/dev/null
  exit "${1:-0}"
}

export PYTHONPATH=/tmp/site:$REPO/.collections
export HF_HOME=/tmp/hf HF_HUB_OFFLINE=1
if [ -n "$TAG" ] && up && [ -f "$R/snapshot" ]; then
  SNAP=$(cat "$R/snapshot")
  log "server from the previous call still healthy: rounds only"
else
unpack_kit /tmp/site
python3 -c 'import vllm.entrypoints.openai.api_server, vllm.benchmarks.serve, torch, vllm
print("vllm", vllm.__version__, "torch", torch.__version__, torch.cuda.get_device_name(0))' > "$R/logs/import.log" 2>&1 \
  || { log "import failed: $(tail -3 "$R/logs/import.log")"; finish 1; }
tail -1 "$R/logs/import.log" | tee -a "$R/summary.txt"

case ${MODEL:-} in
  tiny_gemma4_h200)
    SPEC=$(python3 -c 'import json, sys; sys.path.insert(0, "tests/harness/device"); import h200_catalog; print(json.dumps(h200_catalog.GEMMA4_SPEC))')
    REPO_ID=sparkfleet/tiny-random-gemma4-moe-h200
    SERVED=gemma-4-tiny
    SERVER_ARGS=(--max-num-batched-tokens 8192 --max-num-seqs 64 --reasoning-parser gemma4 --tool-call-parser gemma4
                 --enable-auto-tool-choice) ;;
  "")
    SPEC='{"layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 8, "intermediate": 2816, "vocab": 512, "max_position": 4096, "seed": 0}'
    REPO_ID=sparkfleet/tiny-random-llama-h200
    SERVED=tiny
    SERVER_ARGS=() ;;
  *) log "unknown MODEL $MODEL (tiny_gemma4_h200, or unset for the Llama)"; finish 1 ;;
esac
log "model ${MODEL:-llama}: $REPO_ID served as $SERVED, spec $SPEC"
out=$(python3 roles/weights/files/generate_tiny_model.py --hf-home "$HF_HOME" --repo-id "$REPO_ID" \
  --revision 0123456789abcdef0123456789abcdef01234567 --spec "$SPEC" 2> "$R/logs/generate.err")
SNAP=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshot"])') || { log "generator failed"; finish 1; }
echo "$SNAP" > "$R/snapshot"; echo "$SERVED" > "$R/served"
log "model generated"

S_START=$(now)
VLLM_SERVER_DEV_MODE=1 VLLM_USE_FLASHINFER_SAMPLER=0 setsid python3 -m vllm.entrypoints.openai.api_server \
  --served-model-name "$SERVED" --max-model-len 4096 --model "$REPO_ID" --port 8000 --gpu-memory-utilization 0.5 \
  "${SERVER_ARGS[@]}" > "$R/logs/server.log" 2>&1 &
SERVER=$!
echo "$SERVER" > "$R/server.pid"   # setsid: its process group, ended by id after the rounds
healthy=""
while [ $(( $(date +%s) - T0 )) -lt $((BUDGET_S - 100)) ]; do
  kill -0 "$SERVER" 2>/dev/null || { log "server exited before healthy"; break; }
  if up; then healthy=$(since "$S_START"); break; fi
  sleep 1
done
[ -n "$healthy" ] || { log "not healthy"; tail -30 "$R/logs/server.log"; kill -- -"$SERVER" 2>/dev/null; finish 1; }
log "healthy after $healthy s"
fi

python3 tests/harness/device/gpu_ratios.py --url http://127.0.0.1:8000 --model "$(cat "$R/served")" --tokenizer "$SNAP" \
  --rounds "${ROUNDS:-8}" --tokens "${TOKENS:-256}" --prompt-tokens 64 --deadline $((DEADLINE - 8)) --only "${ONLY:-}" \
  --out "$R/ratio-rounds$TAG.jsonl" --workdir "$R/vb" > "$R/logs/ratios$TAG.log" 2>&1
log "ratios rc=$?"
cat "$R/ratio-rounds$TAG-summary.txt" >> "$R/summary.txt" 2>/dev/null || tail -20 "$R/logs/ratios$TAG.log" >> "$R/summary.txt"
[ -n "${KEEP_SERVER:-}" ] || kill -- -"$(cat "$R/server.pid")" 2>/dev/null
grep -v '"POST /v1\|"GET /health\|"POST /tokenize\|"POST /reset_prefix_cache\|"GET /metrics' "$R/logs/server.log" > "$R/logs/server-startup.log"
log "done"
finish 0
