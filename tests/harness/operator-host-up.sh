#!/usr/bin/env bash
# Bring up the single-node test host that Ansible reaches the way an operator
# does: over SSH, as an ordinary user with sudo, never as root.
#
# One container from the locally built systemd image (tests/harness/image.env)
# on a private Docker network, with (tests/harness/sim-host.sh, shared with the simulated cluster's nodes):
#   - a login account `sparkop` (Debian already has a group named operator) (bash, in no privileged group), reached with a
#     key this script makes (tests/output/operator/id_ed25519);
#   - sudo for that account *with a password*: a random one, written only into
#     an Ansible Vault file (tests/output/operator/become.vault.yml, encrypted
#     with tests/output/operator/vault-pass), which the playbooks read as
#     ansible_become_password;
#   - sshd refusing root logins, so nothing can quietly fall back to root.
#
# Stand-ins, named as such: the Debian bookworm image stands in for Ubuntu /
# DGX OS; the host has no GPU, so vLLM's CPU build (the host-built .venv-vllm
# and the interpreter it points to, bind-mounted read-only at the same paths,
# as tests/harness/cluster-up.sh does) serves the tiny random model in place of
# Gemma 4. That interpreter lives under /root; the container's own /root is
# made traversable (0711) so the role's `vllm` service account can execute it,
# where a real host would have a role-built venv under /opt/vllm/venv.
#
# Idempotent: a running container that answers over SSH is left alone.
# Usage: tests/harness/operator-host-up.sh     (tests/harness/operator-host-down.sh removes it)
# Environment: OP_NAME, OP_NETWORK, OP_SUBNET (defaults below; distinct from the cluster tier's).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/harness/image.env
source "$HERE/image.env"

NAME="${OP_NAME:-sparkfleet-op-1}"
NETWORK="${OP_NETWORK:-sparkfleet-op}"
SUBNET="${OP_SUBNET:-172.29.48.0/24}"
ADDR="${SUBNET%.*}.11"
STATE="$REPO/tests/output/operator"
KEY="$STATE/id_ed25519"
LIBNUMA="$(readlink -f "${SIM_LIBNUMA:-/usr/lib/x86_64-linux-gnu/libnuma.so.1}")"
PYTHON_HOME="$(dirname "$(dirname "$(readlink -f "$REPO/.venv-vllm/bin/python")")")"

# shellcheck source=tests/harness/sim-host.sh
source "$HERE/sim-host.sh"

log() { printf 'operator-host-up: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

network() {
  if ! docker network inspect "$NETWORK" >/dev/null 2>&1; then
    log "creating network $NETWORK ($SUBNET)"
    docker network create --driver bridge --subnet "$SUBNET" \
      --opt com.docker.network.bridge.name=br-sfop "$NETWORK" >/dev/null
  fi
}

container() {
  docker rm -f "$NAME" >/dev/null 2>&1 || true
  log "starting $NAME at $ADDR"
  # shellcheck disable=SC2086  # SPARKFLEET_RUN_FLAGS is a list of flags
  docker run -d --name "$NAME" --hostname "$NAME" --network "$NETWORK" --ip "$ADDR" \
    $SPARKFLEET_RUN_FLAGS \
    --label sparkfleet.sim=operator \
    --cap-add NET_ADMIN \
    --shm-size 1g \
    -v "$PYTHON_HOME:$PYTHON_HOME:ro" \
    -v "$REPO/.venv-vllm:$REPO/.venv-vllm:ro" \
    -v "$LIBNUMA:/usr/lib/x86_64-linux-gnu/libnuma.so.1:ro" \
    "$SPARKFLEET_IMAGE" >/dev/null
  sim_host_wait_systemd "$NAME"
  sim_host_login "$NAME" "$KEY" "$STATE"
}

start=$SECONDS
[[ -f "$LIBNUMA" ]] || die "libnuma.so.1 missing on this host (apt-get install libnuma1)"
bash "$HERE/docker-up.sh"
bash "$HERE/vllm-cpu-env.sh" "$REPO/.venv-vllm"
mkdir -p "$STATE"
[[ -f "$KEY" ]] || ssh-keygen -q -t ed25519 -N '' -C sparkfleet-operator -f "$KEY"
sim_host_secrets "$STATE"
network
if [[ "$(docker inspect -f '{{.State.Running}}' "$NAME" 2>/dev/null)" == "true" ]] && sim_host_ssh_ok "$ADDR" "$KEY"; then
  log "$NAME already answers over SSH as $SIM_LOGIN"
  exit 0
fi
container
for _ in $(seq 1 40); do
  if sim_host_ssh_ok "$ADDR" "$KEY"; then
    log "$NAME answers over SSH as $SIM_LOGIN at $ADDR after $((SECONDS - start)) s"
    exit 0
  fi
  sleep 0.5
done
die "$NAME ($ADDR) does not answer over SSH as $SIM_LOGIN"
