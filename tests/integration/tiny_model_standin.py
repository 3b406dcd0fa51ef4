"""Stand-in model for the HTTP-module integration tests (not Gemma 4).

A 2-layer Llama-shaped model (hidden 256, 4 heads -> head_dim 64, which vLLM's
CPU attention accepts; intermediate 512) with random weights and a WordLevel
tokenizer carrying a chat template, written as safetensors. No hub download is
possible here, so the model is generated locally. The native-runtime role has
its own generator for the deploy path; this one exists only so these tests can
start a server before (or without) that role.

Run with the vLLM venv's Python:  .venv-vllm/bin/python tiny_model_standin.py DIR
"""
import json
import pathlib
import sys

WORDS = (  # noqa: SIM905 - a word list reads better as prose
    "the a an of to and in is it you that he was for on are as with his they I at be this have from or one had by "
    "word but not what all were we when your can said there use each which she do how their if will up other about "
    "out many then them these so some her would make like him into time has look two more write go see number no way "
    "could people my than first water been call who oil its now find long down day did get come made may part over "
    "new sound take only little work know place year live me back give most very after thing our just name good "
    "sentence man think say great where help through much before line right too mean old any same tell boy follow "
    "came want show also around form three small set put end does another well large must big even such because "
    "turn here why ask went men read need land different home us move try kind hand picture again change off play "
    "spell air away animal house point page letter mother answer found study still learn should world high every "
    "near add food between own below country plant last school father keep tree never start city earth eye light "
    "thought head under story saw left few while along might close something seem next hard open example begin life "
    "always those both paper together got group often run important until children side feet car mile night walk "
    "white sea began grow took river four carry state once book hear stop without second later miss idea enough eat "
    "face watch far real almost let above girl sometimes mountain cut young talk soon list song being leave family "
    "hello vLLM token fast server model yes . , ? ! : ; ' \" ( ) 0 1 2 3 4 5 6 7 8 9"
).split()

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|> "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %} <|end|> "
    "{% endfor %}{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def build(target):
    """Write config, tokenizer and random safetensors weights into target (no transformers import)."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    target = pathlib.Path(target)
    target.mkdir(parents=True, exist_ok=True)
    specials = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>",
                "<|tool|>"]
    vocab = {}
    for token in specials + WORDS:
        vocab.setdefault(token, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.add_special_tokens(specials)
    tok.save(str(target / "tokenizer.json"))
    (target / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "bos_token": "<s>",
        "eos_token": "</s>", "pad_token": "<pad>", "model_max_length": 2048, "chat_template": CHAT_TEMPLATE,
    }, indent=1))
    (target / "special_tokens_map.json").write_text(json.dumps({
        "unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}))
    vocab_size, hidden, inter, layers, heads = 512, 256, 512, 2, 4
    assert len(vocab) <= vocab_size, len(vocab)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size,
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": heads, "head_dim": hidden // heads,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "attention_bias": False, "mlp_bias": False,
    }
    (target / "config.json").write_text(json.dumps(config, indent=1))
    (target / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)

    tensors = {"model.embed_tokens.weight": rand(vocab_size, hidden), "model.norm.weight":
               torch.ones(hidden, dtype=torch.bfloat16), "lm_head.weight": rand(vocab_size, hidden)}
    for i in range(layers):
        pre = "model.layers.%d." % i
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[pre + "self_attn.%s.weight" % name] = rand(hidden, hidden)
        tensors[pre + "mlp.gate_proj.weight"] = rand(inter, hidden)
        tensors[pre + "mlp.up_proj.weight"] = rand(inter, hidden)
        tensors[pre + "mlp.down_proj.weight"] = rand(hidden, inter)
        tensors[pre + "input_layernorm.weight"] = torch.ones(hidden, dtype=torch.bfloat16)
        tensors[pre + "post_attention_layernorm.weight"] = torch.ones(hidden, dtype=torch.bfloat16)
    save_file(tensors, str(target / "model.safetensors"), metadata={"format": "pt"})
    return target


if __name__ == "__main__":
    print(build(sys.argv[1]))
