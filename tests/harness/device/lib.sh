# Shared by the scripts that run ON the device machine (gpu-run.sh, gpu-ratios.sh, gpu-drift.sh, gpu-collection-run.sh,
# gpu-oom-and-c8.sh, gpu-sampler-oom.sh): timed log lines, the kit (the parts gpu-kit.sh made, copied to
# /tmp/kit by earlier `run` calls) checked and unpacked, the stand-in models, a server and its health, and
# a torch process that holds the card as another tenant would.
# The caller sources it from the repo root, opens its run with start_run (or start_clock and a folder of its own:
# T0, R with summary.txt and logs/, REPO) and defines finish().
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$R/summary.txt"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# start_clock DEFAULT_BUDGET_S: the call's clock. Sets T0 (now), BUDGET_S (the environment's, else
# DEFAULT_BUDGET_S: a margin under the `run` call's 10 minutes), DEADLINE (T0 + BUDGET_S) and REPO (the repo root,
# where the caller runs); Python's output unbuffered, so the logs keep up with a call cut short.
# shellcheck disable=SC2034  # DEADLINE and BUDGET_S: read by the callers
start_clock() {
  export PYTHONUNBUFFERED=1
  T0=$(date +%s)
  BUDGET_S=${BUDGET_S:-$1}
  DEADLINE=$((T0 + BUDGET_S))
  REPO=$PWD
}

# start_run DIR DEFAULT_BUDGET_S [TAG]: start_clock, and the run folder R=DIR with logs/, beside the kit's /tmp/kit
# and /tmp/site. $R/summary.txt starts empty, unless TAG is given: a later call within the warm window (TAG=b),
# whose log goes on in the first call's summary.
start_run() {
  start_clock "$2"
  R=$1
  mkdir -p "$R/logs" /tmp/kit /tmp/site
  [ -n "${3:-}" ] || : > "$R/summary.txt"
}

# unpack_kit DIR: every part present (sha256 of the whole) and unpacked into DIR, or finish 1 with the reason.
unpack_kit() {
  local site="$1" want got s unpack
  cp .whl-gpu/p*/kit.part-* .whl-gpu/p*/kit.sha256 /tmp/kit/ 2>/dev/null
  ( cd /tmp/kit && ls kit.part-* | tr '\n' ' ' ) | tee -a "$R/summary.txt"; echo | tee -a "$R/summary.txt"
  want=$(cut -d' ' -f1 /tmp/kit/kit.sha256)
  got=$(cat /tmp/kit/kit.part-* | sha256sum | cut -d' ' -f1)
  [ "$want" = "$got" ] || { log "kit checksum mismatch ($got != $want): a part is missing"; finish 1; }
  s=$(now)
  # kit.sha256 names the packed file: kit.tar.xz (gpu-kit.sh's default) or kit.tar.gz (KIT_COMPRESS=gzip)
  case $(awk '{print $2}' /tmp/kit/kit.sha256) in
    *.gz) unpack=(gzip -d) ;;
    *) unpack=(xz -d -T0) ;;
  esac
  cat /tmp/kit/kit.part-* | "${unpack[@]}" | tar -C "$site" -xf - || { log "unpack failed"; finish 1; }
  log "kit unpacked in $(since "$s") s: $(du -sm "$site" | cut -f1) MiB"
}

# check_imports: the server's and vllm bench serve's import chains, so a kit that does not fit the image fails
# here in seconds (finish 1); the version line is the last of $R/logs/import.log.
check_imports() {
  python3 -c 'import vllm.entrypoints.openai.api_server, vllm.benchmarks.serve, torch, vllm
print("vllm", vllm.__version__, "torch", torch.__version__, torch.cuda.get_device_name(0))' > "$R/logs/import.log" 2>&1 \
    || { log "import failed: $(tail -3 "$R/logs/import.log")"; finish 1; }
}

# kit_ready: the kit unpacked into /tmp/site and its imports checked (with the caller's PYTHONPATH); the version
# line in the summary.
kit_ready() {
  unpack_kit /tmp/site
  check_imports
  tail -1 "$R/logs/import.log" | tee -a "$R/summary.txt"
}

# The stand-in models. The random Llama of pass 1 (gpu-run.sh, gpu-ratios.sh, gpu-oom-and-c8.sh); it is not
# the test catalog's tiny_h200 (intermediate 688, vocabulary 1,024), which gpu-collection-run.sh serves.
LLAMA_ID=sparkfleet/tiny-random-llama-h200
LLAMA_SPEC='{"layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 8, "intermediate": 2816, "vocab": 512, "max_position": 4096, "seed": 0}'
# The test catalog's tiny Gemma 4 MoE (h200_catalog.GEMMA4_SPEC) and the argv the planner gave it on the H200.
GEMMA4_ID=sparkfleet/tiny-random-gemma4-moe-h200
GEMMA4_PLAN=tests/fixtures/h200/gemma4-run/plan-h200.json
gemma4_spec() {
  python3 -c 'import json, sys; sys.path.insert(0, "tests/harness/device"); import h200_catalog; print(json.dumps(h200_catalog.GEMMA4_SPEC))'
}

# generate REPO_ID SPEC: the collection's generator into $HF_HOME; prints the snapshot's path (nothing when the
# generator failed: its errors are in $R/logs/generate.err).
generate() {
  python3 "$REPO/roles/weights/files/generate_tiny_model.py" --hf-home "$HF_HOME" --repo-id "$1" \
    --revision 0123456789abcdef0123456789abcdef01234567 --spec "$2" 2>> "$R/logs/generate.err" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["snapshot"])' 2>/dev/null
}

