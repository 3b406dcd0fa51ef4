# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Generate a tiny stand-in model and place it in the Hugging Face cache.

The local default (no GPU, no hub) serves one of these instead of Gemma 4
NVFP4: random weights and a byte-level BPE tokenizer trained on a fixed text,
written into `<hf_home>/hub/models--<org>--<name>/` with blobs, a snapshot of
relative symlinks and `refs/main` exactly as a hub download leaves them, so
vLLM resolves the checkpoint id with HF_HUB_OFFLINE=1. A fixed seed makes the
output byte-identical run to run.

The spec's `family` picks the layout: `llama` (the default: the `tiny`
Llama-shaped decoder) or `gemma4` (transformers' Gemma4TextConfig: sliding and
full attention layers, optionally the MoE block beside the MLP, optionally the
E-series' per-layer inputs and shared KV layers), whose tokenizer carries the
special tokens of Gemma 4's chat format (turns, thinking channel, tool
declarations, calls and responses, the string delimiter, image and audio
placeholders) and a chat template that writes them, so vLLM's gemma4
reasoning and tool-call parsers see the tokens they scan for. A third family,
`gemma4_assistant`, is a stand-in's MTP drafter (transformers'
Gemma4AssistantForCausalLM, what vLLM loads as Gemma4MTPModel): Q-only layers
that read the target's KV cache, between projections from and to the target's
hidden size. Its spec carries the target's own spec as `target`, so the
vocabulary (the same trained tokenizer), the backbone's hidden size and the
head dims and KV heads of the caches it reads are the target's by
construction; it writes no tokenizer (vLLM drafts with the target's).

Prints one JSON line: {"changed": bool, "snapshot": path, "revision": rev}.
Runs with the interpreter of vLLM's virtual environment (torch, tokenizers,
transformers and safetensors all come with vLLM).
"""
import argparse
import hashlib
import json
import os
import pathlib
import shutil
import sys
import tempfile

# Fixed training text: the tokenizer (and so the vocabulary) is reproducible.
CORPUS = """\
sparkfleet serves Gemma 4 with vLLM on Blackwell machines: one RTX PRO 6000,
one RTX 5090, one DGX Spark, or two and four DGX Sparks over RoCE.
The quick brown fox jumps over the lazy dog. 0 1 2 3 4 5 6 7 8 9 10 100 1000.
What is the capital of France? Paris. How many legs does a spider have? Eight.
The assistant answers the user. The user asks a question and waits for tokens.
Tool calls, reasoning, images and audio are checked by the smoke module.
"""
SPECIAL_TOKENS = ["<|pad|>", "<|bos|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
# Gemma 4's special tokens. The first four keep Gemma's ids (pad 0, eos 1, bos 2, unk 3), the ids
# Gemma4TextConfig defaults to. vLLM's gemma4 parser (vllm/parser/gemma4.py) scans for the turn, channel,
# tool-call, tool-response and string-delimiter tokens; transformers' Gemma4Processor reads the image and
# audio ones from the tokenizer (image_token, boi_token, eoi_token, audio_token, boa_token, eoa_token).
GEMMA4_SPECIAL_TOKENS = [
    "<pad>", "<eos>", "<bos>", "<unk>", "<mask>",
    "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>",
    "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", '<|"|>',
    "<|image>", "<image|>", "<|image|>", "<|audio>", "<audio|>", "<|audio|>", "<|video|>",
]
# Named tokens a Gemma 4 tokenizer carries as attributes (tokenizer_config.json's extra_special_tokens).
GEMMA4_NAMED_TOKENS = {
    "image_token": "<|image|>", "boi_token": "<|image>", "eoi_token": "<image|>",
    "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>",
}
# Tokens that end a model turn (generation_config.json's eos_token_id), as in Gemma 4's checkpoints.
GEMMA4_STOP_TOKENS = ["<eos>", "<turn|>"]
# Plain role-tagged turns; string or list-of-parts content, so
# /v1/chat/completions renders for every request shape the smoke checks send.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% elif message['content'] %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "<|end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
# Gemma 4's chat format, reduced to what the smoke checks send: a system turn that opens with <|think|> when
# enable_thinking is set and declares each tool as <|tool>declaration:name{...}<tool|>; user and model turns
# between <|turn>role and <turn|> (the assistant role is written "model"); earlier tool calls as
# <|tool_call>call:name{...}<tool_call|> and tool results as <|tool_response>response:name{...}<tool_response|>;
# an image part as <|image|> (the processor expands it to <|image> + soft tokens + <image|>), audio as <|audio|>.
# Strings inside declarations and calls are delimited with <|"|>, as the gemma4 tool parser reads them.
GEMMA4_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% set system = messages[0]['content'] if messages and messages[0]['role'] in ['system', 'developer'] "
    "else none %}"
    "{% if enable_thinking or tools or system is not none %}"
    "<|turn>system\n"
    "{% if enable_thinking %}<|think|>{% endif %}"
    "{% if system is string %}{{ system }}{% elif system %}{% for part in system %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% for tool in tools or [] %}"
    "{% set fn = tool['function'] if tool['function'] is defined else tool %}"
    "<|tool>declaration:{{ fn['name'] }}{description:<|\"|>{{ fn['description'] | default('') }}<|\"|>,"
    "parameters:{{ fn['parameters'] | default({}) | tojson }}}<tool|>"
    "{% endfor %}"
    "<turn|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] in ['system', 'developer'] and loop.first %}"
    "{% elif message['role'] == 'tool' %}"
    "<|tool_response>response:{{ message['name'] | default('tool') }}{value:<|\"|>"
    "{{ message['content'] if message['content'] is string else message['content'] | tojson }}<|\"|>}"
    "<tool_response|>"
    "{% else %}"
    "<|turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% elif message['content'] %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] in ['image', 'image_url'] %}<|image|>"
    "{% elif part['type'] in ['audio', 'input_audio', 'audio_url'] %}<|audio|>{% endif %}"
    "{% endfor %}{% endif %}"
    "{% for call in message['tool_calls'] or [] %}"
    "{% set fn = call['function'] if call['function'] is defined else call %}"
    "<|tool_call>call:{{ fn['name'] }}{{ '{' }}"
    "{% set arguments = fn['arguments'] if fn['arguments'] is mapping else {} %}"
    "{% for key, value in arguments | dictsort %}"
    "{{ key }}:{% if value is string %}<|\"|>{{ value }}<|\"|>{% else %}{{ value | tojson }}{% endif %}"
    "{{ ',' if not loop.last }}"
    "{% endfor %}"
    "}<tool_call|>"
    "{% endfor %}"
    "<turn|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hf-home", required=True, help="HF_HOME; the cache is <hf-home>/hub")
    parser.add_argument("--repo-id", required=True, help="checkpoint id, e.g. sparkfleet/tiny-random-llama")
    parser.add_argument("--revision", required=True, help="snapshot name (40 hex digits)")
    parser.add_argument("--spec", required=True, help="JSON: family (llama|gemma4), layers, hidden, heads, "
                        "kv_heads, intermediate, vocab, max_position, seed; gemma4 adds layer_types, head_dim, "
                        "global_head_dim, global_kv_heads, sliding_window, experts, top_k, moe_intermediate, "
                        "per_layer_hidden, kv_shared_layers; gemma4_assistant takes layers, layer_types, hidden, "
                        "intermediate, heads, seed and its target's spec as target")
    parser.add_argument("--check", action="store_true", help="report whether generation is needed; write nothing")
    return parser.parse_args(argv)


def repo_dir(hf_home, repo_id):
    return pathlib.Path(hf_home) / "hub" / ("models--" + repo_id.replace("/", "--"))


def build_tokenizer(spec, special_tokens=None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=int(spec["vocab"]), special_tokens=special_tokens or SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([CORPUS] * 4, trainer=trainer)
    return tokenizer


def gemma4_text_config(spec, vocab_size, token_ids):
    """Gemma4TextConfig keyword arguments for a spec (pure: the unit tests read it without torch)."""
    layer_types = list(spec.get("layer_types") or ["sliding_attention", "full_attention"])
    layers = int(spec.get("layers") or len(layer_types))
    if len(layer_types) != layers:
        raise ValueError("layer_types names %d layers, layers is %d" % (len(layer_types), layers))
    config = {
        "vocab_size": vocab_size, "hidden_size": int(spec["hidden"]), "intermediate_size": int(spec["intermediate"]),
        "num_hidden_layers": layers, "layer_types": layer_types,
        "num_attention_heads": int(spec["heads"]), "num_key_value_heads": int(spec["kv_heads"]),
        "head_dim": int(spec["head_dim"]), "global_head_dim": int(spec.get("global_head_dim") or spec["head_dim"]),
        "sliding_window": int(spec.get("sliding_window") or 512),
        "max_position_embeddings": int(spec["max_position"]),
        "hidden_size_per_layer_input": int(spec.get("per_layer_hidden") or 0),
        "vocab_size_per_layer_input": vocab_size,
        "num_kv_shared_layers": int(spec.get("kv_shared_layers") or 0),
        "final_logit_softcapping": 30.0,
        "pad_token_id": token_ids["<pad>"], "eos_token_id": token_ids["<eos>"], "bos_token_id": token_ids["<bos>"],
        "tie_word_embeddings": True, "dtype": "bfloat16",
    }
    if spec.get("global_kv_heads"):
        config["num_global_key_value_heads"] = int(spec["global_kv_heads"])
        config["attention_k_eq_v"] = bool(spec.get("k_eq_v", False))
    if spec.get("experts"):
        config.update({"enable_moe_block": True, "num_experts": int(spec["experts"]),
                       "top_k_experts": int(spec["top_k"]), "moe_intermediate_size": int(spec["moe_intermediate"])})
    return config


def gemma4_assistant_config(spec, vocab_size, token_ids):
    """Gemma4AssistantConfig keyword arguments, text_config as Gemma4TextConfig's, for a drafter spec (pure).

    The draft's own dimensions come from the spec; what it shares with its target, from ``spec["target"]`` (the
    served stand-in's spec): vLLM points each draft layer at the target's last layer of the same attention type
    and reads that layer's cache, so the head dims and KV heads must be the target's, and pre_projection takes
    the target's embedding and hidden state (2 x its hidden size)."""
    target = spec.get("target") or {}
    if not target:
        raise ValueError("a gemma4_assistant spec needs its target's spec as target")
    target_types = list(target.get("layer_types") or ["sliding_attention", "full_attention"])
    layer_types = list(spec.get("layer_types") or ["full_attention"] * int(spec["layers"]))
    missing = sorted(set(layer_types) - set(target_types))
    if missing:
        raise ValueError("draft layer types %s have no target layer to share KV with (target: %s)" % (
            ", ".join(missing), ", ".join(target_types)))
    shared = ("kv_heads", "global_kv_heads", "k_eq_v", "head_dim", "global_head_dim", "sliding_window", "max_position")
    text_spec = {key: target[key] for key in shared if key in target}
    text_spec.update({"layers": int(spec.get("layers") or len(layer_types)), "layer_types": layer_types,
                      "hidden": spec["hidden"], "intermediate": spec["intermediate"], "heads": spec["heads"]})
    for kv_key in ("kv_heads", "global_kv_heads"):
        if text_spec.get(kv_key) and int(text_spec["heads"]) % int(text_spec[kv_key]):
            raise ValueError("heads (%s) must be a multiple of the target's %s (%s)" % (
                text_spec["heads"], kv_key, text_spec[kv_key]))
    text_config = gemma4_text_config(text_spec, vocab_size, token_ids)
    # Gemma4AssistantConfig.validate_architecture: no per-layer inputs, no MoE block, every layer KV-shared.
    text_config.update({"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0,
                        "num_kv_shared_layers": text_config["num_hidden_layers"]})
    return {"text_config": text_config, "backbone_hidden_size": int(target["hidden"]),
            "use_ordered_embeddings": False, "tie_word_embeddings": True}


