# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Host memory on a unified-memory machine: how much is available, and who holds the most.

On a DGX Spark the GPU's memory is the host's (GB10, one LPDDR5X pool), so what other processes hold before vLLM
starts is memory the engine cannot have, and an engine that takes more than is left wedges the host instead of
failing (the catalog's profiles.dgx_spark.memory_budget). The ``gpu_facts`` module reads ``/proc`` on the target
with ``read_host_memory``; the parsing and sorting are pure, so unit tests feed them text.

A vLLM already running on the host (a re-run of the play) is counted as available: its processes are told apart by
their command line, and the play restarts them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

# How many of the largest holders a report names.
HOLDERS = 5


def parse_meminfo(text):
    """``/proc/meminfo`` to {"total_mib", "available_mib"} (None where a field is missing)."""
    fields = {}
    for line in (text or "").splitlines():
        name, _colon, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdigit():
            fields[name.strip()] = int(words[0])
    return {"total_mib": _mib(fields.get("MemTotal")), "available_mib": _mib(fields.get("MemAvailable"))}


def _mib(kib):
    return None if kib is None else kib // 1024


def parse_status(text):
    """``/proc/<pid>/status`` to (name, resident KiB); a kernel thread (no VmRSS) holds 0."""
    name, rss = None, 0
    for line in (text or "").splitlines():
        if line.startswith("Name:"):
            name = line[len("Name:"):].strip()
        elif line.startswith("VmRSS:"):
            words = line[len("VmRSS:"):].split()
            rss = int(words[0]) if words and words[0].isdigit() else 0
    return name, rss


def is_vllm(cmdline):
    """Whether a NUL-separated ``/proc/<pid>/cmdline`` is a vLLM server's: a process vLLM titled (``VLLM::EngineCore``,
    ``VLLM::Worker_TP1``), a Python running ``vllm.entrypoints`` (``-m``, or the cluster role's ``-c``), or ``vllm
    serve``. A path that merely contains "vllm" (Ray run from a venv named .venv-vllm) is not one."""
    words = [w for w in (cmdline or "").split("\0") if w]
    if not words:
        return False
    if words[0].startswith("VLLM::"):
        return True
    if any("vllm.entrypoints" in w for w in words[:3]):
        return True
    return any(os.path.basename(w) == "vllm" and nxt == "serve" for w, nxt in zip(words, words[1:]))


def gpu_mib(gpu_processes):
    """{pid: MiB} of GPU memory from the ``gpu_facts`` process list (entries without a pid or a size are skipped)."""
    out = {}
    for entry in gpu_processes or ():
        try:
            pid = int(entry["pid"])
            out[pid] = out.get(pid, 0) + int(entry.get("used_memory_mib") or 0)
        except (KeyError, TypeError, ValueError):
            continue
    return out


def holders(processes, gpu_processes=(), count=HOLDERS):
    """The ``count`` largest holders of memory, largest first: ``processes`` are (pid, name, rss KiB, is vLLM) from
    ``/proc``; ``gpu_processes`` the ``gpu_facts`` process list, whose GPU memory on unified memory is host memory
    that a process's resident size does not show. Each holder: pid, name, mib (resident + GPU), vllm. ``count`` None
    keeps every process."""
    gpu = gpu_mib(gpu_processes)
    rows = [{"pid": int(pid), "name": name, "mib": rss // 1024 + gpu.get(int(pid), 0), "vllm": bool(vllm)}
            for pid, name, rss, vllm in processes]
    rows.sort(key=lambda row: (-row["mib"], row["pid"]))
    return rows if count is None else rows[:count]


def summary(meminfo, processes, gpu_processes=(), count=HOLDERS):
    """The facts ``gpu_facts`` returns as ``host_memory``: total and available MiB, what this host's own vLLM holds
    (available to the next start: the play restarts it), available_for_server_mib (the sum), and the largest
    holders."""
    memory = parse_meminfo(meminfo)
    rows = holders(processes, gpu_processes, count=None)
    vllm_mib = sum(row["mib"] for row in rows if row["vllm"])
    available = memory["available_mib"]
    return {
        "total_mib": memory["total_mib"],
        "available_mib": available,
        "vllm_mib": vllm_mib,
        "available_for_server_mib": None if available is None else available + vllm_mib,
        "holders": rows[:count],
    }


def _read(path, binary=False):
    try:
        with open(path, "rb" if binary else "r") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def read_processes(proc_root="/proc"):
    """(pid, name, rss KiB, is vLLM) for every process ``proc_root`` lists that is still there when read."""
    out = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        status = _read(os.path.join(proc_root, entry, "status"))
        if status is None:
            continue
        name, rss = parse_status(status)
        cmdline = _read(os.path.join(proc_root, entry, "cmdline"), binary=True) or b""
        out.append((int(entry), name, rss, is_vllm(cmdline.decode("utf-8", "replace"))))
    return out


def read_host_memory(proc_root="/proc", gpu_processes=(), count=HOLDERS):
    """``summary`` of this host, read from ``proc_root``."""
    return summary(_read(os.path.join(proc_root, "meminfo")), read_processes(proc_root), gpu_processes, count)
