"""The cluster's weight copy (roles/vllm_cluster/files/cluster_weights.py): the head's server and a worker's pull.

The head's temporary weight server is the script's own `serve` command, started here as
roles/vllm_cluster/tasks/weights.yml starts it under systemd-run: the cache root, the manifest file, the random
token in a 0600 file, the address and port, and the link peers allowed to connect. It serves only the manifest's
files under the token, only to those peers, with byte ranges; a worker's cache is filled by `cluster_weights.py
pull` with the URL in a 0600 file. The share carries the model's repository and, when the plan runs one, the
drafter's: one manifest lists both, one pull fetches both.

Whoever can write the head's cache must reach nothing outside the repository folders: the tests at the end put a
link where a worker writes (a part file, a destination, a directory on the way), a path or a link target that
leaves the folder in the manifest, and a link out of the folder in the head's cache (a file, its stamp), and
check that nothing outside is written, listed or served.
"""
import hashlib
import http.client
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import REPO

SCRIPT = REPO / "roles/vllm_cluster/files/cluster_weights.py"
REPO_DIR = "models--sparkfleet--tiny-random-llama"
DRAFTER_DIR = "models--sparkfleet--tiny-drafter"
OTHER_DIR = "models--someone--private-model"


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


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(tmp_path, head, manifest, token, peers):
    """`cluster_weights.py serve` on a loopback port, as the head's transient unit runs it; (process, base URL)."""
    (tmp_path / "manifest-head.json").write_text(json.dumps(manifest))
    token_file = tmp_path / "weights-share.token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    port = free_port()
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "serve", str(head), str(tmp_path / "manifest-head.json"),
                             str(token_file), "127.0.0.1", str(port)] + peers, stderr=log)
    proc.log = log
    for _attempt in range(100):
        if proc.poll() is not None:
            break  # it refused to start (its reason is in serve.log)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, "http://127.0.0.1:%d/" % port


@pytest.fixture()
def share(tmp_path, request):
    """The head: a cache (with a repository that is not the model's beside it), its manifest, and its server on a
    loopback port (the model's repository, and the drafter's when the test is parametrized with
    ``with_drafter``); 127.0.0.1 is the link peer."""
    head = tmp_path / "head"
    cache(head)
    cache(head, b"not yours" * 100, OTHER_DIR)
    repo_dirs = [REPO_DIR]
    if getattr(request, "param", None) == "with_drafter":
        cache(head, b"drafter" * 300, DRAFTER_DIR)
        repo_dirs.append(DRAFTER_DIR)
    manifest = json.loads(subprocess.run([sys.executable, str(SCRIPT), "manifest", str(head)] + repo_dirs,
                                         capture_output=True, text=True, check=True).stdout)
    token = "k3y" + os.urandom(12).hex()
    proc, base = serve(tmp_path, head, manifest, token, ["127.0.0.1"])
    yield {"manifest": manifest, "base": base, "token": token, "tmp": tmp_path, "head": head, "log": proc.log}
    proc.terminate()
    proc.wait(10)
    proc.log.close()


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
    # The server's access log (the head's journal) names each request with the token written as <token>.
    share["log"].flush()
    logged = (share["tmp"] / "serve.log").read_text()
    assert "GET /<token>/" + REPO_DIR in logged and share["token"] not in logged, logged[-2000:]


