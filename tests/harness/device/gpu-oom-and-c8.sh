#!/usr/bin/env bash
# Runs ON the device machine (one NVIDIA H200 lent by the workplace's `run` tool), from the repo root.
# Before it, as for gpu-run.sh: the kit parts of gpu-kit.sh, each carried in its own `run` call and copied to
# /tmp/kit/ (calls back to back: /tmp lasts only while warm); the last part may still be in .whl-gpu/pN.
#
#   bash tests/harness/device/gpu-oom-and-c8.sh     # -> $OUT/summary.txt, $OUT/oom-and-c8.tgz
#
#  1. the kit, and two random Llamas from the collection's generator (in parallel): the measured one of
#     gpu-run.sh / gpu-ratios.sh, and a narrow one (hidden 128) whose forward pass is small next to its logits
#  2. out of memory in the sampler warm-up (issue 18 item 2): a torch process holds all but LEAVE_GIB of the
#     card, so vLLM's start-up check passes at --gpu-memory-utilization 0.015, and --max-num-seqs /
#     --max-num-batched-tokens OOM_SEQS make the profile run's dummy sampler batch (OOM_SEQS x vocab logits,
#     several float32 copies) outgrow what is free, while the dummy forward pass still fits. One retry with
#     more left free if the start-up check refused, or twice the sequences if no OOM came
#  3. the healthy server of gpu-ratios.sh (--gpu-memory-utilization 0.5, VLLM_SERVER_DEV_MODE=1,
#     VLLM_USE_FLASHINFER_SAMPLER=0), time to healthy
#  4. gpu_c8_probe.py: the 8-stream gap's 2 x 2 probe (client x prompts) until the deadline
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
BUDGET_S=${BUDGET_S:-575}
DEADLINE=$((T0 + BUDGET_S))
REPO=$PWD
R=/tmp/gpu-oom-c8
mkdir -p "$R/logs" /tmp/kit /tmp/site
: > "$R/summary.txt"
up() { python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8000/health", timeout=2)' 2>/dev/null; }
# shellcheck source=tests/harness/device/lib.sh
. "$REPO/tests/harness/device/lib.sh"
finish() {
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv > "$R/logs/nvidia-smi-end.csv" 2>&1
  cp "$R/summary.txt" "$OUT/summary.txt"
  cp "$R"/c8-probe* "$OUT/" 2>/dev/null
  tar -C "$R" -czf "$OUT/oom-and-c8.tgz" --exclude='vb/*.json' --exclude='hf' . 2>/dev/null
  tar -C "$R" -czf "$OUT/vllm-bench-json.tgz" vb 2>/dev/null
  exit "${1:-0}"
}

# 1. kit and models
unpack_kit /tmp/site
export PYTHONPATH=/tmp/site:$REPO/.collections
python3 -c 'import vllm.entrypoints.openai.api_server, vllm.benchmarks.serve, torch, vllm
print("vllm", vllm.__version__, "torch", torch.__version__, torch.cuda.get_device_name(0))' > "$R/logs/import.log" 2>&1 \
  || { log "import failed: $(tail -3 "$R/logs/import.log")"; finish 1; }
log "$(tail -1 "$R/logs/import.log")"
export HF_HOME=$R/hf HF_HUB_OFFLINE=1
generate() {  # repo id, spec JSON -> prints the snapshot path
  python3 roles/weights/files/generate_tiny_model.py --hf-home "$HF_HOME" --repo-id "$1" \
    --revision 0123456789abcdef0123456789abcdef01234567 --spec "$2" 2>> "$R/logs/generate.err" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshot"])'
}
SPEC='{"layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 8, "intermediate": 2816, "vocab": 512, "max_position": 4096, "seed": 0}'
NARROW='{"layers": 2, "hidden": 128, "heads": 2, "kv_heads": 2, "intermediate": 256, "vocab": 1024, "max_position": 1024, "seed": 0}'
REPO_ID=sparkfleet/tiny-random-llama-h200
NARROW_ID=sparkfleet/tiny-random-llama-narrow
s=$(now)
generate "$REPO_ID" "$SPEC" > "$R/snapshot" &
generate "$NARROW_ID" "$NARROW" > "$R/snapshot-narrow" &
wait
SNAP=$(cat "$R/snapshot")
[ -d "$SNAP" ] && [ -d "$(cat "$R/snapshot-narrow")" ] || { log "generator failed: $(tail -5 "$R/logs/generate.err")"; finish 1; }
log "models generated in $(since "$s") s; narrow vocab $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$(cat "$R/snapshot-narrow")/config.json")"

