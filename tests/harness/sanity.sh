#!/usr/bin/env bash
# ansible-test sanity for this collection, offline.
# ansible-test needs the collection at .../ansible_collections/sparkfleet/vllm
# and refuses anything else, so we copy the tracked files (never tests/output,
# .venv or caches: a leftover venv fails the line-endings and symlinks tests)
# into a temporary tree and run it there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# The toolchain: the checkout's .venv, or VENV (relative to the checkout) as make passes it
# (make test-lowest-core runs this on the lowest ansible-core meta/runtime.yml claims).
venv="$root/${VENV:-.venv}"
ansible_test=${ANSIBLE_TEST:-$venv/bin/ansible-test}

# Place the offline get-pip stand-in where ansible-test looks before it downloads.
pip_version=$("$venv/bin/python" - <<'PY'
import re, pathlib, ansible_test
src = pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
print(re.search(r"pip='([0-9.]+)'", src.read_text()).group(1))
PY
)
cache="$HOME/.ansible/test/cache"
mkdir -p "$cache"
cp "$root/tests/harness/get_pip_standin.py" "$cache/get_pip_${pip_version//./_}.py"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dest="$work/ansible_collections/sparkfleet/vllm"
mkdir -p "$dest"
# Tracked and not-yet-committed files alike, minus what .gitignore excludes and the checkout symlink, and minus the
# test suite (tests/, the roles' molecule/ scenarios), which galaxy.yml's build_ignore keeps out of the collection
# too: sanity judges what ships, as a certification run on the built collection does. The suite's Python is linted by
# ruff in the same tier (tests/lint/test_lint.py), its YAML by yamllint and ansible-lint. Measured (2026-12-07):
# sanity over the whole checkout took 390 s in a fresh-clone run beside the cluster tier.
(cd "$root" && git ls-files -z --cached --others --exclude-standard \
  | grep -zvE '^(\.collections/|tests/|roles/[^/]+/molecule/)' \
  | while IFS= read -r -d '' path; do [ -e "$path" ] && cp --parents -P "$path" "$dest/"; done; true)
cd "$dest"
git init -q . && git add -A >/dev/null
export ANSIBLE_COLLECTIONS_PATH="$work:$venv/lib/python3.11/site-packages/ansible_collections"
"$ansible_test" sanity --color no --venv --python "$(python3 -c 'import sys;print(f"{sys.version_info[0]}.{sys.version_info[1]}")')" "$@"
