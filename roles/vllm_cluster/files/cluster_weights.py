# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Copy the served checkpoints' Hugging Face cache from the cluster head to a worker, verified.

  cluster_weights.py manifest ROOT REPO_DIR...   # on the head: JSON manifest on stdout
  cluster_weights.py check    ROOT MANIFEST      # on a worker: {"match": ...} on stdout
  cluster_weights.py pull     ROOT MANIFEST URL_FILE  # on a worker: fetch what differs from the URL in URL_FILE

ROOT is <HF_HOME>/hub, each REPO_DIR a directory in it such as
models--org--name: the model's, and the drafter's when the plan runs one. The
manifest lists, per repository, every regular file (size, sha256) and every
symlink (the cache's snapshots/ point into blobs/). A worker keeps the manifest
it verified in each repository; a later check re-hashes only files whose size
or mtime moved. Standard library only: it runs with the system python3.

The head serves its files under a random path (a capability URL: other machines on the link can neither list
nor guess it); the URL reaches the pull in a 0600 file, never on a command line or in an environment prefix.
"""
import hashlib
import json
import os
import shutil
import sys
import urllib.parse
import urllib.request

CHUNK = 1 << 22
STAMP = ".sparkfleet-verified.json"


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest(root, repo_dir):
    base = os.path.join(root, repo_dir)
    cache_file = os.path.join(base, STAMP)
    try:
        with open(cache_file) as handle:
            cached = {entry["path"]: entry for entry in json.load(handle)["files"]}
    except (OSError, ValueError, KeyError):
        cached = {}
    files, links = [], []
    for folder, dirs, names in os.walk(base):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(folder, name)
            rel = os.path.relpath(full, root)
            if name == STAMP or name.endswith(".incomplete") or "/.locks/" in full:
                continue
            if os.path.islink(full):
                links.append({"path": rel, "target": os.readlink(full)})
                continue
            stat = os.stat(full)
            old = cached.get(rel)
            if old and old["size"] == stat.st_size and old.get("mtime") == int(stat.st_mtime):
                files.append(old)
            else:
                files.append({"path": rel, "size": stat.st_size, "mtime": int(stat.st_mtime), "sha256": sha256(full)})
    result = {"repo_dir": repo_dir, "files": files, "links": links, "bytes": sum(f["size"] for f in files)}
    with open(cache_file, "w") as handle:
        json.dump(result, handle)
    return result


def manifests(root, repo_dirs):
    """The manifest of several repositories (the model's and the drafter's), in the order given."""
    repos = [manifest(root, repo_dir) for repo_dir in repo_dirs]
    return {"repos": repos, "bytes": sum(repo["bytes"] for repo in repos)}


def repositories(wanted):
    """The per-repository manifests of ``wanted``; a one-repository manifest (older heads) is its own list."""
    return wanted.get("repos", [wanted])


def differing(root, wanted):
    """Entries of the manifest that the local cache does not hold verified."""
    stamp = os.path.join(root, wanted["repo_dir"], STAMP)
    try:
        with open(stamp) as handle:
            verified = {entry["path"]: entry for entry in json.load(handle)["files"]}
    except (OSError, ValueError, KeyError):
        verified = {}
    need = []
    for entry in wanted["files"]:
        full = os.path.join(root, entry["path"])
        if not os.path.isfile(full) or os.path.getsize(full) != entry["size"]:
            need.append(entry)
            continue
        mine = verified.get(entry["path"])
        if mine and mine["sha256"] == entry["sha256"] and mine.get("local_mtime") == int(os.stat(full).st_mtime):
            continue
        if sha256(full) != entry["sha256"]:
            need.append(entry)
    bad_links = [link for link in wanted["links"]
                 if not os.path.islink(os.path.join(root, link["path"])) or os.readlink(os.path.join(root, link["path"])) != link["target"]]
    return need, bad_links


def record(root, wanted):
    files = []
    for entry in wanted["files"]:
        local = dict(entry)
        local["local_mtime"] = int(os.stat(os.path.join(root, entry["path"])).st_mtime)
        files.append(local)
    with open(os.path.join(root, wanted["repo_dir"], STAMP), "w") as handle:
        json.dump({"repo_dir": wanted["repo_dir"], "files": files, "links": wanted["links"]}, handle)


def differing_all(root, wanted):
    """Files and links of every repository in ``wanted`` that the local cache does not hold verified."""
    need, bad_links = [], []
    for repo in repositories(wanted):
        files, links = differing(root, repo)
        need += files
        bad_links += links
    return need, bad_links


def pull(root, wanted, url):
    need, bad_links = differing_all(root, wanted)
    fetched = 0
    for entry in need:
        full = os.path.join(root, entry["path"])
        os.makedirs(os.path.dirname(full), exist_ok=True)
        part = full + ".part"
        with urllib.request.urlopen(url.rstrip("/") + "/" + urllib.parse.quote(entry["path"]), timeout=60) as src, open(part, "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
        size, digest = os.path.getsize(part), sha256(part)
        if size != entry["size"] or digest != entry["sha256"]:
            os.unlink(part)
            raise SystemExit("%s: got %d bytes sha256 %s, the head has %d bytes sha256 %s" % (
                entry["path"], size, digest, entry["size"], entry["sha256"]))
        os.replace(part, full)
        fetched += size
        print("fetched %s (%d bytes, sha256 ok)" % (entry["path"], size), file=sys.stderr, flush=True)
    for link in bad_links:
        full = os.path.join(root, link["path"])
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.lexists(full):
            os.unlink(full)
        os.symlink(link["target"], full)
    repos = repositories(wanted)
    for repo in repos:
        record(root, repo)
    return {"changed": bool(need or bad_links), "files_fetched": len(need), "bytes_fetched": fetched,
            "links_fixed": len(bad_links), "files": sum(len(repo["files"]) for repo in repos),
            "bytes": sum(repo["bytes"] for repo in repos), "repos": [repo["repo_dir"] for repo in repos]}


def main(argv):
    command, root = argv[1], argv[2]
    if command == "manifest":
        print(json.dumps(manifests(root, argv[3:])))
        return 0
    with open(argv[3]) as handle:
        wanted = json.load(handle)
    if command == "check":
        need, bad_links = differing_all(root, wanted)
        print(json.dumps({"match": not (need or bad_links), "files_differing": [e["path"] for e in need],
                          "links_differing": [link["path"] for link in bad_links]}))
        return 0
    if command == "pull":
        with open(argv[4]) as handle:
            url = handle.read().strip()
        print(json.dumps(pull(root, wanted, url)))
        return 0
    raise SystemExit("unknown command %s" % command)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
