"""make lint: ruff, yamllint, ansible-lint (production profile) and ansible-test sanity."""
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
    require(tool("ansible-lint"), "ansible-lint")
    proc = run([tool("ansible-lint"), "--profile", "production", "--offline", "--nocolor"], timeout=900)
    assert "Failed" not in proc.stdout, proc.stdout[-4000:]


def test_ansible_test_sanity():
    require(tool("ansible-test"), "ansible-test")
    run(["bash", str(REPO / "tests/harness/sanity.sh")], timeout=1800)
