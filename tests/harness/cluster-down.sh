#!/usr/bin/env bash
# Remove the simulated cluster's containers and network (tests/harness/cluster-up.sh).
# Only containers labelled sparkfleet.sim=cluster are touched.
set -euo pipefail
NETWORK="${SIM_NETWORK:-sparkfleet-sim}"
ids="$(docker ps -aq --filter label=sparkfleet.sim=cluster)"
if [[ -n "$ids" ]]; then
  # shellcheck disable=SC2086
  docker rm -f $ids >/dev/null
fi
docker network rm "$NETWORK" >/dev/null 2>&1 || true
printf 'cluster-down: removed %s container(s) and network %s\n' "$(printf '%s' "$ids" | grep -c . || true)" "$NETWORK" >&2
