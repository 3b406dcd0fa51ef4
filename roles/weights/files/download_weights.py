# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Download a checkpoint from the Hugging Face hub into the cache, resumably.

Uses huggingface_hub.snapshot_download, which resumes partial files and skips
complete ones, so an interrupted multi-gigabyte download continues where it
stopped. The token comes from the file HF_TOKEN_PATH names (huggingface_hub's
own variable; the weights role writes it 0600 and removes it afterwards), else
from huggingface_hub's usual places; never from an argument, so it cannot
appear in `ps`. With a pinned revision (a commit) that is complete in the
cache, nothing is fetched.

Prints one JSON line: {"changed": bool, "snapshot": path, "revision": rev}.
--dry-run prints the snapshot_download arguments instead (token redacted).
"""
import argparse
import json
import os
import re
import sys

COMMIT = re.compile(r"^[0-9a-f]{40}$")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hf-home", required=True, help="HF_HOME; the cache is <hf-home>/hub")
    parser.add_argument("--repo-id", required=True, help="checkpoint id, e.g. nvidia/Gemma-4-31B-IT-NVFP4")
    parser.add_argument("--revision", default="main", help="branch, tag or commit (default main)")
    parser.add_argument("--allow-pattern", action="append", default=[], dest="allow_patterns",
                        help="download only files matching this glob (repeatable)")
    parser.add_argument("--max-workers", type=int, default=8)
    parser.add_argument("--gated", action="store_true", help="the repository needs an accepted licence and a token")
    parser.add_argument("--dry-run", action="store_true", help="print the download arguments and stop")
    args = parser.parse_args(argv)
    if "/" not in args.repo_id:
        parser.error("--repo-id must be <owner>/<name>, got %r" % args.repo_id)
    if args.max_workers < 1:
        parser.error("--max-workers must be at least 1")
    return args


def download_kwargs(args, token):
    kwargs = {
        "repo_id": args.repo_id,
        "revision": args.revision,
        "cache_dir": os.path.join(args.hf_home, "hub"),
        "max_workers": args.max_workers,
        "token": token or None,
    }
    if args.allow_patterns:
        kwargs["allow_patterns"] = list(args.allow_patterns)
    return kwargs


def read_token(environ):
    """The token in the file HF_TOKEN_PATH names (it wins over an inherited HF_TOKEN), else HF_TOKEN, else ''."""
    path = environ.get("HF_TOKEN_PATH", "")
    if path:
        with open(path) as handle:
            return handle.read().strip()
    return environ.get("HF_TOKEN", "")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    token = read_token(os.environ)
    if args.gated and not token:
        sys.stderr.write("%s is gated and no token reached the download: set vllm_hf_token (from a vault) or export "
                         "HF_TOKEN on the controller (a token whose account accepted the model's licence)\n" % args.repo_id)
        return 2
    kwargs = download_kwargs(args, token)
    if args.dry_run:
        shown = dict(kwargs, token="<redacted>" if kwargs["token"] else None)
        print(json.dumps(shown, sort_keys=True))
        return 0

    os.environ["HF_HOME"] = args.hf_home
    from huggingface_hub import snapshot_download

    if COMMIT.match(args.revision):
        try:
            path = snapshot_download(local_files_only=True, **kwargs)
            print(json.dumps({"changed": False, "snapshot": path, "revision": args.revision}))
            return 0
        except Exception:  # noqa: BLE001 - anything missing locally means: download
            pass
    before = _listing(kwargs)
    path = snapshot_download(**kwargs)
    changed = _listing(kwargs) != before
    print(json.dumps({"changed": changed, "snapshot": path, "revision": os.path.basename(path)}))
    return 0


def _listing(kwargs):
    """Blob names and sizes in the repository's cache: what a download adds or completes."""
    blobs = os.path.join(kwargs["cache_dir"], "models--" + kwargs["repo_id"].replace("/", "--"), "blobs")
    if not os.path.isdir(blobs):
        return {}
    return {name: os.path.getsize(os.path.join(blobs, name)) for name in sorted(os.listdir(blobs))}


if __name__ == "__main__":
    sys.exit(main())
