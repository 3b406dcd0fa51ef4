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
# shellcheck source=tests/harness/device/lib.sh
. "$PWD/tests/harness/device/lib.sh"
start_run /tmp/gpu-oom-c8 575
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
check_imports
log "$(tail -1 "$R/logs/import.log")"
export HF_HOME=$R/hf HF_HUB_OFFLINE=1
NARROW='{"layers": 2, "hidden": 128, "heads": 2, "kv_heads": 2, "intermediate": 256, "vocab": 1024, "max_position": 1024, "seed": 0}'
REPO_ID=$LLAMA_ID
NARROW_ID=sparkfleet/tiny-random-llama-narrow
s=$(now)
generate "$REPO_ID" "$LLAMA_SPEC" > "$R/snapshot" &
generate "$NARROW_ID" "$NARROW" > "$R/snapshot-narrow" &
wait
SNAP=$(cat "$R/snapshot")
[ -d "$SNAP" ] && [ -d "$(cat "$R/snapshot-narrow")" ] || { log "generator failed: $(tail -5 "$R/logs/generate.err")"; finish 1; }
log "models generated in $(since "$s") s; narrow vocab $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$(cat "$R/snapshot-narrow")/config.json")"

# 2. out of memory in the sampler warm-up
oom_attempt() {  # n, GiB left free, sequences
  local n=$1 leave=$2 seqs=$3 s rc took
  hold_gpu "$leave"
  nvidia-smi > "$R/logs/nvidia-smi-oom-$n.txt" 2>&1
  s=$(now)
  VLLM_USE_FLASHINFER_SAMPLER=0 timeout 200 python3 -m vllm.entrypoints.openai.api_server --model "$NARROW_ID" \
    --served-model-name tiny --port 8003 --max-model-len 256 --gpu-memory-utilization 0.015 \
    --max-num-seqs "$seqs" --max-num-batched-tokens "$seqs" > "$R/logs/fail-sampler-oom-$n.log" 2>&1; rc=$?
  took=$(since "$s")
  release_gpu
  echo "fail-sampler-oom-$n: rc=$rc exited after $took s; left free ${leave} GiB of the card" \
    "(holder: $(cat /tmp/held 2>/dev/null)); --gpu-memory-utilization 0.015 --max-num-seqs $seqs" \
    "--max-num-batched-tokens $seqs --max-model-len 256, VLLM_USE_FLASHINFER_SAMPLER=0" | tee -a "$R/failures.txt"
  error_lines "$R/logs/fail-sampler-oom-$n.log" 3 | tee -a "$R/failures.txt"
  drain_gpu
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
start_server "$R/logs/server.log" --served-model-name tiny --max-model-len 4096 --model "$REPO_ID" --port 8000 \
  --gpu-memory-utilization 0.5
wait_healthy $((DEADLINE - 60)) || { log "not healthy"; tail -30 "$R/logs/server.log"; kill -- -"$SERVER" 2>/dev/null; finish 1; }
log "healthy after $healthy s"

# 4. the 8-stream probe
python3 tests/harness/device/gpu_c8_probe.py --url http://127.0.0.1:8000 --model tiny --tokenizer "$SNAP" \
  --rounds "${ROUNDS:-30}" --tokens "${TOKENS:-256}" --deadline $((DEADLINE - 10)) \
  --out "$R/c8-probe.jsonl" --workdir "$R/vb" > "$R/logs/c8-probe.log" 2>&1
log "c8 probe rc=$?"
cat "$R/c8-probe-summary.txt" >> "$R/summary.txt" 2>/dev/null || tail -20 "$R/logs/c8-probe.log" >> "$R/summary.txt"
kill -- -"$SERVER" 2>/dev/null
startup_log "$R/logs/server.log" "$R/logs/server-startup.log"
log "done"
finish 0
