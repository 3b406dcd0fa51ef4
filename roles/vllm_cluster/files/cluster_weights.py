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

Whoever can write the head's cache must reach nothing else, on the head or on a worker (both run it as root).
Every manifest path is confined to its repository folder: an absolute path, an empty, `.` or `..` component, a
path in another folder, or a symlink whose target leaves the folder is refused with the path named, by the head
as it lists and serves and by a worker as it checks and pulls. Nothing below a repository folder is reached
through a link: each path is walked one directory at a time from the folder's descriptor with O_NOFOLLOW, so a
link swapped in between a check and the open fails the open instead of redirecting it. The head neither hashes
nor serves a file through a link. On a worker, a part file, a destination or a directory on the way that is a
link (or not a plain file, or not a directory) is removed, the link itself, and made anew; a new file is
created with O_EXCL, which never opens what stands there.
"""
import contextlib
import hashlib
import http.server
import json
import os
import re
import shutil
import stat
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

CHUNK = 1 << 22
STAMP = ".sparkfleet-verified.json"


DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO that stands where a file should be returns at once (and is refused by its fstat).
READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def refused(path, why):
    return SystemExit("refused %r: %s" % (path, why))


def names_below(repo_dir, path):
    """The names ``path`` (a manifest path, relative to the hub root) walks through below its repository folder.

    Refuses, naming it, a path that could leave the folder: absolute, in another folder, or with an empty, ``.``
    or ``..`` component (a lexical check, sound because nothing below the folder is walked through a link)."""
    if not isinstance(path, str) or path.startswith("/"):
        raise refused(path, "an absolute path, outside the repository folder %s" % repo_dir)
    parts = path.split("/")
    if parts[0] != repo_dir or len(parts) < 2:
        raise refused(path, "not inside the repository folder %s" % repo_dir)
    if any(part in ("", ".", "..") or "\0" in part for part in parts[1:]):
        raise refused(path, "an empty, '.' or '..' component: it could leave the repository folder %s" % repo_dir)
    return parts[1:]


def check_target(repo_dir, path, target):
    """Refuses the target of the symlink ``path`` unless it stays inside the repository folder.

    A target may climb with leading ``../`` only (as huggingface_hub writes them: ../../blobs/HASH), no higher
    than the folder, then name a path below it. A ``..`` after a name is refused even where it would land inside:
    through a linked directory it climbs from where the link points, not from where it stands."""
    names = names_below(repo_dir, path)
    if not isinstance(target, str) or target.startswith("/"):
        raise refused(path, "its link target %r is absolute, outside the repository folder %s" % (target, repo_dir))
    parts = target.split("/")
    climb = 0
    while climb < len(parts) and parts[climb] == "..":
        climb += 1
    rest = parts[climb:]
    if climb > len(names) - 1 or not rest or any(part in ("", ".", "..") or "\0" in part for part in rest):
        raise refused(path, "its link target %r leaves the repository folder %s" % (target, repo_dir))


def checked(repo):
    """``repo`` (one repository's manifest), every path and link target confined to its folder, or SystemExit."""
    repo_dir = repo.get("repo_dir")
    if not isinstance(repo_dir, str) or repo_dir in ("", ".", "..") or "/" in repo_dir or "\0" in repo_dir:
        raise refused(repo_dir, "not a repository folder's name")
    for entry in repo["files"]:
        names_below(repo_dir, entry["path"])
    for link in repo["links"]:
        check_target(repo_dir, link["path"], link["target"])
    return repo


def repo_fd(root, repo_dir, make=False):
    """A descriptor of the repository folder ROOT/REPO_DIR, which must be a directory, not a link to one.

    ROOT is the operator's (it may be a link); REPO_DIR is made when ``make`` and missing (FileNotFoundError
    otherwise), and refused (SystemExit) when it is a link or a file."""
    if make:
        os.makedirs(root, exist_ok=True)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if make:
            with contextlib.suppress(FileExistsError):
                os.mkdir(repo_dir, dir_fd=root_fd)
        try:
            return os.open(repo_dir, DIRECTORY, dir_fd=root_fd)
        except FileNotFoundError:
            raise
        except OSError as error:
            raise refused(os.path.join(root, repo_dir), "not a directory (a link is not followed): %s" % error) from None
    finally:
        os.close(root_fd)


def remove(dir_fd, name):
    """Removes the file or link at ``name`` in ``dir_fd`` (a link itself, never what it points to), if any."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


def parent_fd(root, repo_dir, names, make=False):
    """A descriptor of the directory holding ``names[-1]`` below the repository folder, reached without a link.

    Each directory is opened from its parent's descriptor with O_NOFOLLOW, so a link put on the way at any moment
    fails the open instead of redirecting it. Without ``make``, OSError when one is missing or not a plain
    directory. With ``make`` (a worker about to write), a missing one is made, and a link or a file standing
    there is removed (the link itself, never what it points to) and the directory made."""
    fd = repo_fd(root, repo_dir, make)
    try:
        for name in names[:-1]:
            inner = None
            for _attempt in range(3):
                try:
                    inner = os.open(name, DIRECTORY, dir_fd=fd)
                    break
                except FileNotFoundError:
                    if not make:
                        raise
                except OSError:  # ELOOP (a link) or ENOTDIR (a file)
                    if not make:
                        raise
                    remove(fd, name)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)
            if inner is None:
                raise refused(name, "not made a directory in %s: something keeps replacing it" % repo_dir)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(root, repo_dir, path):
    """The regular file at manifest ``path``, opened for reading without following a link (OSError otherwise)."""
    names = names_below(repo_dir, path)
    dir_fd = parent_fd(root, repo_dir, names)
    try:
        fd = os.open(names[-1], READ, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError("%s: not a regular file" % path)
    return os.fdopen(fd, "rb")


def read_below(root, repo_dir, path, read):
    """``read(name, dir_fd)`` on the last name of manifest ``path`` in its directory, reached without a link; None
    when it, or a directory on the way, is missing or not plain, or ``read`` raises OSError."""
    names = names_below(repo_dir, path)
    try:
        dir_fd = parent_fd(root, repo_dir, names)
    except OSError:
        return None
    try:
        return read(names[-1], dir_fd)
    except OSError:
        return None
    finally:
        os.close(dir_fd)


def lstat_of(root, repo_dir, path):
    """The lstat of manifest ``path``, or None when it or a directory on the way is missing or not plain."""
    return read_below(root, repo_dir, path, lambda name, dir_fd: os.stat(name, dir_fd=dir_fd, follow_symlinks=False))


def digest_of(handle):
    digest = hashlib.sha256()
    handle.seek(0)
    for block in iter(lambda: handle.read(CHUNK), b""):
        digest.update(block)
    return digest.hexdigest()


def sha256(root, repo_dir, path):
    with open_file(root, repo_dir, path) as handle:
        return digest_of(handle)


def read_stamp(root, repo_dir):
    """The files of the repository's STAMP by path ({} when missing, unreadable or a link)."""
    try:
        with open_file(root, repo_dir, repo_dir + "/" + STAMP) as handle:
            return {entry["path"]: entry for entry in json.load(handle)["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def write_stamp(root, repo_dir, content):
    """Writes the repository's STAMP through a new file (O_EXCL) renamed over it: a link there is replaced."""
    fd = repo_fd(root, repo_dir)
    try:
        temporary = "%s.%d.tmp" % (STAMP, os.getpid())
        remove(fd, temporary)
        with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                               dir_fd=fd), "w") as handle:
            json.dump(content, handle)
        os.replace(temporary, STAMP, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)


def manifest(root, repo_dir):
    """The manifest of one repository folder, as the head lists it: regular files (size, sha256) and symlinks.

    Nothing is followed: a linked directory is listed as a link, not walked; a file is hashed through a
    descriptor opened with O_NOFOLLOW. A link whose target leaves the folder, or anything else that is neither a
    regular file nor a link, is refused with its path, before any worker copies it."""
    checked({"repo_dir": repo_dir, "files": [], "links": []})
    os.close(repo_fd(root, repo_dir))  # refuses a repository folder that is a link before the walk goes through it
    base = os.path.join(root, repo_dir)
    cached = read_stamp(root, repo_dir)
    files, links = [], []
    for folder, dirs, names in os.walk(base):
        dirs.sort()
        linked_dirs = [name for name in dirs if os.path.islink(os.path.join(folder, name))]
        dirs[:] = [name for name in dirs if name not in linked_dirs]
        for name in sorted(names + linked_dirs):
            full = os.path.join(folder, name)
            rel = os.path.relpath(full, root)
            if name == STAMP or name.startswith(STAMP + ".") or name.endswith(".incomplete") or "/.locks/" in full:
                continue
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                link = {"path": rel, "target": os.readlink(full)}
                check_target(repo_dir, link["path"], link["target"])
                links.append(link)
                continue
            if not stat.S_ISREG(info.st_mode):
                raise refused(rel, "neither a regular file nor a link")
            try:
                with open_file(root, repo_dir, rel) as handle:
                    info = os.fstat(handle.fileno())
                    old = cached.get(rel)
                    if old and old["size"] == info.st_size and old.get("mtime") == int(info.st_mtime):
                        files.append(old)
                    else:
                        files.append({"path": rel, "size": info.st_size, "mtime": int(info.st_mtime),
                                      "sha256": digest_of(handle)})
            except OSError as error:
                raise refused(rel, "not opened as a regular file, without following a link: %s" % error) from None
    result = {"repo_dir": repo_dir, "files": files, "links": links, "bytes": sum(f["size"] for f in files)}
    write_stamp(root, repo_dir, result)
    return result


def manifests(root, repo_dirs):
    """The manifest of several repositories (the model's and the drafter's), in the order given."""
    repos = [manifest(root, repo_dir) for repo_dir in repo_dirs]
    return {"repos": repos, "bytes": sum(repo["bytes"] for repo in repos)}


def repositories(wanted):
    """The per-repository manifests of ``wanted``, each confined to its folder (see checked); a one-repository
    manifest (older heads) is its own list."""
    return [checked(repo) for repo in wanted.get("repos", [wanted])]


def differing(root, wanted):
    """Entries of the manifest that the local cache does not hold verified.

    A file that is a link, or that lies below a directory that is one, is not held: the pull replaces it."""
    repo_dir = wanted["repo_dir"]
    verified = read_stamp(root, repo_dir)
    need = []
    for entry in wanted["files"]:
        info = lstat_of(root, repo_dir, entry["path"])
        if info is None or not stat.S_ISREG(info.st_mode) or info.st_size != entry["size"]:
            need.append(entry)
            continue
        mine = verified.get(entry["path"])
        if mine and mine["sha256"] == entry["sha256"] and mine.get("local_mtime") == int(info.st_mtime):
            continue
        try:
            if sha256(root, repo_dir, entry["path"]) == entry["sha256"]:
                continue
        except OSError:
            pass
        need.append(entry)
    bad_links = [link for link in wanted["links"] if link_of(root, repo_dir, link["path"]) != link["target"]]
    return need, bad_links


def link_of(root, repo_dir, path):
    """The target of the symlink at manifest ``path``, or None (not a link, or below a directory that is one)."""
    return read_below(root, repo_dir, path, lambda name, dir_fd: os.readlink(name, dir_fd=dir_fd))


def record(root, wanted):
    files = []
    for entry in wanted["files"]:
        local = dict(entry)
        local["local_mtime"] = int(lstat_of(root, wanted["repo_dir"], entry["path"]).st_mtime)
        files.append(local)
    write_stamp(root, wanted["repo_dir"], {"repo_dir": wanted["repo_dir"], "files": files, "links": wanted["links"]})


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


def part_file(dir_fd, part, size):
    """The part file ``part`` in ``dir_fd``, opened for writing, and how many of its bytes a resume may keep.

    Only a regular file with no other hard link, shorter than the whole, is resumed; anything else there (a link,
    which is never followed, a FIFO, a file linked elsewhere, a complete or longer part) is removed and a new
    file created with O_EXCL, which fails rather than open what may have been put there since."""
    try:
        fd = os.open(part, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        fd = None
    if fd is not None:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_size < size:
            return os.fdopen(fd, "r+b"), info.st_size
        os.close(fd)
    remove(dir_fd, part)
    return os.fdopen(os.open(part, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                             dir_fd=dir_fd), "r+b"), 0


def fetch(url, entry, handle, have):
    """Download ``entry`` into the open part file ``handle``, resuming after the ``have`` bytes already there.

    Returns the number of bytes that were kept (0 when the head did not resume and the download started over)."""
    request = urllib.request.Request(url)
    if have:
        request.add_header("Range", "bytes=%d-" % have)
    with opened(request) as src:
        resumed = have if src.status == 206 and src.headers.get("Content-Range", "").startswith("bytes %d-" % have) else 0
        handle.seek(resumed)
        handle.truncate()
        shutil.copyfileobj(src, handle, CHUNK)
    handle.flush()
    return resumed


def pull(root, wanted, url):
    """Fetches what differs, every write confined to its repository folder (see part_file and parent_fd)."""
    need, bad_links = differing_all(root, wanted)
    fetched = resumed_bytes = 0
    for entry in need:
        repo_dir = entry["path"].split("/", 1)[0]
        names = names_below(repo_dir, entry["path"])
        dir_fd = parent_fd(root, repo_dir, names, make=True)
        try:
            part = names[-1] + ".part"
            handle, have = part_file(dir_fd, part, entry["size"])
            with handle:
                kept = fetch(url.rstrip("/") + "/" + urllib.parse.quote(entry["path"]), entry, handle, have)
                size, digest = os.fstat(handle.fileno()).st_size, digest_of(handle)
            if size != entry["size"] or digest != entry["sha256"]:
                remove(dir_fd, part)
                raise SystemExit("%s: got %d bytes sha256 %s, the head has %d bytes sha256 %s" % (
                    entry["path"], size, digest, entry["size"], entry["sha256"]))
            os.replace(part, names[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # a link there is replaced, not followed
        finally:
            os.close(dir_fd)
        fetched += size - kept
        resumed_bytes += kept
        print("fetched %s (%d bytes%s, sha256 ok)" % (entry["path"], size, ", resumed at %d" % kept if kept else ""),
              file=sys.stderr, flush=True)
    for link in bad_links:
        repo_dir = link["path"].split("/", 1)[0]
        names = names_below(repo_dir, link["path"])
        dir_fd = parent_fd(root, repo_dir, names, make=True)
        try:
            remove(dir_fd, names[-1])
            os.symlink(link["target"], names[-1], dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
    repos = repositories(wanted)
    for repo in repos:
        record(root, repo)
    return {"changed": bool(need or bad_links), "files_fetched": len(need), "bytes_fetched": fetched,
            "bytes_resumed": resumed_bytes, "links_fixed": len(bad_links),
            "files": sum(len(repo["files"]) for repo in repos),
            "bytes": sum(repo["bytes"] for repo in repos), "repos": [repo["repo_dir"] for repo in repos]}


RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class ShareHandler(http.server.BaseHTTPRequestHandler):
    """GET and HEAD of /<token>/<path> for the manifest's files only; one byte range at most.

    The request's path is looked up, exactly, among the manifest's paths, which ShareServer confined to their
    folders when it started: a ``..`` or an absolute path in the request matches none and answers 404."""

    server_version = "sparkfleet-weights"
    sys_version = ""

    def log_message(self, format, *args):  # noqa: A002 - http.server's signature
        """http.server's access log (to stderr, so the unit's journal) with the share's token written as <token>: the
        request line carries it, and the journal outlives the share."""
        line = (format % args).replace(self.server.token, "<token>")
        sys.stderr.write("%s - %s\n" % (self.address_string(), line))

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
        try:
            # No link is followed, on the way or at the end: a file swapped for a link since the manifest is not served.
            handle = open_file(self.server.root, entry["path"].split("/", 1)[0], entry["path"])
        except (OSError, SystemExit) as error:
            print("refused %s: %s" % (entry["path"], error), file=sys.stderr, flush=True)
            self.send_error(404)
            return
        with handle:
            self.send_file(handle, entry["size"], body)

    def send_file(self, handle, size, body):
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
