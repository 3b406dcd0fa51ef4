#!/usr/bin/env bash
# Runs ON the device machine, from the repo root, after the kit parts (as gpu-run.sh): out of memory in vLLM's
# sampler warm-up (issue 18 item 2) with the test catalog's tiny Gemma 4 MoE, which vLLM 0.25.0 serves with the
# V1 model runner (the Llama stand-in gets the V2 runner, whose sampler buffers for --max-num-seqs fail at model
# load instead: fail-oom-max-num-seqs.log). A torch process holds all but LEAVE_GIB of the card, so the start-up
# check passes at --gpu-memory-utilization 0.015; --max-num-seqs = --max-num-batched-tokens = SEQS makes the
# profile run's dummy sampler batch (SEQS x vocabulary logits, float32 copies) outgrow what is free while the
# dummy forward pass still fits. Up to ATTEMPTS starts, LEAVE_GIB moved by what each one reached.
# VOCAB (pass 4, default 262144, Gemma 4's own vocabulary size; VOCAB= for pass 3's run): a copy of the stand-in
# with that vocabulary and fresh random weights (the generator's tokenizer stays; its ids all fit), so the
# sampler's SEQS x VOCAB float32 copies outgrow the dummy forward pass by far: pass 3's vocabulary of 503 (the
# generator's corpus gives no more for the spec's 1,024) let the forward pass run out first. --enforce-eager
# (EAGER=1, the default with VOCAB) skips torch.compile, so an attempt reaches the profile run sooner.
#
#   bash tests/harness/device/gpu-sampler-oom.sh          # -> $OUT/sampler-oom.tgz, $OUT/sampler-oom.txt
set -u
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s)
REPO=$PWD
R=/tmp/gpu-sampler-oom
mkdir -p "$R/logs" /tmp/kit /tmp/site
: > "$R/summary.txt"
# shellcheck source=tests/harness/device/lib.sh
. "$REPO/tests/harness/device/lib.sh"
finish() {
  cp "$R/summary.txt" "$OUT/sampler-oom.txt"
  tar -C "$R" -czf "$OUT/sampler-oom.tgz" --exclude='hf' . 2>/dev/null
  exit "${1:-0}"
}
[ -d /tmp/site/vllm ] || unpack_kit /tmp/site
export PYTHONPATH=/tmp/site HF_HOME=$R/hf
SPEC=$(gemma4_spec)
SNAP=$(generate "$GEMMA4_ID" "$SPEC")
[ -d "$SNAP" ] || { log "generator failed: $(tail -3 "$R/logs/generate.err")"; finish 1; }
log "model generated (spec $SPEC)"
VOCAB=${VOCAB-262144}
SERVE=$GEMMA4_ID
EXTRA=()
if [ -n "$VOCAB" ]; then
  python3 -c 'import pathlib, shutil, sys, torch
from transformers import Gemma4ForCausalLM, Gemma4TextConfig
snap, out, vocab = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
config = Gemma4TextConfig.from_pretrained(snap)
config.vocab_size = config.vocab_size_per_layer_input = vocab
torch.manual_seed(0)
model = Gemma4ForCausalLM(config).to(torch.bfloat16)
model.save_pretrained(out)
for f in snap.iterdir():
    if f.name.startswith(("tokenizer", "special_tokens", "chat_template", "generation_config")):
        shutil.copy(f, out / f.name)
print("vocab", model.config.vocab_size, "parameters", sum(p.numel() for p in model.parameters()))' \
    "$SNAP" "$R/wide" "$VOCAB" > "$R/logs/wide.log" 2>&1 || { log "wide copy failed: $(tail -3 "$R/logs/wide.log")"; finish 1; }
  log "wide copy: $(tail -1 "$R/logs/wide.log")"
  SERVE=$R/wide
fi
[ "${EAGER:-${VOCAB:+1}}" = 1 ] && EXTRA+=(--enforce-eager)
SEQS=${SEQS:-$([ -n "$VOCAB" ] && echo 2048 || echo 262144)}
leave=${LEAVE_GIB:-$([ -n "$VOCAB" ] && echo 6 || echo 2.9)}
for n in $(seq "${ATTEMPTS:-4}"); do
  hold_gpu "$leave"
  nvidia-smi > "$R/logs/nvidia-smi-$n.txt" 2>&1
  L=$R/logs/fail-sampler-oom-$n.log
  s=$(now)
  VLLM_USE_FLASHINFER_SAMPLER=0 timeout 150 python3 -m vllm.entrypoints.openai.api_server --model "$SERVE" \
    --served-model-name tiny --port 8005 --max-model-len 256 --gpu-memory-utilization 0.015 \
    --max-num-seqs "$SEQS" --max-num-batched-tokens "$SEQS" "${EXTRA[@]}" > "$L" 2>&1; rc=$?
  took=$(since "$s")
  release_gpu
  echo "attempt $n: rc=$rc exited after $took s; left ${leave} GiB free (holder: $(cat /tmp/held 2>/dev/null));" \
    "--gpu-memory-utilization 0.015 --max-num-seqs $SEQS --max-num-batched-tokens $SEQS --max-model-len 256" \
    "${EXTRA[*]}, vocabulary ${VOCAB:-as generated}, VLLM_USE_FLASHINFER_SAMPLER=0" | tee -a "$R/summary.txt"
  error_lines "$L" 2 | tee -a "$R/summary.txt"
  drain_gpu
  if grep -q "warming up sampler" "$L"; then log "sampler warm-up OOM captured in attempt $n"; break; fi
  # Steps: pass 3's (vocabulary 503) or, with VOCAB, the sampler's window of several GiB.
  if [ -n "$VOCAB" ]; then up=2; oom=3; down=2; else up=1.0; oom=0.8; down=0.6; fi
  if grep -q "on startup is less than desired" "$L"; then leave=$(awk -v l="$leave" -v d=$up 'BEGIN { print l + d }')
  elif grep -q "OutOfMemoryError" "$L"; then leave=$(awk -v l="$leave" -v d=$oom 'BEGIN { print l + d }')
  else leave=$(awk -v l="$leave" -v d=$down 'BEGIN { print (l - d > 1 ? l - d : 1) }'); fi
  [ $(( $(date +%s) - T0 )) -lt "${BUDGET_S:-420}" ] || break
done
log "done"
finish 0
