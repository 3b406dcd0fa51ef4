"""Secret-looking environment names, and the characters an env file carries unchanged."""
import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import env_rules


@pytest.mark.parametrize("name, pattern", [
    ("HF_TOKEN", "*TOKEN*"), ("HUGGING_FACE_HUB_TOKEN", "*TOKEN*"), ("hf_token", "*TOKEN*"), ("HF_TOKEN_PATH", "*TOKEN*"),
    ("GITHUB_TOKEN", "*TOKEN*"), ("VLLM_API_KEY", "*_KEY"), ("OPENAI_API_KEY", "*_KEY"), ("AWS_SECRET_ACCESS_KEY", "*_KEY"),
    ("CLIENT_SECRET", "*SECRET*"), ("DB_PASSWORD", "*PASSWORD*"), ("RAY_AUTH_MODE", "RAY_AUTH_*"),
    ("RAY_AUTH_TOKEN_PATH", "*TOKEN*"),
])
def test_secret_looking_names(name, pattern):
    assert env_rules.secret_name_rule(name) == pattern


@pytest.mark.parametrize("name", [
    "TOKENIZERS_PARALLELISM", "VLLM_MAX_TOKENS_PER_ITER", "NCCL_DEBUG", "OMP_NUM_THREADS", "VLLM_SERVER_DEV_MODE",
    "RAY_health_check_period_ms", "KEYBOARD", "HF_HUB_OFFLINE",
])
def test_ordinary_names_pass(name):
    assert env_rules.secret_name_rule(name) is None


def test_the_allowed_set_is_printable_ascii_without_whitespace():
    assert len(env_rules.ENV_VALUE_ALLOWED) == 94
    assert env_rules.env_value_problems("sk-" + env_rules.ENV_VALUE_ALLOWED) == []
    assert "without whitespace" in env_rules.ENV_VALUE_ALLOWED_TEXT


@pytest.mark.parametrize("value, named", [
    ("has space", ["space"]), ("a$b'c\"d\\e`f", []), ("line\nbreak\ttab", ["newline", "tab"]),
    ("nul\x00", ["NUL"]), ("caf\u00e9", ["U+00E9"]), ("bell\x07", ["U+0007"]),
])
def test_refused_characters_are_named_once_each(value, named):
    assert env_rules.env_value_problems(value) == named
