"""Where the minutes go: a pytest plugin that records every tier's wall time, each test's
phases and each fixture's set-up, and a report that adds them up.

Loaded by tests/conftest.py. Each pytest run (one tier) writes
tests/output/times/<tier>.json: the tier's wall time, the slowest tests (set-up,
call and tear-down apart) and every fixture whose set-up took a second or more —
that is where server starts, image builds, environment builds and cluster
bring-up show, by fixture name. `make test-times` (and the end of `make test`)
prints the per-tier table and the costliest fixtures across tiers:

    python tests/timing.py [tests/output/times]

Measurement only: nothing here gates on a time.
"""
import json
import os
import pathlib
import sys
import time

import pytest

OUT_DIR = pathlib.Path(__file__).resolve().parent / "output" / "times"
FIXTURE_FLOOR_S = 1.0  # fixture set-ups shorter than this are not worth a line
KEEP_TESTS = 25


def tier_name(config):
    """The tier a run belongs to: tests/<tier> from its first argument (`unit`, `integration`, ...)."""
    tests_dir = pathlib.Path(__file__).resolve().parent
    for arg in config.args:
        path = pathlib.Path(str(arg).split("::", maxsplit=1)[0]).resolve()
        try:
            parts = path.relative_to(tests_dir).parts
        except ValueError:
            continue
        if parts:
            # A part of a tier (tests/harness/lanes.sh runs the Molecule tier in parts) keeps a record of its own.
            part = os.environ.get("SPARKFLEET_TIMES_PART")
            return parts[0].replace(".py", "") + ("-" + part if part else "")
    return "other"


class Recorder:
    def __init__(self, config):
        self.config = config
        self.started = time.monotonic()
        self.tests = {}
        self.fixtures = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        started = time.monotonic()
        yield
        seconds = time.monotonic() - started
        if seconds >= FIXTURE_FLOOR_S:
            self.fixtures.append({"fixture": fixturedef.argname, "scope": fixturedef.scope,
                                  "seconds": round(seconds, 1), "first_user": request.node.nodeid})

    def pytest_runtest_logreport(self, report):
        entry = self.tests.setdefault(report.nodeid, {"test": report.nodeid, "setup": 0.0, "call": 0.0,
                                                      "teardown": 0.0, "outcome": "passed"})
        entry[report.when] = round(report.duration, 2)
        if report.outcome != "passed" and (report.when == "call" or report.outcome == "failed"):
            entry["outcome"] = report.outcome

    def pytest_sessionfinish(self, session):
        tests = sorted(self.tests.values(), key=lambda t: t["setup"] + t["call"] + t["teardown"], reverse=True)
        record = {
            "tier": tier_name(self.config),
            "wall_s": round(time.monotonic() - self.started, 1),
            "tests": len(tests),
            "slowest": tests[:KEEP_TESTS],
            "fixtures": sorted(self.fixtures, key=lambda f: f["seconds"], reverse=True),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        out_dir = pathlib.Path(os.environ.get("SPARKFLEET_TIMES_DIR", OUT_DIR))
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / ("%s.json" % record["tier"])).write_text(json.dumps(record, indent=1))
        except OSError as exc:  # a read-only checkout must not fail the tier
            sys.stderr.write("timing: cannot write %s: %s\n" % (out_dir, exc))

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.write_line("tier %s: %.0f s wall (set-ups over %.0f s listed in tests/output/times/)" % (
            tier_name(self.config), time.monotonic() - self.started, FIXTURE_FLOOR_S))
        for fixture in sorted(self.fixtures, key=lambda f: f["seconds"], reverse=True)[:8]:
            terminalreporter.write_line("  fixture %-28s %7.1f s  (%s)" % (
                fixture["fixture"], fixture["seconds"], fixture["first_user"]))


def register(config):
    if not hasattr(config, "workerinput"):  # a pytest-xdist worker reports to its controller
        config.pluginmanager.register(Recorder(config), "sparkfleet-timing")


def report(times_dir=OUT_DIR, out=sys.stdout):
    """The per-tier table and the costliest fixtures, from the JSON records the tiers wrote."""
    records = []
    for path in sorted(pathlib.Path(times_dir).glob("*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    if not records:
        out.write("no timing records under %s: run a tier first (make test-unit, ...)\n" % times_dir)
        return 1
    order = ["lint", "unit", "integration", "molecule", "cluster", "awx"]
    records.sort(key=lambda r: order.index(r["tier"]) if r["tier"] in order else len(order))
    total = sum(r["wall_s"] for r in records)
    out.write("%-12s %8s %6s  %s\n" % ("tier", "wall", "tests", "slowest test (set-up + call + tear-down)"))
    for rec in records:
        slow = rec["slowest"][0] if rec["slowest"] else None
        out.write("%-12s %5.1f min %6d  %s\n" % (
            rec["tier"], rec["wall_s"] / 60, rec["tests"],
            "%.0f s %s" % (slow["setup"] + slow["call"] + slow["teardown"], slow["test"]) if slow else "-"))
    out.write("%-12s %5.1f min  (sum of tier wall times; `make test` overlaps them in two lanes, whose wall\n"
              "%-12s            times tests/harness/lanes.sh prints above)\n\n" % ("total", total / 60, ""))
    fixtures = sorted(((f["seconds"], rec["tier"], f["fixture"], f["first_user"]) for rec in records
                       for f in rec["fixtures"]), reverse=True)
    out.write("costliest fixture set-ups (server starts, image and environment builds, cluster bring-up):\n")
    for seconds, tier, fixture, user in fixtures[:15]:
        out.write("  %6.1f s  %-11s %-28s %s\n" % (seconds, tier, fixture, user))
    return 0


if __name__ == "__main__":
    sys.exit(report(sys.argv[1] if len(sys.argv) > 1 else OUT_DIR))
