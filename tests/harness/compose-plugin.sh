#!/usr/bin/env bash
# Docker Compose v2 for the tests, from Debian's own packages.
# Debian 12 ships only the Python compose v1; community.docker.docker_compose_v2
# needs the v2 CLI plugin. Debian 13 (trixie) packages it as a static Go binary
# (docker-compose 2.x, depends only on libc6 >= 2.34), so we fetch that .deb
# through apt with a private source list and unpack just the plugin. Cached:
# a second run finds the plugin and returns at once.
set -euo pipefail
plugin_dir=/usr/local/lib/docker/cli-plugins
if docker compose version >/dev/null 2>&1; then
  docker compose version
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
mkdir -p "$work/lists/partial" "$work/archives/partial"
echo "deb $mirror trixie main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
          -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update -qq
(cd "$work" && apt-get "${apt_opts[@]}" download docker-compose >/dev/null)
dpkg-deb -x "$work"/docker-compose_2*.deb "$work/root"
install -D -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" "$plugin_dir/docker-compose"
docker compose version