def generate_gemma4_assistant(target_dir, spec):
    import torch
    from transformers import Gemma4AssistantConfig, Gemma4AssistantForCausalLM, Gemma4TextConfig

    torch.manual_seed(int(spec["seed"]))
    # The target's tokenizer, trained again from its spec: the same vocabulary and special-token ids.
    tokenizer = build_tokenizer(spec["target"], GEMMA4_SPECIAL_TOKENS)
    token_ids = {token: tokenizer.token_to_id(token) for token in GEMMA4_SPECIAL_TOKENS}
    fields = gemma4_assistant_config(spec, tokenizer.get_vocab_size(), token_ids)
    config = Gemma4AssistantConfig(text_config=Gemma4TextConfig(**fields.pop("text_config")), **fields)
    model = Gemma4AssistantForCausalLM(config).to(torch.bfloat16)
    model.generation_config.max_length = None
    model.generation_config.eos_token_id = [token_ids[t] for t in GEMMA4_STOP_TOKENS]
    model.save_pretrained(target_dir)


def generate_gemma4(target, spec):
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig, PreTrainedTokenizerFast

    torch.manual_seed(int(spec["seed"]))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(spec, GEMMA4_SPECIAL_TOKENS), bos_token="<bos>", eos_token="<eos>",
        pad_token="<pad>", unk_token="<unk>", mask_token="<mask>", extra_special_tokens=GEMMA4_NAMED_TOKENS,
        model_max_length=int(spec["max_position"]), chat_template=GEMMA4_CHAT_TEMPLATE)
    tokenizer.save_pretrained(target)
    token_ids = {token: tokenizer.convert_tokens_to_ids(token) for token in GEMMA4_SPECIAL_TOKENS}
    config = Gemma4TextConfig(**gemma4_text_config(spec, len(tokenizer), token_ids))
    model = Gemma4ForCausalLM(config).to(torch.bfloat16)
    model.generation_config.max_length = None
    model.generation_config.eos_token_id = [token_ids[t] for t in GEMMA4_STOP_TOKENS]
    model.save_pretrained(target)


