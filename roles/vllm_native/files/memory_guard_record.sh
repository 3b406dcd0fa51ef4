#!/bin/sh
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# ExecStopPost of a sparkfleet.vllm server unit: says whether the kernel's OOM killer stopped the server.
#
# It runs in the unit's own cgroup after the server exited and before systemd removes the cgroup, so the kernel's
# counters are still there: memory.events (cgroup v2) or memory.oom_control (cgroup v1), whose oom_kill counts the
# unit's processes the OOM killer killed, and the unit's ceiling (memory.max, memory.limit_in_bytes). systemd itself
# says Result=oom-kill on cgroup v2 only; on v1 a unit stopped at its MemoryMax ends with result 'signal', 9/KILL.
# The line goes to the journal (stdout) and, given a path, to the server's log file, where wait_healthy reads it
# (the catalog's diagnostics oom_at_memory_ceiling and oom_host_out_of_memory). Never fails the unit's stop.
# Usage: memory_guard_record.sh [LOG_FILE]
log_file=$1
unit=$(sed -n 's|^0::.*/\([^/]*\)$|\1|p' /proc/self/cgroup)
while IFS=: read -r _id controllers path; do
    case "$controllers" in
        "") events="/sys/fs/cgroup$path/memory.events"; limit="/sys/fs/cgroup$path/memory.max" ;;
        memory) events="/sys/fs/cgroup/memory$path/memory.oom_control"; limit="/sys/fs/cgroup/memory$path/memory.limit_in_bytes" ;;
        *) continue ;;
    esac
    [ -r "$events" ] || continue
    kills=$(awk '$1 == "oom_kill" { print $2 }' "$events")
    [ -n "$kills" ] && [ "$kills" -gt 0 ] || exit 0
    ceiling=$(cat "$limit" 2>/dev/null)
    # No ceiling reads "max" (v2) or a page-rounded 2^63 (v1).
    case "$ceiling" in
        ""|max|???????????????????*) ceiling="" ;;
    esac
    if [ -n "$ceiling" ]; then
        line="sparkfleet memory guard: the kernel's OOM killer killed $kills process(es) of ${unit:-this unit} at its memory ceiling of $ceiling bytes ($(basename "$events") oom_kill $kills)"
    else
        line="sparkfleet memory guard: the kernel's OOM killer killed $kills process(es) of ${unit:-this unit}, which has no memory ceiling: the host ran out of memory ($(basename "$events") oom_kill $kills)"
    fi
    echo "$line"
    if [ -n "$log_file" ]; then
        echo "$line" >> "$log_file" 2>/dev/null
    fi
    exit 0
done < /proc/self/cgroup
exit 0
