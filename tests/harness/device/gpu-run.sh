#!/usr/bin/env bash
# Runs ON the device machine (one NVIDIA H200 lent by the workplace's `run` tool), from the repo root.
# Before it: the parts made by gpu-kit.sh, each carried in its own `run` call and copied to /tmp/kit/ there
# (calls back to back: the machine keeps /tmp only while warm); the last part may still be in .whl-gpu/pN.
#
#   bash tests/harness/device/gpu-run.sh        # everything lands in $OUT/h200-run.tgz + $OUT/summary.txt
#
# Order (each stage timed, a deadline keeps the whole inside one 10-minute call):
#  1. assemble + unpack the kit into /tmp/site (no pip: gpu-kit.sh unpacked the wheels already)
#  2. generate the random Llama with the collection's generator (roles/weights/files/generate_tiny_model.py)
#     into an HF cache, served by checkpoint id with HF_HUB_OFFLINE=1 as the native runtime serves it
#  3. start the healthy server (--gpu-memory-utilization 0.5) and, at the same time, two start-ups that
#     must fail: port already in use, model path that does not exist (both fail before touching the GPU)
#  4. time to healthy; one chat request
#  5. gpu_bench.py: paired rounds, the collection's client vs vllm bench serve, c1/c8/c64
#  6. stop the server; free-memory failure: torch holds 120 GiB, vLLM starts with --gpu-memory-utilization 0.9
set -u
# shellcheck source=tests/harness/device/lib.sh
. "$PWD/tests/harness/device/lib.sh"
start_run /tmp/gpu-run 565
finish() {
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv > "$R/logs/nvidia-smi-end.csv" 2>&1
  cp "$R/summary.txt" "$OUT/summary.txt"
  tar -C "$R" -czf "$OUT/h200-run.tgz" --exclude='vb/*.json' . 2>/dev/null
  tar -C "$R" -czf "$OUT/vllm-bench-json.tgz" vb 2>/dev/null
  exit "${1:-0}"
}

# 1. the kit; the server's own import chain first: a kit that does not fit the image fails here in seconds.
export PYTHONPATH=/tmp/site:$REPO/.collections
kit_ready
python3 --version >> "$R/summary.txt"; nvidia-smi > "$R/logs/nvidia-smi-start.txt" 2>&1

# 2. the model
export HF_HOME=/tmp/hf HF_HUB_OFFLINE=1
REPO_ID=$LLAMA_ID
s=$(now)
SNAP=$(generate "$REPO_ID" "$LLAMA_SPEC")
[ -d "$SNAP" ] || { log "generator failed"; cat "$R/logs/generate.err"; finish 1; }
log "model generated in $(since "$s") s (spec $LLAMA_SPEC)"

# curl where the image has it, else the standard library
if command -v curl > /dev/null; then
  get() { curl -sf -o /dev/null "$1"; }
  fetch() { curl -s "$1"; }
  post() { curl -s "$1" -H 'Content-Type: application/json' -d "$2"; }
