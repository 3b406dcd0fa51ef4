# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Copy the served checkpoints' Hugging Face cache from the cluster head to a worker, verified.

  cluster_weights.py manifest ROOT REPO_DIR...   # on the head: JSON manifest on stdout
  cluster_weights.py check    ROOT MANIFEST      # on a worker: {"match": ...} on stdout
  cluster_weights.py pull     ROOT MANIFEST URL_FILE  # on a worker: fetch what differs from the URL in URL_FILE
  cluster_weights.py serve    ROOT MANIFEST TOKEN_FILE BIND PORT PEER...  # on the head, while the workers pull

ROOT is <HF_HOME>/hub, each REPO_DIR a directory in it such as
models--org--name: the model's, and the drafter's when the plan runs one. The
manifest lists, per repository, every regular file (size, sha256) and every
symlink (the cache's snapshots/ point into blobs/). A worker keeps the manifest
it verified in each repository; a later check re-hashes only files whose size
or mtime moved. Standard library only: it runs with the system python3.

The head serves its files under a random path (a capability URL: other machines on the link can neither list
nor guess it); the URL reaches the pull in a 0600 file, never on a command line or in an environment prefix.
`serve` reads that path from TOKEN_FILE (0600) and answers only GET and HEAD of /<token>/<path> for a path its
manifest lists (nothing else in the cache, no listing), only to the PEER addresses (the workers' link
addresses): any other client's connection is closed unanswered. It honours a `Range: bytes=N-` request, so a pull
that was interrupted resumes each file from the part it already has (FILE.part) instead of starting it again.
"""
import hashlib
import http.server
import json
import os
import re
import shutil
import sys
import time
import urllib.error
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


def opened(request, attempts=20):
    """urlopen, waiting up to ``attempts`` seconds for a server that is still starting (connection refused)."""
    for _attempt in range(attempts - 1):
        try:
            return urllib.request.urlopen(request, timeout=60)  # noqa: S310 - the head's http URL, from a 0600 file
        except urllib.error.URLError as error:
            if not isinstance(error.reason, ConnectionRefusedError):
                raise
        time.sleep(1)
    # The last attempt: whatever it raises, a refused connection included, is the caller's.
    return urllib.request.urlopen(request, timeout=60)  # noqa: S310 - the head's http URL, from a 0600 file


def fetch(url, entry, part):
    """Download ``entry`` into ``part``, resuming from the bytes a previous, interrupted pull left there.

    Returns the number of bytes that were already there and kept (0 when the download started over)."""
    have = os.path.getsize(part) if os.path.isfile(part) else 0
    if have >= entry["size"]:
        have = 0  # nothing to resume: a complete (or longer) part is fetched again and checked below
    request = urllib.request.Request(url)
    if have:
        request.add_header("Range", "bytes=%d-" % have)
    with opened(request) as src:
        resumed = have if src.status == 206 and src.headers.get("Content-Range", "").startswith("bytes %d-" % have) else 0
        with open(part, "ab" if resumed else "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
    return resumed


def pull(root, wanted, url):
    need, bad_links = differing_all(root, wanted)
    fetched = resumed_bytes = 0
    for entry in need:
        full = os.path.join(root, entry["path"])
        os.makedirs(os.path.dirname(full), exist_ok=True)
        part = full + ".part"
        kept = fetch(url.rstrip("/") + "/" + urllib.parse.quote(entry["path"]), entry, part)
        size, digest = os.path.getsize(part), sha256(part)
        if size != entry["size"] or digest != entry["sha256"]:
            os.unlink(part)
            raise SystemExit("%s: got %d bytes sha256 %s, the head has %d bytes sha256 %s" % (
                entry["path"], size, digest, entry["size"], entry["sha256"]))
        os.replace(part, full)
        fetched += size - kept
        resumed_bytes += kept
        print("fetched %s (%d bytes%s, sha256 ok)" % (entry["path"], size, ", resumed at %d" % kept if kept else ""),
              file=sys.stderr, flush=True)
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
            "bytes_resumed": resumed_bytes, "links_fixed": len(bad_links),
            "files": sum(len(repo["files"]) for repo in repos),
            "bytes": sum(repo["bytes"] for repo in repos), "repos": [repo["repo_dir"] for repo in repos]}


RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class ShareHandler(http.server.BaseHTTPRequestHandler):
    """GET and HEAD of /<token>/<path> for the manifest's files only; one byte range at most."""

    server_version = "sparkfleet-weights"
    sys_version = ""

    def do_HEAD(self):  # noqa: N802 - http.server's naming
        self.answer(body=False)

    def do_GET(self):  # noqa: N802 - http.server's naming
        self.answer(body=True)

    def answer(self, body):
        prefix = "/%s/" % self.server.token
        path = urllib.parse.unquote(self.path.split("?", 1)[0])
        entry = self.server.files.get(path[len(prefix):]) if path.startswith(prefix) else None
        if entry is None:
            self.send_error(404)
            return
        full, size = os.path.join(self.server.root, entry["path"]), entry["size"]
        start, end = 0, size - 1
        ranged = RANGE.match(self.headers.get("Range", ""))
        if ranged:
            start = int(ranged.group(1))
            end = min(int(ranged.group(2)), size - 1) if ranged.group(2) else size - 1
            if start > end:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        self.send_response(206 if ranged else 200)
        if ranged:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        if not body:
            return
        with open(full, "rb") as handle:
            handle.seek(start)
            left = end - start + 1
            while left:
                block = handle.read(min(CHUNK, left))
                if not block:
                    break
                self.wfile.write(block)
                left -= len(block)


class ShareServer(http.server.ThreadingHTTPServer):
    """The head's weight server: the manifest's files, under the token, to the peers only."""

    daemon_threads = True

    def __init__(self, root, wanted, token, address, peers):
        self.root, self.token, self.peers = root, token, frozenset(peers)
        self.files = {entry["path"]: entry for repo in repositories(wanted) for entry in repo["files"]}
        self.refused = []
        super().__init__(address, ShareHandler)

    def verify_request(self, request, client_address):
        if client_address[0] in self.peers:
            return True
        self.refused.append(client_address[0])
        print("refused %s: not a cluster link peer" % client_address[0], file=sys.stderr, flush=True)
        return False


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
    if command == "serve":
        with open(argv[4]) as handle:
            token = handle.read().strip()
        server = ShareServer(root, wanted, token, (argv[5], int(argv[6])), argv[7:])
        print("serving %d files on %s:%s to %s" % (len(server.files), argv[5], argv[6], " ".join(argv[7:])),
              file=sys.stderr, flush=True)
        server.serve_forever()
        return 0
    raise SystemExit("unknown command %s" % command)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
