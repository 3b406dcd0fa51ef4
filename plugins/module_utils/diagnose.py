# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Known fatal vLLM start-up signatures and what they mean for this collection.

`FATAL_SIGNATURES` is data: one entry per failure the notes (and the CPU
stand-in) record, with a regular expression over the engine log, a title, and
an explanation with the fix. `wait_healthy` scans the log on every poll and
stops at the first match instead of waiting for its timeout. It lives here
until `data/catalog.yml` grows a `diagnostics:` section (same keys: id,
pattern, title, explanation); `load_signatures()` prefers that section when
the catalog provides it.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

FATAL_SIGNATURES = (
    {
        "id": "mm_token_budget_floor",
        "pattern": r"max_tokens_per_mm_item \(\d+\) is larger than max_num_batched_tokens",
        "title": "--max-num-batched-tokens is below the multimodal encoder's per-item budget",
        "explanation": "Gemma 4 is multimodal and vLLM refuses to start when --max-num-batched-tokens is "
                       "below one image's encoder budget (2496). 4096 is the floor for any Gemma 4 model with "
                       "vision; only --language-model-only (text-only) removes the floor.",
    },
    {
        "id": "context_exceeds_model_max",
        "pattern": r"(User-specified max_model_len \(\d+\) is greater than the derived max_model_len"
                   r"|max_model_len \(?\d+\)? is greater than the derived max_model_len"
                   r"|exceeds the model's maximum|larger than the maximum model length)",
        "title": "--max-model-len is longer than the model's maximum context",
        "explanation": "vLLM refuses a --max-model-len above the model's own maximum: 262,144 for the 31B, "
                       "26B-A4B and 12b, 131,072 for the E4B and E2B. Lower --max-model-len (the planner "
                       "caps it per model).",
    },
    {
        "id": "kv_cache_below_one_request",
        "pattern": r"(is larger than the available KV cache memory|"
                   r"larger than the maximum number of tokens that can be stored in KV cache|"
                   r"No available memory for the cache blocks|"
                   r"To serve at least one request with the models's max seq len)",
        "title": "KV cache smaller than one full-length request",
        "explanation": "After the weights and the activation peak, the KV cache cannot hold one request at "
                       "--max-model-len. On a 31B first start this is expected: the first start compiles from "
                       "scratch and profiles a higher peak; the compile cache survives, so retry once (restart: "
                       "unless-stopped does it on its own). Otherwise lower --max-model-len or "
                       "--max-num-batched-tokens.",
    },
    {
        "id": "flash_attention_unsupported",
        "pattern": r"(FlashAttention does not support|flash_attn.*(?:not supported|is not available)|"
                   r"FLASH_ATTN.*(?:not supported|cannot be used|is not valid)|"
                   r"Selected backend .*FLASH_ATTN.* is not valid)",
        "title": "FlashAttention backend cannot serve this model here",
        "explanation": "FlashAttention supports neither the fp8 KV cache nor Gemma 4's multimodal PrefixLM "
                       "attention, and FA3/FA4 are built for neither sm_120 nor sm_121. Use triton_attn (drop "
                       "--attention-backend flash_attn; a DFlash drafter needs \"attention_backend\": "
                       "\"triton_attn\" in --speculative-config).",
    },
    {
        "id": "expert_parallel_drafter",
        "pattern": r"Number of experts in the model must be greater than 0 when expert parallelism is enabled",
        "title": "Drafter inherits --enable-expert-parallel (upstream defect)",
        "explanation": "On v0.30.0 the 26B-A4B's expert parallelism is copied into the dense drafter's "
                       "parallel config (vllm-project/vllm#56930, #56936). On the cluster serve the 26B-A4B "
                       "without a drafter, or DFlash on v0.29.0; MTP does not start on any release yet.",
    },
    {
        "id": "mtp_reduction_dim",
        "pattern": r"a and b must have same reduction dim",
        "title": "MTP drafter under the V1 model runner",
        "explanation": "Gemma 4 MTP needs the target's embeddings shared into the drafter, which only the V2 "
                       "model runner does. Use vLLM v0.29.0 or later (V2 by default) or set "
                       "VLLM_USE_V2_MODEL_RUNNER=1 on v0.26-v0.28.",
    },
    {
        "id": "out_of_memory",
        "pattern": r"(CUDA out of memory|torch\.OutOfMemoryError|OutOfMemoryError|"
                   r"Cannot allocate memory|out of memory)",
        "title": "Out of memory",
        "explanation": "The engine ran out of memory while loading or profiling. Lower "
                       "--gpu-memory-utilization only if something else shares the GPU; otherwise lower "
                       "--max-num-batched-tokens first, then --max-model-len, or drop the drafter (DFlash does "
                       "not fit beside the 31B on a 32 GB card). On the CPU build the fraction is of RAM.",
    },
    {
        "id": "gated_download",
        "pattern": r"(401 Client Error|403 Client Error|GatedRepoError|Cannot access gated repo|"
                   r"RepositoryNotFoundError|Access to model .* is restricted|Invalid user token)",
        "title": "Model download refused (401/403)",
        "explanation": "Hugging Face refused the download: HF_TOKEN is missing or invalid, or the account has "
                       "not accepted the model's licence. Put a valid token in the env file (mode 0600) and "
                       "accept the licence on the model page.",
    },
    {
        "id": "multinode_rpc_timeout",
        "pattern": r"RPC call to sample_tokens timed out",
        "title": "Multi-node engine stalled (vLLM v0.26 shared-memory queue)",
        "explanation": "v0.26.0's message queue can lose a wakeup across nodes and park the engine until this "
                       "timeout. Multi-node needs vLLM v0.27.0 or later.",
    },
    {
        "id": "bad_argument",
        "pattern": r"(error: unrecognized arguments: .*|error: argument [^\n]*|"
                   r"error: ambiguous option: .*)",
        "title": "vLLM rejected a command-line argument",
        "explanation": "The serve command line has a flag this vLLM release does not know or a value it "
                       "refuses; check the plan's argv against the pinned release.",
    },
    {
        "id": "engine_startup_failed",
        "pattern": r"(Engine core initialization failed|RuntimeError: Engine process failed to start)",
        "title": "Engine core failed to start",
        "explanation": "The engine process died during start-up; the lines before this one name the cause.",
    },
)


def load_signatures(catalog=None):
    """The signature table: the catalog's `diagnostics` section when it has one, else FATAL_SIGNATURES."""
    table = (catalog or {}).get("diagnostics") if isinstance(catalog, dict) else None
    return tuple(table) if table else FATAL_SIGNATURES


def _compiled(signatures):
    return [(entry, re.compile(entry["pattern"])) for entry in signatures]


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
                found.append({"id": entry["id"], "title": entry["title"], "explanation": entry["explanation"],
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
    return "%s. %s (log: %s)" % (diagnosis["title"], diagnosis["explanation"], diagnosis["line"])