else
  get() { python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" 2>/dev/null; }
  fetch() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$1"; }
  post() { python3 -c 'import sys, urllib.request; r = urllib.request.Request(sys.argv[1], sys.argv[2].encode(), {"Content-Type": "application/json"}); sys.stdout.write(urllib.request.urlopen(r, timeout=60).read().decode())' "$1" "$2"; }
fi
serve() { python3 -m vllm.entrypoints.openai.api_server --served-model-name tiny --max-model-len 4096 "$@"; }
failure() {  # name, then serve arguments; records how long the process took to exit
  local name=$1 s rc; shift
  s=$(now)
  timeout "${FAIL_TIMEOUT:-150}" bash -c "$(declare -f serve); serve $*" > "$R/logs/$name.log" 2>&1; rc=$?
  echo "$name: rc=$rc exited after $(since "$s") s; argv: $*" >> "$R/failures.txt"
  error_lines "$R/logs/$name.log" 2 >> "$R/failures.txt"
}

# 3. healthy server + the two early failures
python3 -c 'import socket, time; s = socket.socket(); s.bind(("0.0.0.0", 8001)); s.listen(); time.sleep(900)' &
HOLD_PORT=$!
sleep 1
S_START=$(now)
VLLM_SERVER_DEV_MODE=1 setsid bash -c "$(declare -f serve); serve --model $REPO_ID --port 8000 --gpu-memory-utilization 0.5" \
  > "$R/logs/healthy.log" 2>&1 &
SERVER=$!
failure fail-port-in-use --model "$REPO_ID" --port 8001 --gpu-memory-utilization 0.3 &
F1=$!
failure fail-model-path-missing --model /var/lib/vllm/models/does-not-exist --port 8002 --gpu-memory-utilization 0.3 &
F2=$!

# 4. time to healthy
healthy=""
while [ $(( $(date +%s) - T0 )) -lt $((BUDGET_S - 120)) ]; do
  if ! kill -0 "$SERVER" 2>/dev/null; then log "server exited before healthy"; break; fi
  if get http://127.0.0.1:8000/health; then healthy=$(since "$S_START"); break; fi
  sleep 0.5
done
wait "$F1" "$F2"; kill "$HOLD_PORT" 2>/dev/null
cat "$R/failures.txt" | tee -a "$R/summary.txt"
if [ -z "$healthy" ]; then log "not healthy"; kill -- -"$SERVER" 2>/dev/null; finish 1; fi
log "healthy after $healthy s (from process start to /health 200; two failing start-ups ran beside it)"
post http://127.0.0.1:8000/v1/chat/completions \
  '{"model": "tiny", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16}' > "$R/chat.json"
log "chat: $(head -c 300 "$R/chat.json")"
fetch http://127.0.0.1:8000/metrics | grep -E '^vllm:cache_config_info' | head -2 > "$R/cache-config.txt"

# 5. paired rounds (stop starting rounds 80 s before the deadline: the free-memory failure needs ~50 s)
s=$(now)
python3 tests/harness/device/gpu_bench.py --url http://127.0.0.1:8000 --model tiny --tokenizer "$SNAP" \
  --rounds "${ROUNDS:-8}" --tokens "${TOKENS:-256}" --prompt-tokens 64 --deadline $((DEADLINE - ${BENCH_RESERVE_S:-80})) \
  --out "$R/bench-rounds.jsonl" --workdir "$R/vb" > "$R/logs/bench.log" 2>&1
log "bench rc=$? in $(since "$s") s"
cat "$R/bench-rounds-summary.txt" >> "$R/summary.txt" 2>/dev/null
tail -3 "$R/logs/bench.log" >> "$R/summary.txt"
kill -- -"$SERVER" 2>/dev/null; sleep 5; kill -9 -- -"$SERVER" 2>/dev/null
drain_gpu

# 6. free-memory failure: another process holds 120 GiB of the card (SKIP_FREE_MEMORY=1: not this time)
if [ -z "${SKIP_FREE_MEMORY:-}" ] && [ $(( DEADLINE - $(date +%s) )) -gt 45 ]; then
  python3 -c 'import torch, time; x = torch.empty(120 << 30, dtype=torch.uint8, device="cuda"); open("/tmp/held", "w").write("1"); time.sleep(600)' &
  HOLDER=$!
  for _i in $(seq 60); do [ -f /tmp/held ] && break; sleep 0.5; done
  nvidia-smi > "$R/logs/nvidia-smi-held.txt" 2>&1
  failure fail-free-memory --model "$REPO_ID" --port 8003 --gpu-memory-utilization 0.9
  kill "$HOLDER" 2>/dev/null
  tail -1 "$R/failures.txt" | tee -a "$R/summary.txt"
else
  log "no time left for the free-memory failure"
fi
# 7. the client-capacity benchmark (the collection's client against the fast token source, one core)
if [ -z "${SKIP_CAPACITY:-}" ] && [ $(( DEADLINE - $(date +%s) )) -gt 30 ]; then
  timeout $(( DEADLINE - $(date +%s) )) python3 tests/benchmarks/client_capacity.py --rounds 3 > "$R/logs/client-capacity.log" 2>&1
  log "client capacity rc=$?: $(tail -2 "$R/logs/client-capacity.log" | tr '\n' ' ')"
fi
log "done"
finish 0
