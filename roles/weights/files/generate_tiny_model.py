# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Generate the tiny stand-in model and place it in the Hugging Face cache.

The local default (no GPU, no hub) serves this instead of Gemma 4: a
Llama-shaped decoder with random weights and a byte-level BPE tokenizer
trained on a fixed text, written into `<hf_home>/hub/models--<org>--<name>/`
with blobs, a snapshot of relative symlinks and `refs/main` exactly as a hub
download leaves them, so vLLM resolves the checkpoint id with
HF_HUB_OFFLINE=1. A fixed seed makes the output byte-identical run to run.

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


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hf-home", required=True, help="HF_HOME; the cache is <hf-home>/hub")
    parser.add_argument("--repo-id", required=True, help="checkpoint id, e.g. sparkfleet/tiny-random-llama")
    parser.add_argument("--revision", required=True, help="snapshot name (40 hex digits)")
    parser.add_argument("--spec", required=True, help="JSON: layers, hidden, heads, kv_heads, "
                        "intermediate, vocab, max_position, seed")
    parser.add_argument("--check", action="store_true", help="report whether generation is needed; write nothing")
    return parser.parse_args(argv)


def repo_dir(hf_home, repo_id):
    return pathlib.Path(hf_home) / "hub" / ("models--" + repo_id.replace("/", "--"))


def build_tokenizer(spec):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=int(spec["vocab"]), special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([CORPUS] * 4, trainer=trainer)
    return tokenizer


def generate(target, spec):
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
