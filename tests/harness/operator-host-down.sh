#!/usr/bin/env bash
# Remove the operator test host and its network (tests/harness/operator-host-up.sh).
# Only containers labelled sparkfleet.sim=operator are touched.
set -euo pipefail
NETWORK="${OP_NETWORK:-sparkfleet-op}"
ids="$(docker ps -aq --filter label=sparkfleet.sim=operator)"
if [[ -n "$ids" ]]; then
  # shellcheck disable=SC2086
  docker rm -f $ids >/dev/null
fi
docker network rm "$NETWORK" >/dev/null 2>&1 || true
printf 'operator-host-down: removed %s container(s) and network %s\n' "$(printf '%s' "$ids" | grep -c . || true)" "$NETWORK" >&2