# 2. out of memory in the sampler warm-up
oom_attempt() {  # n, GiB left free, sequences
  local n=$1 leave=$2 seqs=$3 s rc
  rm -f /tmp/held
  python3 -c 'import sys, time, torch
free, total = torch.cuda.mem_get_info()
x = torch.empty(int(free - float(sys.argv[1]) * (1 << 30)), dtype=torch.uint8, device="cuda")
open("/tmp/held", "w").write("%d %d %d" % (free, total, x.numel())); time.sleep(300)' "$leave" &
  HOLDER=$!
  for _i in $(seq 120); do [ -f /tmp/held ] && break; sleep 0.5; done
  nvidia-smi > "$R/logs/nvidia-smi-oom-$n.txt" 2>&1
  s=$(now)
  VLLM_USE_FLASHINFER_SAMPLER=0 timeout 200 python3 -m vllm.entrypoints.openai.api_server --model "$NARROW_ID" \
    --served-model-name tiny --port 8003 --max-model-len 256 --gpu-memory-utilization 0.015 \
    --max-num-seqs "$seqs" --max-num-batched-tokens "$seqs" > "$R/logs/fail-sampler-oom-$n.log" 2>&1; rc=$?
  kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
  echo "fail-sampler-oom-$n: rc=$rc exited after $(since "$s") s; left free ${leave} GiB of the card" \
    "(holder: $(cat /tmp/held 2>/dev/null)); --gpu-memory-utilization 0.015 --max-num-seqs $seqs" \
    "--max-num-batched-tokens $seqs --max-model-len 256, VLLM_USE_FLASHINFER_SAMPLER=0" | tee -a "$R/failures.txt"
  grep -E "Error|error:" "$R/logs/fail-sampler-oom-$n.log" | grep -v "^ *raise\|Traceback" | tail -3 | cut -c1-400 \
    | sed 's/^/    /' | tee -a "$R/failures.txt"
  for _i in $(seq 30); do [ "$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)" -lt 1000 ] && break; sleep 1; done
}
oom_attempt 1 "${LEAVE_GIB:-3.4}" "${OOM_SEQS:-393216}"
if ! grep -q "warming up sampler" "$R/logs/fail-sampler-oom-1.log"; then
  if grep -q "on startup is less than desired" "$R/logs/fail-sampler-oom-1.log"; then
    oom_attempt 2 "$(awk -v l="${LEAVE_GIB:-3.4}" 'BEGIN { print l + 1.5 }')" "${OOM_SEQS:-393216}"
  else
    oom_attempt 2 "${LEAVE_GIB:-3.4}" $(( ${OOM_SEQS:-393216} * 2 ))
  fi
fi
cat "$R/failures.txt" >> "$R/summary.txt"

# 3. the healthy server
S_START=$(now)
VLLM_SERVER_DEV_MODE=1 VLLM_USE_FLASHINFER_SAMPLER=0 setsid python3 -m vllm.entrypoints.openai.api_server \
  --served-model-name tiny --max-model-len 4096 --model "$REPO_ID" --port 8000 --gpu-memory-utilization 0.5 \
  > "$R/logs/server.log" 2>&1 &
SERVER=$!
healthy=""
while [ "$(date +%s)" -lt $((DEADLINE - 60)) ]; do
  kill -0 "$SERVER" 2>/dev/null || { log "server exited before healthy"; break; }
  if up; then healthy=$(since "$S_START"); break; fi
  sleep 1
done
[ -n "$healthy" ] || { log "not healthy"; tail -30 "$R/logs/server.log"; kill -- -"$SERVER" 2>/dev/null; finish 1; }
log "healthy after $healthy s"

# 4. the 8-stream probe
python3 tests/harness/device/gpu_c8_probe.py --url http://127.0.0.1:8000 --model tiny --tokenizer "$SNAP" \
  --rounds "${ROUNDS:-30}" --tokens "${TOKENS:-256}" --deadline $((DEADLINE - 10)) \
  --out "$R/c8-probe.jsonl" --workdir "$R/vb" > "$R/logs/c8-probe.log" 2>&1
log "c8 probe rc=$?"
cat "$R/c8-probe-summary.txt" >> "$R/summary.txt" 2>/dev/null || tail -20 "$R/logs/c8-probe.log" >> "$R/summary.txt"
kill -- -"$SERVER" 2>/dev/null
grep -v '"POST /v1\|"GET /health\|"POST /tokenize\|"POST /detokenize\|"POST /reset_prefix_cache\|"GET /metrics' \
  "$R/logs/server.log" > "$R/logs/server-startup.log"
log "done"
finish 0
