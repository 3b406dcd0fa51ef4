#!/usr/bin/env bash
# Make a Docker engine answer and build the systemd test image locally.
#
# 1. If `docker info` gets no answer: install Debian's docker.io when dockerd
#    is missing, start dockerd in the background as root (log in
#    $SPARKFLEET_DOCKERD_LOG) and wait until it answers.
# 2. Let our own bridges forward (Docker sets the FORWARD policy to DROP).
# 3. Build $SPARKFLEET_IMAGE from a debootstrapped Debian root with systemd as
#    CMD. No registry is reachable from the test machines, so nothing is
#    pulled; the image is cached by a tag carrying a hash of the package list,
#    so a second run only checks that the tag exists.
#
# Usage: tests/harness/docker-up.sh [--engine-only]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/harness/image.env
source "$HERE/image.env"

DOCKERD_LOG="${SPARKFLEET_DOCKERD_LOG:-/var/log/sparkfleet-dockerd.log}"
WORKDIR="${SPARKFLEET_IMAGE_WORKDIR:-/var/tmp/sparkfleet-image}"
log() { printf 'docker-up: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

engine_answers() { docker info >/dev/null 2>&1; }

start_engine() {
  if engine_answers; then
    log "Docker engine already answers"
    return 0
  fi
  if ! command -v dockerd >/dev/null 2>&1; then
    log "dockerd missing: installing Debian's docker.io"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  fi
  command -v docker >/dev/null 2>&1 || die "no docker client on PATH after installing docker.io"
  # A stale pid file from an earlier, killed dockerd stops a new one from starting.
  if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    as_root rm -f /var/run/docker.pid
  fi
  log "starting dockerd (log: $DOCKERD_LOG)"
  # setsid: the engine must outlive the shell (and process group) that started it.
  as_root bash -c "setsid nohup dockerd >>'$DOCKERD_LOG' 2>&1 </dev/null &"
  for _ in $(seq 1 60); do
    engine_answers && { log "Docker engine answers"; return 0; }
    sleep 0.5
  done
  tail -n 30 "$DOCKERD_LOG" >&2 || true
  die "dockerd did not answer within 30 s (log above: $DOCKERD_LOG)"
}

allow_forwarding() {
  command -v iptables >/dev/null 2>&1 || return 0
  # Docker's DOCKER-USER chain is the supported place for such a rule; fall
  # back to FORWARD itself when the chain is not there (iptables disabled).
  local chain=FORWARD
  as_root iptables -nL DOCKER-USER >/dev/null 2>&1 && chain=DOCKER-USER
  for iface in docker0 'br-+'; do
    for dir in -i -o; do
      as_root iptables -C "$chain" "$dir" "$iface" -j ACCEPT 2>/dev/null \
        || as_root iptables -I "$chain" 1 "$dir" "$iface" -j ACCEPT || true
    done
  done
}

# The host's apt mirror (first URIs:/deb line pointing at a Debian archive).
debian_mirror() {
  local uri
  uri="$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
    | grep -E '/debian/?( |$)' | grep -v security | head -n1 \
    | sed -E 's/^URIs:[[:space:]]*//; s/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//; s/[[:space:]].*$//')"
  printf '%s' "${uri:-http://deb.debian.org/debian}"
}

image_tag() {
  local digest
  digest="$(printf '%s|%s|%s' "$SPARKFLEET_IMAGE_PACKAGES" "$SPARKFLEET_IMAGE_SUITE" "$SPARKFLEET_IMAGE_CMD" | sha256sum | cut -c1-12)"
  printf '%s:%s-%s' "$SPARKFLEET_IMAGE_REPO" "$SPARKFLEET_IMAGE_SUITE" "$digest"
}

build_image() {
  local tag root mirror start
  tag="$(image_tag)"
  if docker image inspect "$tag" >/dev/null 2>&1; then
    docker tag "$tag" "$SPARKFLEET_IMAGE"
    log "image $tag cached (also tagged $SPARKFLEET_IMAGE)"
    return 0
  fi
  command -v debootstrap >/dev/null 2>&1 || as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  mirror="$(debian_mirror)"
  root="$WORKDIR/rootfs"
  start=$SECONDS
  log "debootstrap $SPARKFLEET_IMAGE_SUITE from $mirror into $root"
  as_root rm -rf "$root"
  as_root mkdir -p "$root"
  # The host reaches mirrors through a TLS-intercepting proxy: the root gets
  # the host's CA bundle so apt and curl inside the image trust it too.
  as_root debootstrap --variant=minbase --include="$SPARKFLEET_IMAGE_PACKAGES" \
    "$SPARKFLEET_IMAGE_SUITE" "$root" "$mirror" >"$WORKDIR.debootstrap.log" 2>&1 \
    || { tail -n 40 "$WORKDIR.debootstrap.log" >&2; die "debootstrap failed (log: $WORKDIR.debootstrap.log)"; }
  as_root cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    as_root cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  fi
  as_root chroot "$root" /bin/sh -c '
    set -e
    # Units that cannot work in a container and only slow the boot or fail it.
    for unit in systemd-udevd.service systemd-udev-trigger.service systemd-remount-fs.service \
                getty@tty1.service console-getty.service sys-kernel-config.mount \
                systemd-modules-load.service systemd-firstboot.service; do
      ln -sf /dev/null "/etc/systemd/system/$unit"
    done
    : >/etc/machine-id
    echo sparkfleet-test >/etc/hostname
    apt-get clean
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/*
  '
  as_root tar -C "$root" -c . | docker import \
    --change "CMD [\"$SPARKFLEET_IMAGE_CMD\"]" \
    --change 'ENV container=docker' \
    - "$tag" >/dev/null
  docker tag "$tag" "$SPARKFLEET_IMAGE"
  as_root rm -rf "$root"
  log "built $tag (also tagged $SPARKFLEET_IMAGE) in $((SECONDS - start)) s"
}

start_engine
allow_forwarding
[ "${1:-}" = "--engine-only" ] || build_image
