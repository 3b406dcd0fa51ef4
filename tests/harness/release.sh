#!/usr/bin/env bash
# make release: turn the changelog fragments into the release galaxy.yml names, build the collection, check
# the tarball, commit the changelog and tag v<version>.
#
#   make release DRY_RUN=1   # the same steps in a scratch copy of the checkout: nothing here changes, no tag
#   make release             # in this checkout: needs a clean tree and a version that is not tagged yet
#
# Checks on the tarball: installed content only, with MANIFEST.json at galaxy.yml's version
# (tests/tarball_contents.py); it installs offline; the installed sparkfleet.vllm.site passes a syntax check.
# Publishing (ansible-galaxy collection publish, git push --tags) stays a person's step.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
VENV_DIR="${VENV:-.venv}"
BIN="$REPO/$VENV_DIR/bin"
export PATH="$BIN:$PATH"
DRY_RUN="${DRY_RUN:-}"
VERSION="$(sed -n 's/^version: *//p' galaxy.yml)"
TAG="v$VERSION"
step() { printf '\n==> %s\n' "$*"; }

if git rev-parse -q --verify "refs/tags/$TAG" >/dev/null; then
    echo "make release: $TAG already exists; raise version in galaxy.yml first" >&2
    exit 1
fi
if ! ls changelogs/fragments/*.y*ml >/dev/null 2>&1; then
    echo "make release: no fragments in changelogs/fragments; nothing to release as $VERSION" >&2
    exit 1
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
if [ -n "$DRY_RUN" ]; then
    # Tracked and untracked-but-not-ignored files, the tree the release commit would hold, in a directory
    # laid out as a collection path so that antsibull-changelog's ansible-doc finds the plugins.
    work="$scratch/ansible_collections/sparkfleet/vllm"
    mkdir -p "$work"
    git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' path; do
        if [ -e "$path" ] || [ -L "$path" ]; then printf '%s\0' "$path"; fi
    done | tar --null -T - -cf - | tar -xf - -C "$work"
    step "DRY_RUN: release $VERSION in a scratch copy ($work); this checkout is not changed and nothing is tagged"
else
    if [ -n "$(git status --porcelain)" ]; then
        echo "make release: the working tree is not clean; commit or stash first" >&2
        exit 1
    fi
    work="$REPO"
fi
cd "$work"
# The copy's own ansible.cfg: its .collections symlink exposes the copy as sparkfleet.vllm to ansible-doc.
export ANSIBLE_CONFIG="$work/ansible.cfg"

step "Changelog fragments"
antsibull-changelog lint
step "Changelog release $VERSION (fragments -> changelogs/changelog.yaml, CHANGELOG.md, CHANGELOG.rst)"
antsibull-changelog release --version "$VERSION" --date "$(date -u +%Y-%m-%d)"
antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml

step "Build"
rm -rf build/release
ansible-galaxy collection build --force --output-path build/release .
tarball="build/release/sparkfleet-vllm-$VERSION.tar.gz"

step "Checks on $tarball"
python tests/tarball_contents.py "$tarball" "$VERSION"
ANSIBLE_COLLECTIONS_PATH="$scratch/installed" \
    ansible-galaxy collection install --offline --no-deps --force -p "$scratch/installed" "$tarball" >/dev/null
# The dependencies come from the `ansible` package in the venv (no Galaxy server), as in the build test.
collections="$scratch/installed:$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
printf '[defaults]\n' > "$scratch/empty.cfg"
(cd "$scratch" && ANSIBLE_CONFIG="$scratch/empty.cfg" ANSIBLE_COLLECTIONS_PATH="$collections" \
    ansible-playbook sparkfleet.vllm.site --syntax-check -i "$REPO/inventories/spark4")

if [ -n "$DRY_RUN" ]; then
    step "DRY_RUN: the release notes $VERSION would carry"
    python - "$VERSION" <<'PY'
import sys, yaml
changes = yaml.safe_load(open("changelogs/changelog.yaml"))["releases"][sys.argv[1]]["changes"]
for section, entries in changes.items():
    print("%s:" % section)
    for entry in [entries] if isinstance(entries, str) else entries:
        print("  - " + " ".join(entry.split())[:150])
PY
    step "DRY_RUN: would commit changelogs/ CHANGELOG.md CHANGELOG.rst as \"Release $VERSION\" and tag $TAG (not done)"
    exit 0
fi

step "Commit and tag $TAG"
git add changelogs CHANGELOG.md CHANGELOG.rst
git commit -q -m "Release $VERSION"
git tag -a "$TAG" -m "sparkfleet.vllm $VERSION"
echo "Tagged $TAG; $tarball is the artifact. Push with: git push origin HEAD $TAG"
