#!/usr/bin/env bash
# Runs ON the device machine (one NVIDIA H200 lent by the workplace's `run` tool), from the repo root:
# the collection's own serving path on the GPU, driven by ansible-playbook running on that machine
# (connection local, tests/harness/device/inventory). Before it: the kit parts made by gpu-kit.sh, each
# carried in its own `run` call and copied to /tmp/kit/ (calls back to back); the last may still be in
# .whl-gpu/pN. The kit carries vLLM 0.25.0 and ansible-core 2.19; the image has python3.12 + torch.
#
#   bash tests/harness/device/gpu-collection-run.sh   # -> $OUT/collection-run.tgz + $OUT/summary.txt
#
#  1. assemble + unpack the kit into /tmp/site (SKIP_KIT=1: /tmp/site is already there)
#  2. write the test catalog (h200_catalog.py: the h200_standin profile, never in data/catalog.yml)
#  3. playbooks/plan.yml            the argv comes from the planner
#  4. playbooks/serve.yml           plan -> weights (the collection's generator) -> vllm_native (start-stop-daemon)
#  5. playbooks/verify.yml          wait_healthy, smoke, throughput gate (calibrated stand-in baseline)
#  6. playbooks/bench.yml           sweep, concurrency 1, 8, 64
#  7. gpu_bench.py                  paired rounds against vllm bench serve, while time is left (ROUNDS)
#  8. stop.yml (here)              the native role's stop path
# MODEL=tiny_gemma4_h200: the test catalog's tiny Gemma 4 MoE instead of the Llama (every play gets -e vllm_model).
# STAND_IN_SERVER=1 (rehearsal without a GPU): SPARKFLEET_DEVICE_SITE points at a fake vllm package.
set -u
# shellcheck source=tests/harness/device/lib.sh
. "$PWD/tests/harness/device/lib.sh"
start_clock 560
R=${RUN_DIR:-/tmp/gpu-collection}
OUT=${OUT:-$R/out}
export SPARKFLEET_DEVICE_STATE=$R/state
export SPARKFLEET_DEVICE_SITE=${SPARKFLEET_DEVICE_SITE:-/tmp/site}
export SPARKFLEET_DEVICE_PYTHON=${SPARKFLEET_DEVICE_PYTHON:-$(command -v python3)}
PY=$SPARKFLEET_DEVICE_PYTHON
export SPARKFLEET_DEVICE_PORT=${SPARKFLEET_DEVICE_PORT:-8000}
BASE=http://127.0.0.1:$SPARKFLEET_DEVICE_PORT
rm -rf "$R"; mkdir -p "$R/logs" "$R/bin" "$SPARKFLEET_DEVICE_STATE" "$OUT" /tmp/kit "$SPARKFLEET_DEVICE_SITE"
: > "$R/summary.txt"
finish() {
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv > "$R/logs/nvidia-smi-end.csv" 2>&1
  cp "$R/summary.txt" "$OUT/summary.txt"
  tar -C "$R" -czf "$OUT/collection-run.tgz" --exclude='state/hf' --exclude='state/home' --exclude='vb/*.json' \
    --exclude='bin' --exclude='out' --exclude='tmp' . 2>/dev/null
  exit "${1:-0}"
}

# 1. the kit
if [ -z "${SKIP_KIT:-}" ]; then
  unpack_kit "$SPARKFLEET_DEVICE_SITE"
fi
export PYTHONPATH=$SPARKFLEET_DEVICE_SITE
"$PY" -c 'import ansible, jinja2, yaml, cryptography, packaging, resolvelib
print("ansible-core", ansible.__version__ if hasattr(ansible, "__version__") else __import__("ansible.release").release.__version__)' \
  > "$R/logs/import-ansible.log" 2>&1 || { log "ansible import failed: $(tail -3 "$R/logs/import-ansible.log")"; finish 1; }
log "$(tail -1 "$R/logs/import-ansible.log"), $("$PY" --version 2>&1)"
for tool in start-stop-daemon setpriv pgrep ps curl; do
  command -v "$tool" > /dev/null || PATH=$PATH:/usr/sbin:/sbin command -v "$tool" > /dev/null || log "missing on this machine: $tool"
done

# ansible-core's console scripts were dropped from the kit (they carry the build machine's interpreter).
for cli in playbook; do
  printf '#!/bin/sh\nexec %s -m ansible.cli.%s "$@"\n' "$PY" "$cli" > "$R/bin/ansible-$cli"; chmod +x "$R/bin/ansible-$cli"
done
export PATH=$R/bin:$PATH ANSIBLE_CONFIG=$REPO/ansible.cfg ANSIBLE_HOME=$R/ansible-home ANSIBLE_LOCAL_TEMP=$R/tmp
export ANSIBLE_CALLBACK_RESULT_FORMAT=json ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
INV=tests/harness/device/inventory
MODEL=${MODEL:-tiny_h200}
log "model: $MODEL"
play() {  # name, playbook, extra arguments: timed, log in logs/<name>.log
  local name=$1 s rc; shift
  s=$(now)
  ansible-playbook "$@" -i "$INV" -e "vllm_model=$MODEL" > "$R/logs/ansible-$name.log" 2>&1; rc=$?
  log "ansible-playbook $1 ($name): rc=$rc in $(since "$s") s; $(grep -E '^h200 +:' "$R/logs/ansible-$name.log" | tr -s ' ')"
  return $rc
}

