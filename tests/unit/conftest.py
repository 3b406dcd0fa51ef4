"""The unit tier's conftest: tests/conftest.py's shared plumbing (re-exported below), and the fixtures and helpers
the GPU records' tests (tests/unit/test_gpu_records.py) and the harness tools' tests (tests/unit/harness/) share.

`h200_catalog` is the test catalog tests/harness/device/h200_catalog.py writes on the device (the stand-ins,
never data/catalog.yml); `load_harness_module` loads a tool of tests/harness/ by its path; `paired_cell`,
`SUMMARY_LINE` and `SUMMARY_LINE_COUNTS` recompute and read gpu_ratios.py's summary lines.
"""
import importlib.util
import pathlib
import re
import statistics

import pytest

# This file is itself imported as `conftest` (as tests/integration/conftest.py is), so the shared plumbing in
# tests/conftest.py is loaded by path and re-exported: test modules here keep writing `from conftest import REPO`
# (and the other names below, which tests/unit uses).
_SPEC = importlib.util.spec_from_file_location("sparkfleet_tests_conftest", pathlib.Path(__file__).parents[1] / "conftest.py")
_SHARED = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_SHARED)
REPO, IN_CI, require, run, tool = _SHARED.REPO, _SHARED.IN_CI, _SHARED.require, _SHARED.run, _SHARED.tool
failed_tasks, without_processes, keyless = _SHARED.failed_tasks, _SHARED.without_processes, _SHARED.keyless

HARNESS = REPO / "tests" / "harness"
DEVICE = HARNESS / "device"


def load_harness_module(relative):
    """A tool of tests/harness/ (not a package), loaded by its path: load_harness_module("catalog_docs.py")."""
    path = HARNESS / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_h200_catalog_module():
    return load_harness_module("device/h200_catalog.py")


@pytest.fixture(scope="module")
def h200_catalog():
    return load_h200_catalog_module().h200_catalog()


def paired_cell(values, counts=False):
    """One cell of gpu_ratios.py's summary recomputed from its paired ratios, as the summary line prints it:
    median, min, max, n, within/OUTSIDE ±5% (and, with `counts`, how many rounds were within, of how many)."""
    median = statistics.median(values)
    cell = ("%.3f" % median, "%.3f" % min(values), "%.3f" % max(values), str(len(values)),
            "within" if abs(median - 1) <= 0.05 else "OUTSIDE")
    if counts:
        cell += (str(sum(abs(v - 1) <= 0.05 for v in values)), str(len(values)))
    return cell


# A paired cell's line in gpu_ratios.py's summary (gpu_bench.summarize): median, min, max, n, within/OUTSIDE ±5%;
# SUMMARY_LINE_COUNTS adds "; K of N rounds within" (pass 6 on).
SUMMARY_LINE = re.compile(r"paired ratio median ([0-9.]+) \(min ([0-9.]+) max ([0-9.]+), n=(\d+)\) (within|OUTSIDE)")
SUMMARY_LINE_COUNTS = re.compile(SUMMARY_LINE.pattern + r"; (\d+) of (\d+) rounds within")
