"""The cluster's weight copy (roles/vllm_cluster/files/cluster_weights.py) over the share the head serves.

The head's temporary weight server serves only a share laid out as roles/vllm_cluster/tasks/weights.yml lays it
out: an empty index.html and one directory named by a random token that links to the model's repository in the
cache. Here the same layout is served by the same server (Python's http.server, as `python3 -m http.server
--directory` runs it) on loopback, and a worker's cache is filled by `cluster_weights.py pull` with the URL in a
0600 file. The share carries the model's repository and, when the plan runs one, the drafter's: one manifest
lists both, one pull fetches both.
"""
import functools
import http.server
import importlib.util
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

from conftest import REPO

SCRIPT = REPO / "roles/vllm_cluster/files/cluster_weights.py"
REPO_DIR = "models--sparkfleet--tiny-random-llama"
DRAFTER_DIR = "models--sparkfleet--tiny-drafter"


def cache(root, blob=b"weights" * 1000, repo_dir=REPO_DIR):
    """A hub cache holding one repository laid out as huggingface_hub lays it out."""
    repo = root / repo_dir
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "blobs" / "f00d").write_bytes(blob)
    (repo / "refs" / "main").write_text("abc123")
    os.symlink("../../blobs/f00d", repo / "snapshots" / "abc123" / "model.safetensors")
    return repo


@pytest.fixture()
def share(tmp_path, request):
    """The head: a cache, its manifest, and the share served on a loopback port (the model's repository, and the
    drafter's when the test is parametrized with ``with_drafter``)."""
    head = tmp_path / "head"
    cache(head)
    repo_dirs = [REPO_DIR]
    if getattr(request, "param", None) == "with_drafter":
        cache(head, b"drafter" * 300, DRAFTER_DIR)
        repo_dirs.append(DRAFTER_DIR)
    manifest = json.loads(subprocess.run([sys.executable, str(SCRIPT), "manifest", str(head)] + repo_dirs,
                                         capture_output=True, text=True, check=True).stdout)
    token = "k3y" + os.urandom(12).hex()
    served = tmp_path / "share"
    (served / token).mkdir(parents=True)
    (served / "index.html").touch()
    for repo_dir in repo_dirs:
        os.symlink(head / repo_dir, served / token / repo_dir)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d/" % server.server_address[1]
    yield {"manifest": manifest, "base": base, "token": token, "tmp": tmp_path, "head": head}
    server.shutdown()


def pull(share, url):
    worker = share["tmp"] / "worker"
    worker.mkdir(exist_ok=True)
    manifest_file = share["tmp"] / "manifest.json"
    manifest_file.write_text(json.dumps(share["manifest"]))
    url_file = share["tmp"] / "weights-source.url"
    url_file.write_text(url + "\n")
    url_file.chmod(0o600)
    proc = subprocess.run([sys.executable, str(SCRIPT), "pull", str(worker), str(manifest_file), str(url_file)],
                          capture_output=True, text=True, check=False)
    return worker, proc


def test_a_worker_pulls_the_model_through_the_capability_url(share):
    worker, proc = pull(share, share["base"] + share["token"] + "/")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["changed"] and result["files_fetched"] == len(share["manifest"]["repos"][0]["files"]) and result["links_fixed"] == 1
    assert (worker / REPO_DIR / "snapshots/abc123/model.safetensors").read_bytes() == b"weights" * 1000
    # The URL was never on the command line: the pull read it from the file.
    assert share["token"] not in " ".join(proc.args)
    again, proc = pull(share, share["base"] + share["token"] + "/")
    assert proc.returncode == 0 and not json.loads(proc.stdout)["changed"], proc.stdout


def test_the_share_shows_nothing_without_the_token(share):
    with urllib.request.urlopen(share["base"], timeout=5) as answer:  # noqa: S310 - the test's own server
        listing = answer.read()
    assert listing == b"", "the share's root lists its contents: %r" % listing[:200]
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(share["base"] + REPO_DIR + "/refs/main", timeout=5)  # noqa: S310
    assert missing.value.code == 404
    _worker, proc = pull(share, share["base"])
    assert proc.returncode != 0 and "404" in proc.stderr, proc.stderr[-2000:]


def test_a_file_that_differs_from_the_manifest_is_refused(share, tmp_path):
    wrong = json.loads(json.dumps(share["manifest"]))
    blob = next(entry for entry in wrong["repos"][0]["files"] if entry["path"].endswith("blobs/f00d"))
    blob["sha256"] = "0" * 64
    spec = importlib.util.spec_from_file_location("cluster_weights", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as refused:
        module.pull(str(tmp_path / "elsewhere"), wrong, share["base"] + share["token"] + "/")
    assert "the head has" in str(refused.value) and blob["path"] in str(refused.value)


def check(share, worker):
    manifest_file = share["tmp"] / "manifest.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "check", str(worker), str(manifest_file)],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


@pytest.mark.parametrize("share", ["with_drafter"], indirect=True)
def test_one_pull_brings_the_model_and_the_drafter(share):
    assert [repo["repo_dir"] for repo in share["manifest"]["repos"]] == [REPO_DIR, DRAFTER_DIR]
    worker, proc = pull(share, share["base"] + share["token"] + "/")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["repos"] == [REPO_DIR, DRAFTER_DIR] and result["links_fixed"] == 2, result
    assert result["files_fetched"] == sum(len(repo["files"]) for repo in share["manifest"]["repos"])
    assert (worker / DRAFTER_DIR / "snapshots/abc123/model.safetensors").read_bytes() == b"drafter" * 300
    assert check(share, worker)["match"]
    # A drafter file that changed on the worker is found by the check and fetched again by the next pull.
    (worker / DRAFTER_DIR / "blobs/f00d").write_bytes(b"stale" * 10)
    found = check(share, worker)
    assert not found["match"] and found["files_differing"] == [DRAFTER_DIR + "/blobs/f00d"], found
    _again, proc = pull(share, share["base"] + share["token"] + "/")
    result = json.loads(proc.stdout)
    assert proc.returncode == 0 and result["files_fetched"] == 1, proc.stdout + proc.stderr
    assert (worker / DRAFTER_DIR / "blobs/f00d").read_bytes() == b"drafter" * 300


def test_a_one_repository_manifest_from_an_older_head_still_pulls(share):
    share["manifest"] = share["manifest"]["repos"][0]
    worker, proc = pull(share, share["base"] + share["token"] + "/")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["repos"] == [REPO_DIR]
    assert (worker / REPO_DIR / "snapshots/abc123/model.safetensors").read_bytes() == b"weights" * 1000
