"""make lint: ruff, yamllint, ansible-lint (production profile) and ansible-test sanity."""
import re

import pytest

from conftest import REPO, require, run, tool


@pytest.mark.parametrize("name", ["ruff", "yamllint", "ansible-lint", "ansible-test"])
def test_tool_present(name):
    require(tool(name), "%s (run `make venv`)" % name)


def test_ruff():
    require(tool("ruff"), "ruff")
    paths = [p for p in ("plugins", "tests", "roles", "awx", "playbooks") if (REPO / p).exists()]
    run([tool("ruff"), "check"] + paths)


def test_yamllint():
    require(tool("yamllint"), "yamllint")
    run([tool("yamllint"), "--strict", "."])


def test_ansible_lint_production():
    """The suite's one ansible-lint run, over the whole checkout (.ansible-lint: production profile, offline). It
    covers what the AWX tier once linted again on its own (awx/, execution-environment.yml and
    meta/execution-environment.yml): -vv logs each file examined and its kind, so a file dropped from the run
    (an exclude_paths entry, a kind no longer recognised) fails here."""
    require(tool("ansible-lint"), "ansible-lint")
    proc = run([tool("ansible-lint"), "--profile", "production", "--offline", "--nocolor", "-vv"], timeout=900)
    assert "Failed" not in proc.stdout, proc.stdout[-4000:]
    assert "Profile 'production' was required, and it passed" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    examined = dict(re.findall(r"Examining (\S+) of type (\S+)", proc.stderr))
    wanted = {str(p.relative_to(REPO)): None for p in sorted((REPO / "awx").rglob("*")) if p.is_file()}
    wanted.update({"execution-environment.yml": "execution-environment", "meta/execution-environment.yml": "execution-environment"})
    missing = {path: kind or "any" for path, kind in wanted.items() if path not in examined or kind not in (None, examined[path])}
    assert len(wanted) > 2 and not missing, "not linted as expected (path: kind): %s" % missing


def test_ansible_test_sanity():
    require(tool("ansible-test"), "ansible-test")
    run(["bash", str(REPO / "tests/harness/sanity.sh")], timeout=1800)
