"""The whole-model reference for expert parallelism in the simulated cluster (run with .venv-vllm's python).

Usage: moe_reference.py SNAPSHOT RANKS PROMPT

Loads the served stand-in's snapshot (copied from the head) with transformers, in float32 on the controller's CPU,
and prints JSON: the prompt's token ids, each prompt token's log-probability under the whole model (``whole``),
and under the model with only the experts vLLM's linear placement gives rank 0 of RANKS (``rank0_only``: every
other expert's down projection zeroed). A cluster whose ranks each run their own experts and sum them serves
``whole``; one whose MoE layers lose the other ranks' experts serves something near ``rank0_only``.
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def prompt_logprobs(model, ids):
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float().log_softmax(-1)
    return [logits[i - 1, ids[i]].item() for i in range(1, len(ids))]


def main(snapshot, ranks, prompt):
    ids = AutoTokenizer.from_pretrained(snapshot)(prompt)["input_ids"]
    model = AutoModelForCausalLM.from_pretrained(snapshot, dtype=torch.float32).eval()
    whole = prompt_logprobs(model, ids)
    zeroed = 0
    with torch.no_grad():
        for name, weights in model.named_parameters():
            if name.endswith("experts.down_proj"):
                weights[weights.shape[0] // int(ranks):] = 0
                zeroed += 1
    if not zeroed:
        raise SystemExit("no experts.down_proj in %s: not an MoE checkpoint" % snapshot)
    print(json.dumps({"ids": ids, "whole": whole, "rank0_only": prompt_logprobs(model, ids)}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