def status(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - the test's own server
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_share_shows_only_the_manifests_files_under_the_token(share):
    base, token = share["base"], share["token"]
    blob = base + token + "/" + REPO_DIR + "/blobs/f00d"
    assert status(blob) == 200
    # No listing anywhere, nothing without the token, nothing the manifest does not list (another repository in
    # the same cache, the symlinks the pull recreates itself, a path climbing out of the token).
    for url in (base, base + token + "/", base + token + "/" + REPO_DIR + "/", base + REPO_DIR + "/blobs/f00d",
                base + token + "/" + OTHER_DIR + "/blobs/f00d", base + token + "/" + OTHER_DIR + "/refs/main",
                base + token + "/" + REPO_DIR + "/snapshots/abc123/model.safetensors",
                base + token + "/" + REPO_DIR + "/../" + OTHER_DIR + "/blobs/f00d"):
        assert status(url) == 404, url
    _worker, proc = pull(share, share["base"])
    assert proc.returncode != 0 and "404" in proc.stderr, proc.stderr[-2000:]


def test_a_client_that_is_not_a_link_peer_gets_no_answer(share, tmp_path):
    """A server whose only peer is 127.0.0.2 closes 127.0.0.1's connection without a byte, and logs it."""
    other = tmp_path / "other"
    other.mkdir()
    proc, base = serve(other, share["head"], share["manifest"], share["token"], ["127.0.0.2"])
    try:
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            urllib.request.urlopen(base + share["token"] + "/" + REPO_DIR + "/blobs/f00d", timeout=5)  # noqa: S310
    finally:
        proc.terminate()
        proc.wait(10)
        proc.log.close()
    assert "refused 127.0.0.1: not a cluster link peer" in (other / "serve.log").read_text()


def test_an_interrupted_pull_resumes_from_its_part(share):
    """A pull killed mid-file leaves FILE.part; the next one asks for the rest only (Range) and checks the whole."""
    url = share["base"] + share["token"] + "/"
    blob = b"weights" * 1000
    worker = share["tmp"] / "worker"
    (worker / REPO_DIR / "blobs").mkdir(parents=True)
    (worker / REPO_DIR / "blobs" / "f00d.part").write_bytes(blob[:3000])
    _worker, proc = pull(share, url)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["bytes_resumed"] == 3000, result
    assert "resumed at 3000" in proc.stderr, proc.stderr
    assert (worker / REPO_DIR / "blobs" / "f00d").read_bytes() == blob
    assert not (worker / REPO_DIR / "blobs" / "f00d.part").exists()
    # A part that does not match the head's file is caught by the checksum, thrown away, and fetched whole next.
    (worker / REPO_DIR / "blobs" / "f00d").unlink()
    (worker / REPO_DIR / "blobs" / "f00d.part").write_bytes(b"x" * 3000)
    _worker, proc = pull(share, url)
    assert proc.returncode != 0 and "the head has" in proc.stderr, proc.stderr[-2000:]
    assert not (worker / REPO_DIR / "blobs" / "f00d.part").exists()
    _worker, proc = pull(share, url)
    assert proc.returncode == 0 and json.loads(proc.stdout)["bytes_resumed"] == 0, proc.stdout + proc.stderr
    assert (worker / REPO_DIR / "blobs" / "f00d").read_bytes() == blob


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


def script():
    spec = importlib.util.spec_from_file_location("cluster_weights", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_part_file_that_is_a_link_is_replaced_not_written_through(share):
    """A FILE.part that is a symlink to a file outside is removed and the file fetched whole: the victim is not
    appended to (the part's size was read through the link, and the resume wrote through it, as root)."""
    victim = share["tmp"] / "victim.conf"
    victim.write_bytes(b"victim's own content\n")
    blobs = share["tmp"] / "worker" / REPO_DIR / "blobs"
    blobs.mkdir(parents=True)
    os.symlink(victim, blobs / "f00d.part")
    _worker, proc = pull(share, share["base"] + share["token"] + "/")
    assert victim.read_bytes() == b"victim's own content\n"
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["bytes_resumed"] == 0
    assert not (blobs / "f00d").is_symlink() and (blobs / "f00d").read_bytes() == b"weights" * 1000
    assert not os.path.lexists(blobs / "f00d.part")


@pytest.mark.parametrize("linked", ["destination", "directory"])
def test_a_destination_or_directory_that_is_a_link_is_replaced(share, linked):
    """A file that is a link out of the repository (even to the right bytes), or a directory on the way that is
    one, is replaced by a plain file or directory; nothing is written where the link pointed."""
    blob = b"weights" * 1000
    outside = share["tmp"] / "outside"
    outside.mkdir()
    repo = share["tmp"] / "worker" / REPO_DIR
    repo.mkdir(parents=True)
    if linked == "destination":
        (outside / "f00d").write_bytes(blob)
        (repo / "blobs").mkdir()
        os.symlink(outside / "f00d", repo / "blobs" / "f00d")
    else:
        os.symlink(outside, repo / "blobs")
    _worker, proc = pull(share, share["base"] + share["token"] + "/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not (repo / "blobs").is_symlink() and not (repo / "blobs" / "f00d").is_symlink()
    assert (repo / "blobs" / "f00d").read_bytes() == blob
    assert sorted(os.listdir(outside)) == (["f00d"] if linked == "destination" else [])
    assert check(share, share["tmp"] / "worker")["match"]


def test_a_manifest_path_climbing_out_of_the_repository_is_refused(share, tmp_path):
    """A manifest file entry with ``..`` is refused, naming it, before anything is fetched or written.

    The head's server here was started with that manifest, as a head whose cache lists it would be: the old
    pull fetched it and wrote it two levels above the worker's hub root."""
    evil = REPO_DIR + "/../../escaped/evil"
    payload = b"#!/bin/sh\necho owned\n"
    (tmp_path / "escaped").mkdir()
    (tmp_path / "escaped" / "evil").write_bytes(payload)  # what the head's side of that path reads
    bad = json.loads(json.dumps(share["manifest"]))
    bad["repos"][0]["files"].append({"path": evil, "size": len(payload), "mtime": 0,
                                     "sha256": hashlib.sha256(payload).hexdigest()})
    served = tmp_path / "served"
    served.mkdir()
    proc, base = serve(served, share["head"], bad, share["token"], ["127.0.0.1"])
    worker = tmp_path / "deep" / "worker"
    try:
        with pytest.raises(SystemExit) as refused:
            script().pull(str(worker), bad, base + share["token"] + "/")
    finally:
        proc.terminate()
        proc.wait(10)
        proc.log.close()
    assert evil in str(refused.value) and "'..'" in str(refused.value), refused.value
    assert not (tmp_path / "deep" / "escaped").exists()
    assert not os.path.lexists(worker / REPO_DIR)


def test_an_absolute_manifest_path_is_refused(share, tmp_path):
    target = tmp_path / "etc" / "cron.d" / "evil"
    bad = json.loads(json.dumps(share["manifest"]))
    bad["repos"][0]["files"].append({"path": str(target), "size": 5, "mtime": 0,
                                     "sha256": hashlib.sha256(b"owned").hexdigest()})
    worker, proc = pull(dict(share, manifest=bad), share["base"] + share["token"] + "/")
    assert proc.returncode != 0 and str(target) in proc.stderr and "absolute" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "etc").exists()
    assert not os.path.lexists(worker / REPO_DIR)


@pytest.mark.parametrize("target", ["../../../../outside/secret", "/etc/shadow"])
def test_a_link_whose_target_leaves_the_repository_is_refused(share, target):
    """The snapshots' links point into ../../blobs/, inside the folder; one pointing out of it is refused, naming
    it, and no link is made."""
    bad = json.loads(json.dumps(share["manifest"]))
    bad["repos"][0]["links"].append({"path": REPO_DIR + "/snapshots/abc123/config.json", "target": target})
    worker, proc = pull(dict(share, manifest=bad), share["base"] + share["token"] + "/")
    assert proc.returncode != 0, proc.stdout
    assert REPO_DIR + "/snapshots/abc123/config.json" in proc.stderr and repr(target) in proc.stderr, proc.stderr[-2000:]
    assert not os.path.lexists(worker / REPO_DIR / "snapshots/abc123/config.json")


def test_the_head_refuses_to_list_a_link_out_of_the_repository(tmp_path):
    """A link in the head's cache that points out of the repository folder stops the manifest, naming it."""
    head = tmp_path / "head"
    repo = cache(head)
    os.symlink("../../../../secret", repo / "snapshots" / "abc123" / "tokenizer.json")
    proc = subprocess.run([sys.executable, str(SCRIPT), "manifest", str(head), REPO_DIR],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and not proc.stdout, proc.stdout
    assert REPO_DIR + "/snapshots/abc123/tokenizer.json" in proc.stderr and "leaves the repository" in proc.stderr


def test_the_head_replaces_a_linked_stamp_instead_of_writing_through_it(tmp_path):
    """The head keeps its hashes in the repository's .sparkfleet-verified.json; a link standing there is replaced
    by the new file, and the file it pointed to (here a stand-in for one of root's) keeps its bytes."""
    head = tmp_path / "head"
    repo = cache(head)
    victim = tmp_path / "victim.conf"
    victim.write_bytes(b"root's own configuration\n")
    os.symlink(victim, repo / ".sparkfleet-verified.json")
    proc = subprocess.run([sys.executable, str(SCRIPT), "manifest", str(head), REPO_DIR],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert victim.read_bytes() == b"root's own configuration\n"
    assert not (repo / ".sparkfleet-verified.json").is_symlink()
    assert json.loads((repo / ".sparkfleet-verified.json").read_text())["repo_dir"] == REPO_DIR


def test_the_server_does_not_serve_a_listed_file_swapped_for_a_link(share):
    """A listed file replaced, after the manifest, by a link to a file outside answers 404, not that file."""
    secret = share["tmp"] / "secret"
    secret.write_bytes(b"s" * 7000)  # the listed blob's size: the old server sent it whole
    blob = share["head"] / REPO_DIR / "blobs" / "f00d"
    blob.unlink()
    os.symlink(secret, blob)
    url = share["base"] + share["token"] + "/" + REPO_DIR + "/blobs/f00d"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - the test's own server
            answered, body = answer.status, answer.read()
    except urllib.error.HTTPError as error:
        answered, body = error.code, b""
    assert answered == 404 and b"sss" not in body, answered


def test_the_server_refuses_a_manifest_path_outside_the_repository(share, tmp_path):
    """A server given a manifest that lists a path climbing out of the repository does not start, and says why."""
    (tmp_path / "secret").write_bytes(b"head's secret")
    bad = json.loads(json.dumps(share["manifest"]))
    outside = REPO_DIR + "/../../secret"
    bad["repos"][0]["files"].append({"path": outside, "size": 13, "mtime": 0,
                                     "sha256": hashlib.sha256(b"head's secret").hexdigest()})
    served = tmp_path / "served"
    served.mkdir()
    proc, base = serve(served, share["head"], bad, share["token"], ["127.0.0.1"])
    try:
        answered = status(base + share["token"] + "/" + outside) if proc.poll() is None else None
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(10)
        proc.log.close()
    assert answered is None and proc.returncode != 0, answered
    assert outside in (served / "serve.log").read_text()
