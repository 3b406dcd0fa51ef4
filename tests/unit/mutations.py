"""Mutations of the collection's detection code, for tests/unit/test_mutations.py.

Loaded as a pytest plugin (`-p mutations`) in one child pytest run. Two kinds of mutation, each of which removes
one detection:

* MUTATIONS: an attribute replaced by a version that detects nothing (the throughput gate, the start-up failure
  diagnosis, the secret-name rules, ...);
* the planner's refusal paths (refusal_sites()): in every module of plugins/module_utils/plan/, every call of the
  refusal helper (inputs.refuse, which the other modules call as ``_refuse``), every ``raise PlanError(...)`` and
  every refusal a ``*_refusal`` helper returns, found in the source by its syntax. A refusal mutant is the function
  holding that one path, recompiled with the path made a no-op (``pass``; ``return None`` for a returned
  refusal) and swapped in through ``__code__``, so every alias of the function runs the mutant.

SPARKFLEET_MUTATION_PLAN names a JSON file {mutation: [node ids of its catching tests]}. Each catching test runs
once as usual (the baseline: it must pass), then once per mutation it catches, alone, in a forked copy of this
process with that one mutation applied: no test runs after another under a mutation, so a dead catcher cannot
hide behind a live one. The outcomes go to the JSON file SPARKFLEET_MUTATION_RESULTS:
{"baseline": {node: outcome}, "mutants": {mutation: {node: outcome}}}, outcome {"outcome": passed|failed|skipped|
error|timeout, "detail": text, "seconds": wall time (mutants)}. Linux and macOS only (os.fork).

SPARKFLEET_MUTATION=<name> instead applies one mutation to the whole run (for reading a catcher's failure by hand).
"""
import ast
import copy
import gc
import importlib
import json
import os
import pkgutil
import select
import signal
import sys
import time

import pytest
from _pytest.runner import runtestprotocol

from ansible_collections.sparkfleet.vllm.plugins.module_utils import (
    bench_metrics,
    diagnose,
    env_rules,
    topology,
    vllm_flags,
)
from ansible_collections.sparkfleet.vllm.plugins.module_utils import plan as plan_package


def _gate_always_passes(measured, expected, min_ratio=0.9):
    result = ORIGINALS["gate"](measured, expected, min_ratio)
    for check in result["checks"]:
        check["passed"] = True
    return dict(result, passed=True)


def _gate_at_the_default_floor(measured, expected, min_ratio=0.9):
    """The gate that ignores the floor it is given (vllm_throughput_min_ratio reaching it changes nothing)."""
    return ORIGINALS["gate"](measured, expected)


def _gate_on_single_stream_only(measured, expected, min_ratio=0.9):
    """The gate without its 8-stream check."""
    expected = {k: v for k, v in (expected or {}).items() if k != "aggregate_8_tok_s"} if expected else expected
    return ORIGINALS["gate"](measured, expected, min_ratio)


def _no_diagnosis(*_args, **_kwargs):
    return []


def _exact_spellings_only(name, options, _allow_abbrev):
    """The guards before issue 13: a flag counts only when spelled exactly (no prefixes, no glued values)."""
    return ([options[name]] if name in options else []), None


def _every_character_allowed(_value):
    return []


def _every_layout_pays_off(*_args, **_kwargs):
    return []


ORIGINALS = {"gate": bench_metrics.gate}
# name -> (object, attribute, replacement): each removes one detection.
MUTATIONS = {
    "gate": (bench_metrics, "gate", _gate_always_passes),
    "gate-ratio": (bench_metrics, "gate", _gate_at_the_default_floor),
    "gate-8-stream": (bench_metrics, "gate", _gate_on_single_stream_only),
    "diagnosis": (diagnose, "diagnose", _no_diagnosis),
    "secret-names": (env_rules, "SECRET_NAME_RULES", ()),
    "flag-spellings": (vllm_flags, "_resolve", _exact_spellings_only),
    "key-characters": (env_rules, "env_value_problems", _every_character_allowed),
    "topology": (topology, "_layout_warnings", _every_layout_pays_off),
}

# --- the planner's refusal paths --------------------------------------------------------

# The modules whose refusals reach the user as PlanError (every module of the planner's package, so that a new one
# is searched too); the helper every refusal goes through and its aliases.
REFUSAL_MODULES = tuple(importlib.import_module("%s.%s" % (plan_package.__name__, module.name))
                        for module in sorted(pkgutil.iter_modules(plan_package.__path__), key=lambda m: m.name))
