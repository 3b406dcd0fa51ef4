#!/usr/bin/env bash
# Runs ON the device machine, from the repo root, after gpu-collection-run.sh on the same warm machine (the kit is
# unpacked in /tmp/site, the collection's generated model is in its HF cache, the server is stopped):
# out of memory in the middle of vLLM's start-up (issue 18 item 2). vLLM starts with the card to itself and passes
# its free-memory check; when its log shows TRIGGER (default: CUDA-graph capture starting, after the KV cache is
# allocated), a second process takes all but a few MiB of what is free, as another tenant starting on a shared
# card would, and the capture or the warm-up after it runs out of memory.
#
#   MODEL_ID=sparkfleet/tiny-random-gemma4-moe-h200 HF_HOME=/tmp/gpu-collection/state/hf \
#     bash tests/harness/device/gpu-oom-midstart.sh       # -> $OUT/oom-midstart.tgz, $OUT/oom-midstart.txt
set -u
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
R=/tmp/gpu-oom-midstart
rm -rf "$R"; mkdir -p "$R"
# shellcheck source=tests/harness/device/lib.sh
. "$PWD/tests/harness/device/lib.sh"
export PYTHONPATH=${SPARKFLEET_DEVICE_SITE:-/tmp/site}
MODEL_ID=${MODEL_ID:?the generated checkpoint id}
TRIGGER=${TRIGGER:-Capturing CUDA graphs}
LOG=$R/fail-oom-midstart.log
: > "$LOG"
# The holder: CUDA ready before vLLM starts, so it reacts within one 10 ms poll of the trigger line.
python3 -c 'import sys, time, torch
torch.cuda.init(); torch.empty(1, device="cuda")
log, trigger, out = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.time()
while time.time() - t0 < 240:
    with open(log, errors="replace") as handle:
        if trigger in handle.read():
            break
    time.sleep(0.01)
else:
    sys.exit("no trigger line")
free, total = torch.cuda.mem_get_info()
x = torch.empty(int(free - (32 << 20)), dtype=torch.uint8, device="cuda")
with open(out, "w") as handle:
    handle.write("took %d of %d free bytes (card %d) %.2f s after start\n" % (x.numel(), free, total, time.time() - t0))
time.sleep(120)' "$LOG" "$TRIGGER" "$R/holder.txt" &
HOLDER=$!
sleep 8   # the holder's CUDA context first
s=$(date +%s.%N)
VLLM_USE_FLASHINFER_SAMPLER=0 setsid timeout 200 python3 -m vllm.entrypoints.openai.api_server --model "$MODEL_ID" \
  --served-model-name tiny --port 8004 --max-model-len 4096 --gpu-memory-utilization 0.5 >> "$LOG" 2>&1 &
SERVER=$!
rc=""
while [ -z "$rc" ]; do   # exit code, or "healthy" (the capture survived the holder): then stopped by its group id
  if ! kill -0 "$SERVER" 2>/dev/null; then wait "$SERVER"; rc=$?
  elif grep -q "Application startup complete" "$LOG"; then rc=healthy; kill -- -"$SERVER" 2>/dev/null
  else sleep 0.2; fi
done
e=$(date +%s.%N)
nvidia-smi > "$R/nvidia-smi-held.txt" 2>&1
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
{
  echo "fail-oom-midstart: rc=$rc exited after $(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.1f", b - a }') s;" \
    "model $MODEL_ID, --gpu-memory-utilization 0.5 --max-model-len 4096, VLLM_USE_FLASHINFER_SAMPLER=0;" \
    "holder on '$TRIGGER': $(cat "$R/holder.txt" 2>/dev/null || echo 'never triggered')"
  error_lines "$LOG" 3
  grep -n "File \"" "$LOG" | grep EngineCore | tail -4 | cut -c1-200 | sed 's/^/    /'
} | tee "$R/oom-midstart.txt"
cp "$R/oom-midstart.txt" "$OUT/"
tar -C "$R" -czf "$OUT/oom-midstart.tgz" .
