"""The secrets contract: one resolution of each secret, and env-file quoting that round-trips.

The shell quoting is proven against bash itself, the way the native launcher reads its secret file
(`set -a; . secret.env`). systemd's EnvironmentFile= unescapes the same four characters inside double
quotes (\\ " ` $), and Compose's env_file parser is exercised for real in the compose integration test.
"""
import string
import subprocess

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import secrets

PRINTABLE = "".join(c for c in string.printable if c.isprintable())
NASTY = ["k$y 'q\"\\ #x", "a\\", "\\", "'", '"', "$HOME", "${X}", "$$", "`id`", "$(id)", " lead", "trail ", "#",
         "a#b", "\\n", "!x", "~", "*", "a;b", PRINTABLE]


def test_a_variable_wins_over_the_controller_environment():
    values = secrets.resolve(["VLLM_API_KEY", "HF_TOKEN"], {"vllm_api_key": "vault-key", "vllm_hf_token": "vault-hf"},
                             {"VLLM_API_KEY": "decoy", "HF_TOKEN": "decoy-hf"})
    assert values == {"VLLM_API_KEY": "vault-key", "HF_TOKEN": "vault-hf"}


@pytest.mark.parametrize("unset", [{}, {"vllm_api_key": ""}, {"vllm_api_key": None}])
def test_an_unset_or_empty_variable_falls_back_to_the_environment(unset):
    assert secrets.resolve(["VLLM_API_KEY"], unset, {"VLLM_API_KEY": "from-env"}) == {"VLLM_API_KEY": "from-env"}


def test_both_hub_token_names_come_from_vllm_hf_token():
    values = secrets.resolve(["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"], {"vllm_hf_token": "t"}, {})
    assert values == {"HF_TOKEN": "t", "HUGGING_FACE_HUB_TOKEN": "t"}


def test_a_name_without_a_value_is_refused_with_the_variable_to_set():
    messages = secrets.missing_messages(secrets.resolve(["VLLM_API_KEY", "HF_TOKEN"], {"vllm_api_key": "k"}, {}))
    assert len(messages) == 1
    assert messages[0].startswith("HF_TOKEN in the plan's secret_env has no value: set vllm_hf_token")
    assert "export HF_TOKEN" in messages[0]
    assert secrets.missing_messages({"VLLM_API_KEY": "k"}) == []


def test_an_unknown_name_is_an_error():
    with pytest.raises(secrets.SecretsError, match="RAY_AUTH_TOKEN is not a secret"):
        secrets.resolve(["RAY_AUTH_TOKEN"], {}, {})
    with pytest.raises(secrets.SecretsError):
        secrets.env_file_lines({"A": "b"}, "yaml")


def test_names_are_flattened_and_deduplicated():
    assert secrets.flatten_names([["HF_TOKEN", "VLLM_API_KEY"], "HF_TOKEN", None]) == ["HF_TOKEN", "VLLM_API_KEY"]


def test_every_printable_value_round_trips_through_bash_source(tmp_path):
    env_file = tmp_path / "secret.env"
    values = {"K%d" % i: value for i, value in enumerate(NASTY)}
    env_file.write_text("\n".join(secrets.env_file_lines(values, "shell")) + "\n")
    script = "set -euo pipefail; set -a; . %s; set +a; for n in %s; do printf '%%s\\0' \"${!n}\"; done" % (
        env_file, " ".join(sorted(values)))
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True, env={"PATH": "/usr/bin:/bin"}).stdout
    assert out.decode().split("\0")[:-1] == [values[name] for name in sorted(values)]


def test_compose_quoting_doubles_dollars_and_escapes_backslash_and_quote():
    assert secrets.compose_value("k$y 'q\"\\ #x") == "\"k$$y 'q\\\"\\\\ #x\""
    assert secrets.shell_value("k$y 'q\"\\ #x`") == "\"k\\$y 'q\\\"\\\\ #x\\`\""
