#!/usr/bin/env bash
# Build signed local apt repositories of STAND-IN packages for the Molecule
# tier. The vendor repositories (Docker, NVIDIA) cannot be reached from the
# test machines, so each scenario points the role's own base-URL variable --
# the one air-gapped sites set for their mirror -- at these trees, laid out
# like the vendors' ones:
#
#   docker/<distro>/gpg, docker/<distro>/dists/<suite>/stable/binary-all/…
#                                like https://download.docker.com/linux
#   libnvidia-container/gpgkey, libnvidia-container/stable/deb/<arch>/ (flat)
#                                like https://nvidia.github.io/libnvidia-container
#   cuda/<distro_id>/<arch>/ (flat, key 3bf863cc.pub)
#                                like https://developer.download.nvidia.com/compute/cuda/repos
#
# Packages are built with equivs from packages/*.ctl and hold only the small
# scripts in files/ (each says STAND-IN in its header). The repository key is
# generated here, per build, without a passphrase. The output is cached by a
# hash of this directory, so a second run is instant. The key's fingerprint is
# written to <root>/fingerprint: the scenarios pin it, as sites pin the vendors' keys.
#
# Usage: tests/harness/aptrepo/build.sh   (prints the repository root)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${SPARKFLEET_APTREPO_DIR:-/var/tmp/sparkfleet-aptrepo}"
SUITE=bookworm
DISTRO=debian
CUDA_DISTRO_ID=debian12
ARCH=amd64
CUDA_ARCH=x86_64
log() { printf 'aptrepo: %s\n' "$*" >&2; }

digest="$(cd "$HERE" && find . -type f ! -name '*.deb' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
if [ -f "$OUT/.digest" ] && [ "$(cat "$OUT/.digest")" = "$digest" ]; then
  log "cached at $OUT ($digest)"
  printf '%s\n' "$OUT"
  exit 0
fi

missing=()
for tool in equivs-build:equivs apt-ftparchive:apt-utils gpg:gnupg dpkg-deb:dpkg; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GNUPGHOME="$work/gnupg"
mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' \
  --quick-generate-key 'sparkfleet test apt repository (STAND-IN key) <tests@sparkfleet.invalid>' rsa3072 sign never
key_id="$(gpg --batch --list-secret-keys --with-colons | awk -F: '/^fpr/ {print $10; exit}')"

log "building stand-in packages"
mkdir -p "$work/debs"
cp -r "$HERE/packages" "$HERE/files" "$work/"
(cd "$work/packages" && for ctl in *.ctl; do equivs-build "$ctl" >"$work/${ctl%.ctl}.log" 2>&1 || { cat "$work/${ctl%.ctl}.log" >&2; exit 1; }; done)
mv "$work"/packages/*.deb "$work/debs/"

repo_of() {
  case "$1" in
    docker-ce*|containerd.io*|docker-compose-plugin*) echo docker;;
    nvidia-container-toolkit*) echo libnvidia-container;;
    nvidia-open*) echo cuda;;
    *) log "no repository for $1"; exit 1;;
  esac
}

sign_release() { # dir-with-Release
  gpg --batch --yes --local-user "$key_id" --clearsign -o "$1/InRelease" "$1/Release"
  gpg --batch --yes --local-user "$key_id" --armor --detach-sign -o "$1/Release.gpg" "$1/Release"
}

stage="$work/out"
mkdir -p "$stage"
gpg --batch --armor --export "$key_id" >"$work/key.asc"

# Docker: classic suite layout under <base>/<distro>.
docker_root="$stage/docker/$DISTRO"
mkdir -p "$docker_root/pool/stable" "$docker_root/dists/$SUITE/stable/binary-$ARCH"
cp "$work/key.asc" "$docker_root/gpg"
# NVIDIA flat repositories.
nct_root="$stage/libnvidia-container/stable/deb/$ARCH"
mkdir -p "$nct_root"
cp "$work/key.asc" "$stage/libnvidia-container/gpgkey"
cuda_root="$stage/cuda/$CUDA_DISTRO_ID/$CUDA_ARCH"
mkdir -p "$cuda_root"
cp "$work/key.asc" "$cuda_root/3bf863cc.pub"

for deb in "$work"/debs/*.deb; do
  case "$(repo_of "$(basename "$deb")")" in
    docker) cp "$deb" "$docker_root/pool/stable/";;
    libnvidia-container) cp "$deb" "$nct_root/";;
    cuda) cp "$deb" "$cuda_root/";;
  esac
done

(cd "$docker_root" \
  && apt-ftparchive packages pool >"dists/$SUITE/stable/binary-$ARCH/Packages" \
  && gzip -9kn "dists/$SUITE/stable/binary-$ARCH/Packages" \
  && apt-ftparchive -o APT::FTPArchive::Release::Suite="$SUITE" -o APT::FTPArchive::Release::Codename="$SUITE" \
       -o APT::FTPArchive::Release::Components=stable -o APT::FTPArchive::Release::Architectures="$ARCH" \
       -o APT::FTPArchive::Release::Origin="sparkfleet stand-in for Docker" \
       release "dists/$SUITE" >"$work/Release" && mv "$work/Release" "dists/$SUITE/Release")
sign_release "$docker_root/dists/$SUITE"

for flat in "$nct_root" "$cuda_root"; do
  (cd "$flat" \
    && apt-ftparchive packages . >Packages && gzip -9kn Packages \
    && apt-ftparchive -o APT::FTPArchive::Release::Origin="sparkfleet stand-in" release . >"$work/Release" \
    && mv "$work/Release" Release)
  sign_release "$flat"
done

printf '%s\n' "$digest" >"$stage/.digest"
# The key's fingerprint, which the Molecule scenarios pin as the roles' *_apt_key_fingerprint.
printf '%s\n' "$key_id" >"$stage/fingerprint"
rm -rf "$OUT"
mkdir -p "$(dirname "$OUT")"
cp -r "$stage" "$OUT"
chmod -R a+rX "$OUT"
log "built $(find "$OUT" -name '*.deb' | wc -l) stand-in packages into $OUT ($digest)"
printf '%s\n' "$OUT"
