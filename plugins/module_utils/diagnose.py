# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Match an engine log against the catalog's fatal start-up signatures.

The signatures are data: the `diagnostics` table of data/catalog.yml (id,
regular expressions, title, explanation, fix). `wait_healthy` runs on the
controller, loads the catalog and passes the table in (`load_signatures`);
it scans the log on every poll and stops at the first match instead of
waiting for its timeout. This file holds only the matching.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat

# The catalog's table, read on first use. On a managed host, where the catalog
# does not exist, it is empty: only the process-exit and timeout checks remain.
FATAL_SIGNATURES = cat.CatalogView(cat.diagnostics, missing=())


def load_signatures(catalog=None):
    """The signature table of `catalog` (a loaded catalog dict), or of the collection's catalog when None."""
    return tuple(cat.diagnostics(cat.load_catalog() if catalog is None else catalog))


def compile_signature(entry):
    """One regular expression for a catalog entry: any of its `patterns` matches."""
    return re.compile("|".join("(?:%s)" % pattern for pattern in entry["patterns"]))


def _compiled(signatures):
    return [(entry, compile_signature(entry)) for entry in signatures]


def _fill(text, match):
    """The entry's text with {name} filled from the pattern's named groups; {fits} is the utilization that fits."""
    groups = {key: value for key, value in match.groupdict().items() if value is not None}
    if not groups:
        return text
    if "free" in groups and "total" in groups:
        share = float(groups["free"]) / float(groups["total"]) - 0.02  # the CUDA context takes some
        groups["fits"] = "%.2f" % max(0.0, math.floor(share * 100) / 100)
    try:
        return text.format(**groups)
    except (KeyError, IndexError, ValueError):
        return text


def diagnose(log_text, signatures=FATAL_SIGNATURES):
    """Every signature found in log_text, in table order, with the matching line.

    The generic `engine_startup_failed` entry is kept last so that a specific
    cause, when present, is reported first.
    """
    found = []
    lines = (log_text or "").splitlines()
    for entry, regex in _compiled(signatures):
        for line in lines:
            match = regex.search(line)
            if match:
                excerpt = line[max(0, match.start() - 120):match.end() + 240].strip()
                found.append({"id": entry["id"], "title": entry["title"],
                              "explanation": _fill(" ".join(entry["explanation"].split()), match),
                              "fix": _fill(" ".join((entry.get("fix") or "").split()), match),
                              "line": excerpt, "match": match.group(0)})
                break
    return found


def first_diagnosis(log_text, signatures=FATAL_SIGNATURES):
    found = diagnose(log_text, signatures)
    return found[0] if found else None


def describe(diagnosis):
    """One operator-facing paragraph."""
    if not diagnosis:
        return ""
    fix = (" Fix: %s" % diagnosis["fix"]) if diagnosis.get("fix") else ""
    return "%s. %s%s (log: %s)" % (diagnosis["title"], diagnosis["explanation"], fix, diagnosis["line"])
