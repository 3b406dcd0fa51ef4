"""The apt_signing_key module against a real HTTP server on loopback (http.server in a thread) serving keys made
by the real gpg: it writes a pinned key (0644), changes nothing on a second run, writes nothing in check mode or
when the served key is not pinned, and names the pin variable in the refusal."""
import functools
import http.server
import os
import shutil
import subprocess
import threading
from unittest import mock

import pytest
from ansible.module_utils import basic
from http_module_helpers import run_module

from ansible_collections.sparkfleet.vllm.plugins.modules import apt_signing_key
from conftest import require


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A directory of key files behind http://127.0.0.1:<port>/, and the fingerprint of each (as gpg prints it)."""
    require(shutil.which("gpg"), "gpg (Debian's gnupg package), to generate the served keys")
    home = tmp_path_factory.mktemp("gnupg")
    os.chmod(str(home), 0o700)
    root = tmp_path_factory.mktemp("www")
    fingerprints = {}
    for name in ("vendor", "impostor"):
        uid = "%s <%s@sparkfleet.invalid>" % (name, name)
        base = ["gpg", "--homedir", str(home), "--batch", "--quiet"]
        subprocess.run(base + ["--pinentry-mode", "loopback", "--passphrase", "", "--quick-generate-key", uid,
                               "ed25519", "sign", "never"], check=True, capture_output=True, timeout=120)
        (root / ("%s.asc" % name)).write_bytes(subprocess.run(base + ["--armor", "--export", uid], check=True,
                                                              capture_output=True, timeout=60).stdout)
        colons = subprocess.run(base + ["--with-colons", "--list-keys", uid], check=True, capture_output=True,
                                text=True, timeout=60).stdout
        fingerprints[name] = [line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:")][0]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d/" % server.server_address[1], fingerprints
    server.shutdown()


def run(args, check_mode=False):
    """(kind, result) of the module; ownership is root's on a host, and tests may run as an ordinary user, so only
    the mode is checked here."""
    with mock.patch.object(basic.AnsibleModule, "set_owner_if_different", lambda self, path, owner, changed: changed), \
            mock.patch.object(basic.AnsibleModule, "set_group_if_different", lambda self, path, group, changed: changed):
        return run_module(apt_signing_key, args, check_mode=check_mode)


def test_a_pinned_key_is_written_once(served, tmp_path):
    base, fprs = served
    dest = tmp_path / "keyrings" / "vendor.asc"  # the directory does not exist yet: the module creates it
    args = {"url": base + "vendor.asc", "dest": str(dest), "fingerprints": [fprs["vendor"].lower()]}
    kind, checked = run(args, check_mode=True)
    assert kind == "exit" and checked["changed"] is True and not dest.parent.exists()
    kind, first = run(args)
    assert kind == "exit" and first["changed"] is True, first
    assert first["fingerprints"] == [fprs["vendor"]]
    assert dest.read_bytes().startswith(b"-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert oct(dest.stat().st_mode & 0o777) == "0o644" and oct(dest.parent.stat().st_mode & 0o777) == "0o755"
    kind, again = run(args)
    assert kind == "exit" and again["changed"] is False, again
    dest.chmod(0o600)
    assert run(args)[1]["changed"] is True and oct(dest.stat().st_mode & 0o777) == "0o644"


def test_an_unpinned_key_is_refused_and_nothing_is_written(served, tmp_path):
    base, fprs = served
    dest = tmp_path / "vendor.asc"
    dest.write_text("the key an earlier run trusted\n")
    kind, result = run({"url": base + "impostor.asc", "dest": str(dest), "fingerprints": [fprs["vendor"]],
                        "pin_variable": "docker_apt_key_fingerprint"})
    assert kind == "fail", result
    message = result["msg"]
    assert "docker_apt_key_fingerprint" in message and fprs["impostor"] in message and fprs["vendor"] in message
    assert dest.read_text() == "the key an earlier run trusted\n"


def test_a_missing_key_or_an_empty_pin_is_refused(served, tmp_path):
    base, fprs = served
    dest = tmp_path / "vendor.asc"
    kind, missing = run({"url": base + "absent.asc", "dest": str(dest), "fingerprints": [fprs["vendor"]]})
    assert kind == "fail" and "HTTP 404" in missing["msg"], missing
    kind, empty = run({"url": base + "vendor.asc", "dest": str(dest), "fingerprints": [""],
                       "pin_variable": "nvidia_driver_apt_key_fingerprint"})
    assert kind == "fail" and "nvidia_driver_apt_key_fingerprint is empty" in empty["msg"]
    assert not dest.exists()