REFUSAL_PREFIX = "refusal:"
_REFUSERS = ("refuse", "_refuse")
_HELPER = "refuse"  # inputs.refuse itself raises PlanError for every path: not a path of its own


def _rule_of(node):
    """The rule a refusal names: a literal, the literal part of "rule:%s" % ..., else the expression's text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
        return node.left.value.split("%", 1)[0].rstrip(":")
    return ast.unparse(node)


def _called(call):
    """The name a call calls: f(...) and module.f(...) alike."""
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _refusal_rule(node, function):
    """The rule of the refusal statement `node` in function `function` (an ast def), or None if it is none."""
    if function.name == _HELPER:
        return None
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _called(node.value) in _REFUSERS \
            and node.value.args:
        return _rule_of(node.value.args[0])
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and _called(node.exc) == "PlanError":
        rule = [k.value for k in node.exc.keywords if k.arg == "rule"]
        return _rule_of(rule[0]) if rule else "PlanError"
    if isinstance(node, ast.Return) and function.name.endswith("_refusal") and isinstance(node.value, ast.Tuple):
        return _rule_of(node.value.elts[-1])
    return None


def _functions(tree, prefix=""):
    """(qualname, def node) for every function and method of a module, in source order."""
    for node in tree.body if isinstance(tree, ast.Module) else tree:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node.body, prefix + node.name + ".")


def _sorted_by_position(nodes):
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


def _sites_in(module, tree):
    """{name: (qualname, function node, statement node)} of the refusal paths in one module's syntax tree."""
    sites = {}
    short = module.__name__.rsplit(".", 1)[-1]
    for qualname, function in _functions(tree):
        seen = {}
        for node in _sorted_by_position(n for n in ast.walk(function) if isinstance(n, ast.stmt)):
            rule = _refusal_rule(node, function)
            if rule is None:
                continue
            seen[rule] = seen.get(rule, 0) + 1
            name = "%s%s.%s:%s%s" % (REFUSAL_PREFIX, short, qualname, rule, "" if seen[rule] == 1 else "#%d" % seen[rule])
            sites[name] = (qualname, function, node)
    return sites


def _parse(module):
    with open(module.__file__) as handle:
        return ast.parse(handle.read(), module.__file__)


_SITES = {}


def _all_sites():
    """{name: (module, qualname, function node, statement node)} of every refusal path, parsed once."""
    if not _SITES:
        for module in REFUSAL_MODULES:
            for name, (qualname, function, node) in _sites_in(module, _parse(module)).items():
                _SITES[name] = (module, qualname, function, node)
    return _SITES


def refusal_sites():
    """{mutation name: (module, line)} for every refusal path of the planner, in source order within each module."""
    return {name: (module.__name__.rsplit(".", 1)[-1], node.lineno)
            for name, (module, _qualname, _function, node) in _all_sites().items()}


def _code_at(code, name, firstlineno):
    """The code object named `name` that starts at line `firstlineno`, searched through nested code objects."""
    if code.co_name == name and code.co_firstlineno == firstlineno:
        return code
    for const in code.co_consts:
        if hasattr(const, "co_consts"):
            found = _code_at(const, name, firstlineno)
            if found is not None:
                return found
    return None


_MUTANT_CODE = {}


def disable_refusal(name):
    """Swap in the code of the function that holds refusal path `name` with that path made a no-op."""
    live, code = refusal_mutant(name)
    live.__code__ = code


def refusal_mutant(name):
    """(the live function holding refusal path `name`, its code with that path made a no-op), compiled once: the
    function's definition alone, at its own lines, with the one statement replaced."""
    if name not in _MUTANT_CODE:
        if name not in _all_sites():
            raise KeyError("no refusal path %s (refusal_sites() lists them)" % name)
        module, qualname, function, target = _all_sites()[name]
        function = copy.deepcopy(function)
        where = (type(target), target.lineno, target.col_offset)
        target = next(n for n in ast.walk(function) if (type(n), getattr(n, "lineno", None), getattr(n, "col_offset", None)) == where)
        noop = ast.copy_location(ast.Return(value=None) if isinstance(target, ast.Return) else ast.Pass(), target)
        for parent in ast.walk(function):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(parent, field, None)
                if isinstance(block, list) and any(stmt is target for stmt in block):
                    block[[id(stmt) for stmt in block].index(id(target))] = noop
        code = compile(ast.Module(body=[function], type_ignores=[]), module.__file__, "exec")
        owner = module
        for part in qualname.split(".")[:-1]:
            owner = getattr(owner, part)
        live = getattr(owner, qualname.split(".")[-1])
        mutant = _code_at(code, live.__code__.co_name, live.__code__.co_firstlineno)
        if mutant is None or mutant.co_code == live.__code__.co_code or mutant.co_freevars != live.__code__.co_freevars:
            raise AssertionError("refusal %s: no mutant code for %s" % (name, qualname))
        _MUTANT_CODE[name] = (live, mutant)
    return _MUTANT_CODE[name]


