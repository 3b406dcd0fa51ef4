#!/usr/bin/env bash
# .venv-ray: Ray for the simulated cluster's controller-side checks (the sparkfleet.vllm.ray_cluster probe runs
# its python on the nodes, bind-mounted read-only by cluster-up.sh). Built with the interpreter .venv-vllm links to,
# so the same bind-mounted interpreter runs it inside the containers. Nothing to do when current.
#
# Usage: tests/harness/ray-env.sh   (cluster-up.sh calls it; `make test` runs it among the prerequisites)
# Environment: SIM_RAY_VERSION (default 2.60.0).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RAY_VERSION="${SIM_RAY_VERSION:-2.60.0}"
VENV="$REPO/.venv-ray"
PYTHON_HOME="$(dirname "$(dirname "$(readlink -f "$REPO/.venv-vllm/bin/python")")")"

log() { printf 'ray-env: %s\n' "$*" >&2; }

want="ray[default]==$RAY_VERSION|$PYTHON_HOME"
if [[ -x "$VENV/bin/ray" && "$(cat "$VENV/.sparkfleet-installed" 2>/dev/null)" == "$want" ]]; then
  exit 0
fi
start=$SECONDS
log "building $VENV ($want) with $PYTHON_HOME/bin/python3"
"$PYTHON_HOME/bin/python3" -m venv "$VENV"
"$VENV/bin/pip" install -q "ray[default]==$RAY_VERSION"
printf '%s\n' "$want" >"$VENV/.sparkfleet-installed"
log "$VENV ready in $((SECONDS - start)) s"