# 2. + 3. the test catalog and the plan
"$PY" tests/harness/device/h200_catalog.py "$SPARKFLEET_DEVICE_STATE/catalog-h200.yml" || { log "catalog failed"; finish 1; }
play plan playbooks/plan.yml || finish 1
"$PY" -c 'import json, sys; p = json.load(open(sys.argv[1])); print("planned argv:", " ".join(p["argv"]))' \
  "$SPARKFLEET_DEVICE_STATE/plans/h200.json" | tee -a "$R/summary.txt"

# 4. serve: weights + native runtime; a poller stamps the first /health 200
play serve playbooks/serve.yml || { cp "$SPARKFLEET_DEVICE_STATE/log/vllm-serve.log" "$R/logs/" 2>/dev/null; finish 1; }
( while [ "$(date +%s)" -lt "$DEADLINE" ]; do
    if curl -sf -o /dev/null "$BASE/health" 2>/dev/null \
       || "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$BASE/health" 2>/dev/null; then
      now > "$R/healthy-at"; break
    fi
    sleep 0.5
  done ) &
POLLER=$!
log "launcher: $(grep -c . "$SPARKFLEET_DEVICE_STATE/etc/launch") lines, serve.env: $(tr '\n' ' ' < "$SPARKFLEET_DEVICE_STATE/etc/serve.env")"

# 5. verify (wait_healthy inside)
play verify playbooks/verify.yml; VERIFY_RC=$?
[ -f "$R/healthy-at" ] || kill "$POLLER" 2>/dev/null   # verify gave up: nobody is waiting for /health
wait "$POLLER" 2>/dev/null
started=$(grep -m1 '^=== .* starting' "$SPARKFLEET_DEVICE_STATE/log/vllm-serve.log" | awk '{print $2}')
if [ -f "$R/healthy-at" ] && [ -n "$started" ]; then
  "$PY" -c 'import datetime, sys; t0 = datetime.datetime.fromisoformat(sys.argv[1]).timestamp(); print("healthy after %.1f s (launcher start %s to the first /health 200)" % (float(sys.argv[2]) - t0, sys.argv[1]))' \
    "$started" "$(cat "$R/healthy-at")" | tee -a "$R/summary.txt"
fi
grep -E '"(endpoint|smoke|throughput|results): ' "$R/logs/ansible-verify.log" | sed 's/^ *//' | tee -a "$R/summary.txt"

# 6. bench: sweep at 1, 8, 64 streams
if [ "$VERIFY_RC" = 0 ] || [ -f "$R/healthy-at" ]; then
  play bench playbooks/bench.yml -e vllm_bench_mode=sweep
  grep -E '^ *"(c|concurrency|prompt|files)' "$R/logs/ansible-bench.log" | head -20 >> "$R/summary.txt"
fi

# 7. paired rounds against vllm bench serve while time is left (80 s kept for the stop and the capture)
if [ -f "$R/healthy-at" ] && [ -z "${SKIP_PAIRED:-}" ] && [ $(( DEADLINE - $(date +%s) )) -gt 140 ]; then
  CKPT=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["model"]["checkpoint"].replace("/", "--"))' \
    "$SPARKFLEET_DEVICE_STATE/plans/h200.json")
  SERVED=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["served_name"])' "$SPARKFLEET_DEVICE_STATE/plans/h200.json")
  SNAP=$(ls -d "$SPARKFLEET_DEVICE_STATE/hf/hub/models--$CKPT"/snapshots/* | head -1)
  s=$(now)
  timeout $(( DEADLINE - $(date +%s) - 50 )) "$PY" tests/harness/device/gpu_bench.py --url $BASE --model "$SERVED" \
    --tokenizer "$SNAP" --rounds "${ROUNDS:-5}" --tokens "${TOKENS:-256}" --prompt-tokens 64 --deadline $((DEADLINE - 60)) \
    --out "$R/bench-rounds.jsonl" --workdir "$R/vb" > "$R/logs/paired-bench.log" 2>&1
  log "paired rounds rc=$? in $(since "$s") s"
  cat "$R/bench-rounds-summary.txt" >> "$R/summary.txt" 2>/dev/null
fi

# 8. stop through the role; the server log and the rendered files travel back
play stop tests/harness/device/stop.yml
cp -r "$SPARKFLEET_DEVICE_STATE/etc" "$R/rendered"
rm -f "$R/rendered/secret.env"
cp "$SPARKFLEET_DEVICE_STATE/log/vllm-serve.log" "$R/logs/" 2>/dev/null
log "done"
finish 0