def apply(name):
    """Apply mutation `name` to this process (for good: run it in a process of its own)."""
    if name.startswith(REFUSAL_PREFIX):
        disable_refusal(name)
        return
    target, attribute, replacement = MUTATIONS[name]
    setattr(target, attribute, replacement)


# --- the child run ----------------------------------------------------------------------

MUTANT_TIMEOUT_S = 300
_PLAN = {}       # node id -> [mutations it catches]
_RESULTS = {"baseline": {}, "mutants": {}}


def _outcome(reports):
    failed = [r for r in reports if r.failed]
    if failed:
        return {"outcome": "failed", "detail": ("%s: %s" % (failed[0].when, failed[0].longreprtext))[-1500:]}
    if any(r.skipped for r in reports):
        return {"outcome": "skipped", "detail": str([r.longrepr for r in reports if r.skipped][0])[-500:]}
    return {"outcome": "passed", "detail": ""}


def _run_mutant(item, name):
    """Run `item` alone under mutation `name` in a forked copy of this process; its outcome."""
    started = time.monotonic()
    result = _forked(item, name)
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def _forked(item, name):
    if name.startswith(REFUSAL_PREFIX):
        try:
            refusal_mutant(name)  # compiled here, once, not in every copy
        except (AssertionError, KeyError) as exc:
            return {"outcome": "error", "detail": "%s: %s" % (type(exc).__name__, exc)}
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: apply, run the one test, report, leave without any teardown or session end
        code = 0
        gc.disable()  # a collection would walk, and so copy, every page of the parent's objects
        try:
            os.close(read_end)
            try:
                apply(name)
                # A plain traceback: pytest's own parses the test module's source for each failure (0.2 s each).
                item.config.option.tbstyle = "native"
                # nextitem=item: the fixtures stay set up (nothing here is torn down; the copy exits).
                result = _outcome(runtestprotocol(item, log=False, nextitem=item))
            except BaseException as exc:  # noqa: BLE001 -- whatever happens is the outcome
                result = {"outcome": "error", "detail": "%s: %s" % (type(exc).__name__, exc)}
            data = json.dumps(result).encode()
            while data:
                data = data[os.write(write_end, data):]
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + MUTANT_TIMEOUT_S
    while True:
        ready = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))[0]
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_end)
            return {"outcome": "timeout", "detail": "no outcome within %d s" % MUTANT_TIMEOUT_S}
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    if not chunks:
        return {"outcome": "error", "detail": "the forked run reported nothing"}
    return json.loads(b"".join(chunks).decode())


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    name = os.environ.get("SPARKFLEET_MUTATION")
    if name:
        apply(name)
        config.sparkfleet_mutation = name
    plan_file = os.environ.get("SPARKFLEET_MUTATION_PLAN")
    if plan_file:
        with open(plan_file) as handle:
            for mutation, nodes in json.load(handle).items():
                for node in nodes:
                    _PLAN.setdefault(node, []).append(mutation)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    # A plan names a test (every case of it) or one case.
    mutations = _PLAN.get(item.nodeid, []) + (_PLAN.get(item.nodeid.split("[", 1)[0], []) if "[" in item.nodeid else [])
    if not mutations:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    _RESULTS["baseline"][item.nodeid] = _outcome(runtestprotocol(item, log=True, nextitem=nextitem))
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    for name in mutations:
        _RESULTS["mutants"].setdefault(name, {})[item.nodeid] = _run_mutant(item, name)
    return True


def pytest_sessionfinish(session):
    out = os.environ.get("SPARKFLEET_MUTATION_RESULTS")
    if out and _PLAN:
        with open(out, "w") as handle:
            json.dump(_RESULTS, handle, indent=1, sort_keys=True)


if __name__ == "__main__":  # the refusal paths, one a line: python tests/unit/mutations.py
    for site, (where, line) in refusal_sites().items():
        sys.stdout.write("%s  (%s.py:%d)\n" % (site, where, line))
