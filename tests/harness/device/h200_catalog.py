"""Write the GPU run's test catalog: data/catalog.yml plus an `h200_standin` profile (test catalog only).

The collection's catalog plans Gemma 4 for Blackwell cards. The GPU lent to the project is one NVIDIA
H200 (Hopper, sm_90): it has no NVFP4 kernels and no sm_120 path, so no Gemma 4 checkpoint the catalog
names can be served there. This copy adds, named as stand-ins and never in data/catalog.yml:
- profile `h200_standin`: the H200 in place of a Blackwell card (KV cache in the model's dtype, not fp8;
  --gpu-memory-utilization 0.5: other tenants may share the card; native runtime; offline hub);
- model `tiny_h200`: the random Llama the collection's generator makes (4 layers, hidden 1024), served as
  `tiny`, in place of Gemma 4;
- release `v0.25.0` (vllm==0.25.0, the CUDA build tests/harness/device/gpu-kit.txt pins), a stand-in: the
  catalog's first plannable release is v0.26.0;
- model `tiny_gemma4_h200`: a tiny random Gemma 4 MoE from the same generator (family gemma4:
  Gemma4ForCausalLM, one sliding and one full attention layer, 8 experts top-2), served as `gemma-4-tiny`, in
  place of the 26B-A4B: the planner gives it Gemma 4's argv (gemma4 reasoning and tool-call parsers, auto tool
  choice). It is text-only, as Gemma4ForCausalLM is, so it has no --limit-mm-per-prompt (the 26B-A4B has one
  image a prompt); its random weights cannot think or call tools, so the smoke module's thinking and tools checks
  are declared as its expected misses;
- a calibrated baseline row per stand-in model, so the throughput gate compares with a calibration run on the
  same server.
Everything else is the collection's catalog, unchanged. Usage: h200_catalog.py OUT.yml
"""
import copy
import pathlib
import sys

import yaml

REPO = pathlib.Path(__file__).resolve().parents[3]
PROFILE = "h200_standin"
MODEL = "tiny_h200"
GEMMA4 = "tiny_gemma4_h200"
RELEASE = "v0.25.0"
# The generator's gemma4 family (roles/weights/files/generate_tiny_model.py): the 26B-A4B's layout in miniature.
GEMMA4_SPEC = {
    "family": "gemma4", "layers": 2, "layer_types": ["sliding_attention", "full_attention"], "hidden": 256,
    "heads": 4, "kv_heads": 2, "head_dim": 64, "intermediate": 512, "sliding_window": 512, "experts": 8,
    "top_k": 2, "moe_intermediate": 128, "vocab": 1024, "max_position": 4096, "seed": 0,
}
# Pass 8's larger stand-in (gpu-drift.sh, MODEL large): the same generator and layout, about 3.0 B parameters in
# bf16 (12 layers, five sliding to one full, hidden 2,560, a dense MLP of 10,240 and 8 experts of 2,560 top-2 in
# each layer; the generator's small vocabulary), so that a decode step does far more GPU work than the tiny
# stand-in's. Not in the test catalog: only the drift harness serves it, with pass 3's planned argv.
GEMMA4_LARGE_ID = "sparkfleet/random-gemma4-moe-3b-h200"
GEMMA4_LARGE_SPEC = {
    "family": "gemma4", "layers": 12, "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 2,
    "hidden": 2560, "heads": 8, "kv_heads": 4, "head_dim": 256, "intermediate": 10240, "sliding_window": 512,
    "experts": 8, "top_k": 2, "moe_intermediate": 2560, "vocab": 1024, "max_position": 4096, "seed": 0,
}


def parameters(spec):
    """The spec's parameter count without its embedding (a few per cent at most): attention, dense MLP, experts."""
    hidden, heads, kv_heads, head_dim = spec["hidden"], spec["heads"], spec["kv_heads"], spec["head_dim"]
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    dense = 3 * hidden * spec["intermediate"]
    experts = spec.get("experts", 0) * (3 * hidden * spec.get("moe_intermediate", 0) + hidden)
    return spec["layers"] * (attention + dense + experts)