# up [PORT]: /health answers 200 (port 8000 unless given).
up() {
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
    "http://127.0.0.1:${1:-8000}/health" 2>/dev/null
}

# start_server LOG ARGS...: vLLM's API server with ARGS, in a session of its own (setsid: the caller ends it by
# its process group, kill -- -"$SERVER"), with VLLM_SERVER_DEV_MODE=1 (the sweep resets the prefix cache) and
# VLLM_USE_FLASHINFER_SAMPLER=0 (no 120 s sampler build on a fresh machine: time the rounds need; both sides
# of a pair share the server, so the sampler biases no ratio). With SERVER_CPUS set (a taskset list), the
# server and every process it starts (the engine core) run on those CPUs only. Sets SERVER and S_START.
start_server() {
  local out=$1 pin=(); shift
  [ -z "${SERVER_CPUS:-}" ] || pin=(taskset -c "$SERVER_CPUS")
  S_START=$(now)
  VLLM_SERVER_DEV_MODE=1 VLLM_USE_FLASHINFER_SAMPLER=0 "${pin[@]}" setsid python3 -m vllm.entrypoints.openai.api_server \
    "$@" > "$out" 2>&1 &
  SERVER=$!
}

# cpu_halves: this machine's CPUs in two halves, hyperthread siblings kept in one half ("0-3,8-11 4-7,12-15"
# style, as taskset lists): the server's, then the clients', so neither competes for the other's cores.
cpu_halves() {
  python3 - <<'PY'
import os
cores = {}
for cpu in sorted(os.sched_getaffinity(0)):
    try:
        with open("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list" % cpu) as handle:
            siblings = handle.read().strip()
    except OSError:
        siblings = str(cpu)
    cores.setdefault(siblings, []).append(cpu)
groups = sorted(cores.values())
half = len(groups) // 2
print(" ".join(",".join(str(c) for c in sorted(c for g in part for c in g)) for part in (groups[:half], groups[half:])))
PY
}

# pin_halves: unless PIN=0, the server (start_server) on one half of the CPUs (cpu_halves) and the clients on the
# other: a tiny model on a big card is bound by Python on the CPU on both sides of the socket. Sets SERVER_CPUS
# (exported), CLIENT_CPUS and CLIENT_PIN (the prefix a client runs under: "${CLIENT_PIN[@]}" python3 ...); all
# three empty with PIN=0.
# shellcheck disable=SC2034  # CLIENT_PIN and CLIENT_CPUS: read by the callers
pin_halves() {
  CLIENT_PIN=() SERVER_CPUS="" CLIENT_CPUS=""
  if [ "${PIN:-1}" != 0 ]; then
    read -r SERVER_CPUS CLIENT_CPUS < <(cpu_halves)
    export SERVER_CPUS
    CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
  fi
}

# affinity PGID: each process of the group with its name and the CPUs it may run on, one a line.
affinity() {
  local pid
  for pid in $(pgrep -g "$1"); do
    echo "$pid $(cat "/proc/$pid/comm" 2>/dev/null) $(taskset -pc "$pid" 2>/dev/null | sed 's/.*: //')"
  done
}

# wait_healthy UNTIL: until /health answers, the server exits or the epoch second UNTIL. Sets healthy (seconds
# since start_server) and returns 0, or leaves it empty and returns 1.
wait_healthy() {
  healthy=""
  while [ "$(date +%s)" -lt "$1" ]; do
    kill -0 "$SERVER" 2>/dev/null || { log "server exited before healthy"; return 1; }
    if up; then healthy=$(since "$S_START"); return 0; fi
    sleep 1
  done
  return 1
}

# startup_log LOG OUT: the server's log without its request lines.
startup_log() {
  grep -v '"POST /v1\|"GET /health\|"POST /tokenize\|"POST /detokenize\|"POST /reset_prefix_cache\|"GET /metrics' \
    "$1" > "$2"
}

# error_lines LOG N: the last N error lines of a failed start, indented, each cut to 400 characters.
error_lines() {
  grep -E "Error|error:" "$1" | grep -v "^ *raise\|Traceback" | tail -"$2" | cut -c1-400 | sed 's/^/    /'
}

# hold_gpu LEAVE_GIB: a torch process takes all of the card's free memory but LEAVE_GIB, as another tenant of a
# shared card would, and holds it up to 300 s; returns once it holds it. /tmp/held: free and total bytes before,
# bytes held. Sets HOLDER.
hold_gpu() {
  rm -f /tmp/held
  python3 -c 'import sys, time, torch
free, total = torch.cuda.mem_get_info()
x = torch.empty(int(free - float(sys.argv[1]) * (1 << 30)), dtype=torch.uint8, device="cuda")
open("/tmp/held", "w").write("%d %d %d" % (free, total, x.numel())); time.sleep(300)' "$1" &
  HOLDER=$!
  for _i in $(seq 120); do [ -f /tmp/held ] && break; sleep 0.5; done
}

# release_gpu: the holder ended.
release_gpu() { kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null; }

# drain_gpu: up to 30 s for the card's memory in use to fall below 1,000 MiB (the last process's exit).
drain_gpu() {
  for _i in $(seq 30); do
    [ "$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)" -lt 1000 ] && break
    sleep 1
  done
}
