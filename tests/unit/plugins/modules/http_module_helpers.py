"""Run a module's main() in-process with patched exit/fail (shared by the HTTP module tests)."""
import pathlib
import sys
from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "benchmarks"))

from fast_token_source import FastTokenSource  # noqa: E402 - lives in tests/benchmarks, put on the path above

__all__ = ["Exit", "FastTokenSource", "run_module"]


class Exit(Exception):
    def __init__(self, kind, result):
        super().__init__(kind)
        self.kind, self.result = kind, result


def _exit_json(self, **kwargs):
    raise Exit("exit", kwargs)


def _fail_json(self, **kwargs):
    raise Exit("fail", kwargs)


def run_module(module, args, check_mode=False):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args), mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json):
        try:
            module.main()
        except Exit as done:
            return done.kind, done.result
    raise AssertionError("module returned without exit_json/fail_json")