def gemma4_standin(catalog):
    """The 26B-A4B's catalog entry with the generated tiny Gemma 4 MoE in place of the NVFP4 checkpoint."""
    model = copy.deepcopy(catalog["models"]["26b-a4b"])
    for key in ("weights_gib", "experts", "expert_intermediate_size", "gated", "smoke_expected_misses", "weight_format",
                "parameters_b", "active_parameters_b"):
        model.pop(key, None)
    model.update({
        "stand_in": True,
        "display": "tiny-random-gemma4-moe-h200 (stand-in for the 26B-A4B on the H200 stand-in)",
        "checkpoint": "sparkfleet/tiny-random-gemma4-moe-h200",
        "served_name": "gemma-4-tiny",
        "max_context": 4096,
        "vision": False,
        "audio": False,
        "source": "generate",
        "generate": dict(GEMMA4_SPEC),
        "smoke_expected_misses": {
            "thinking": [{"miss": "no_reasoning", "note": "random weights never open a thinking channel"}],
            "tools": [{"miss": "no_tool_call", "note": "random weights never write a tool call"}],
        },
        "note": "Random-weight Gemma 4 MoE from roles/weights/files/generate_tiny_model.py (family gemma4): "
                "no NVFP4 Gemma 4 runs on Hopper.",
    })
    return model


def h200_catalog():
    catalog = yaml.safe_load((REPO / "data" / "catalog.yml").read_text())
    model = copy.deepcopy(catalog["models"]["tiny"])
    model.update({
        "display": "tiny-random-llama-h200 (stand-in for Gemma 4 on the H200 stand-in)",
        "checkpoint": "sparkfleet/tiny-random-llama-h200",
        "layers": 4,
        "hidden_size": 1024,
        "attention_heads": 8,
        "max_context": 4096,
        "note": "Random-weight Llama from roles/weights/files/generate_tiny_model.py: no NVFP4 Gemma 4 runs on Hopper.",
    })
    catalog["models"][MODEL] = model
    catalog["models"][GEMMA4] = gemma4_standin(catalog)
    catalog["releases"][RELEASE] = {
        "version": "0.25.0",
        "stand_in": True,
        "image": None,
        "pip": "vllm==0.25.0",
        "plannable": True,
        "defects": [],
    }
    catalog["profiles"][PROFILE] = {
        "stand_in": True,
        "display": "NVIDIA H200 (Hopper, stand-in for a Blackwell card)",
        "blackwell": False,
        "compute_capabilities": ["9.0"],
        "gpu_name_patterns": ["H200"],
        "memory_gb": 141,
        "unified_memory": False,
        # Half the card: the lent H200 may carry other processes (the free-memory failure in ../h200/).
        "gpu_memory_utilization": 0.5,
        "max_num_batched_tokens": 8192,
        "default_drafter": "none",
        "default_model": MODEL,
        "default_release": RELEASE,
        "node_counts": [1],
        # The stand-in model ships no calibrated fp8 KV scales.
        "fp8_kv_cache": False,
        "default_runtime": "native",
        "env": {"HF_HUB_OFFLINE": "1"},
    }
    catalog["baselines"].append({
        "table": "H200 stand-in (vLLM 0.25.0 CUDA, tiny random model), calibrated on the serving machine",
        "profile": PROFILE,
        "nodes": 1,
        "release": RELEASE,
        "date": None,
        "stand_in": True,
        "rows": [{"model": MODEL, "drafter": "none", "calibrate": True},
                 {"model": GEMMA4, "drafter": "none", "calibrate": True}],
    })
    return catalog


def main(out):
    path = pathlib.Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# GENERATED by tests/harness/device/h200_catalog.py: data/catalog.yml + the h200_standin stand-in\n"
                    + yaml.safe_dump(h200_catalog(), sort_keys=False))


if __name__ == "__main__":
    main(sys.argv[1])