def generate(target, spec):
    if spec.get("family", "llama") == "gemma4":
        return generate_gemma4(target, spec)
    if spec.get("family") == "gemma4_assistant":
        return generate_gemma4_assistant(target, spec)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(int(spec["seed"]))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(spec), bos_token="<|bos|>", eos_token="<|end|>",
        pad_token="<|pad|>", model_max_length=int(spec["max_position"]), chat_template=CHAT_TEMPLATE)
    tokenizer.save_pretrained(target)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=int(spec["hidden"]),
        intermediate_size=int(spec["intermediate"]), num_hidden_layers=int(spec["layers"]),
        num_attention_heads=int(spec["heads"]), num_key_value_heads=int(spec["kv_heads"]),
        max_position_embeddings=int(spec["max_position"]), tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.generation_config.max_length = None
    model.save_pretrained(target)


def file_digest(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def blob_is_intact(blob):
    """A blob is named by its sha256: trust it only when its content still hashes to that name."""
    return blob.is_file() and file_digest(blob) == blob.name


def snapshot_is_intact(snapshot):
    """Every file of the snapshot resolves to an intact blob."""
    files = [path for path in snapshot.rglob("*") if path.is_symlink() or path.is_file()]
    return bool(files) and all(blob_is_intact(path.resolve()) for path in files)


def place_in_cache(staging, repo, revision):
    """Move files to blobs/<sha256>, link them from snapshots/<rev>/, then point refs/main at rev."""
    blobs = repo / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    snapshot_tmp = pathlib.Path(tempfile.mkdtemp(prefix=".snapshot-", dir=repo))
    for source in sorted(staging.rglob("*")):
        if not source.is_file():
            continue
        blob = blobs / file_digest(source)
        if not blob_is_intact(blob):
            # Copy under a temporary name and rename: a copy cut short (full disk, killed run)
            # never takes the blob's name, so a re-run cannot mistake it for a good one.
            partial = blobs / (".%s.partial" % blob.name)
            shutil.copyfile(source, partial)
            partial.chmod(0o644)
            partial.rename(blob)
        link = snapshot_tmp / source.relative_to(staging)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, (repo / "snapshots" / revision / source.relative_to(staging)).parent))
    (repo / "snapshots").mkdir(exist_ok=True)
    snapshot_tmp.chmod(0o755)
    snapshot_tmp.rename(repo / "snapshots" / revision)
    (repo / "refs").mkdir(exist_ok=True)
    ref_tmp = repo / "refs" / ".main.tmp"
    ref_tmp.write_text(revision)
    ref_tmp.rename(repo / "refs" / "main")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    spec = json.loads(args.spec)
    repo = repo_dir(args.hf_home, args.repo_id)
    snapshot = repo / "snapshots" / args.revision
    ref = repo / "refs" / "main"
    complete = ((snapshot / "model.safetensors").exists() and ref.exists() and ref.read_text() == args.revision
                and snapshot_is_intact(snapshot))
    result = {"changed": not complete, "snapshot": str(snapshot), "revision": args.revision}
    if complete or args.check:
        print(json.dumps(result))
        return 0
    if snapshot.exists():  # a half-written or damaged snapshot from an interrupted run
        shutil.rmtree(snapshot)
    for leftover in list(repo.glob(".snapshot-*")) + list(repo.glob("blobs/.*.partial")):
        if leftover.is_dir():
            shutil.rmtree(leftover)
        else:
            leftover.unlink()
    repo.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".staging-", dir=repo) as staging:
        generate(staging, spec)
        place_in_cache(pathlib.Path(staging), repo, args.revision)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
