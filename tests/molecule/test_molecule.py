"""Molecule tier: every roles/<role>/molecule/<scenario> runs, and must pass.

Each scenario runs `molecule test` (create, prepare, check, converge,
idempotence, check, verify, destroy) on the systemd image that
tests/harness/docker-up.sh builds locally; no registry is reachable, so nothing
is pulled. The check after converge must predict no change (changed=0 in its
recap), as idempotence's real run must. The static tests keep every scenario on the shared image and run
flags (tests/harness/image.env) and on the house sequence.
"""
import concurrent.futures
import importlib.util
import os
import pathlib
import re
import secrets
import shlex
import shutil
import subprocess
import sysconfig
import time

import pytest
import yaml

from conftest import REPO, require, run, tool

HARNESS = REPO / "tests" / "harness"
LOG_DIR = REPO / "tests" / "output" / "molecule"
SCENARIOS = sorted(REPO.glob("roles/*/molecule/*/molecule.yml"))
# What every scenario shares (driver, provisioner, the operator login, the sequence); `molecule --base-config`.
BASE = REPO / "tests" / "molecule" / "base.yml"
# The operator login's sudo password: random per run, given to Molecule's provisioner only through the environment.
BECOME_PASSWORD = secrets.token_urlsafe(18)
REQUIRED_SEQUENCE = ["create", "prepare", "check", "converge", "idempotence", "verify", "destroy"]
APTREPO_DIR = os.environ.get("SPARKFLEET_APTREPO_DIR", "/var/tmp/sparkfleet-aptrepo")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def scenario_id(path):
    return "%s/%s" % (path.parents[2].name, path.parent.name)


def image_env():
    """tests/harness/image.env as a dict (it is plain KEY="value" lines)."""
    values = {}
    for line in (HARNESS / "image.env").read_text().splitlines():
        match = re.match(r'^([A-Z_]+)="?(.*?)"?$', line.strip())
        if match:
            values[match.group(1)] = match.group(2)
    return values


def load(path):
    # molecule.yml interpolates ${VAR:-default}; YAML reads it as a plain string.
    return yaml.safe_load(path.read_text())


def merge(base, over):
    """Molecule's deep merge of a base config and a scenario: mappings merge, anything else is the scenario's."""
    if isinstance(base, dict) and isinstance(over, dict):
        merged = dict(base)
        for key, value in over.items():
            merged[key] = merge(base[key], value) if key in base else value
        return merged
    return over


def included_roles(node):
    """The role names every include_role / import_role in a playbook names."""
    if isinstance(node, list):
        return [name for item in node for name in included_roles(item)]
    if isinstance(node, dict):
        found = [node[key]["name"] for key in ("ansible.builtin.include_role", "ansible.builtin.import_role")
                 if isinstance(node.get(key), dict)]
        return found + [name for value in node.values() for name in included_roles(value)]
    return []


RECAP_LINE = r"^\W*(\S+)\s+: ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)"


def step_recaps(output, sequence):
    """Each step's recap lines (host, changed, unreachable, failed), in the order of the sequence: every step is one
    ansible-playbook run, whose PLAY RECAP closes its output on stdout (Molecule's own log lines go to stderr)."""
    blocks = re.split(r"^PLAY RECAP \**$", output, flags=re.M)[1:]
    assert len(blocks) == len(sequence), "%d play recaps for the %d steps %s" % (len(blocks), len(sequence), sequence)
    return [re.findall(RECAP_LINE, block.lstrip("\n").split("\n\n", 1)[0] + "\n", re.M) for block in blocks]


def scenario_config(path):
    """The configuration Molecule runs: tests/molecule/base.yml with the scenario's molecule.yml on top."""
    return merge(load(BASE), load(path))


# Words that are Jinja syntax or literals, not facts read from the host.
JINJA_WORDS = {"true", "false", "yes", "no", "none", "and", "or", "not", "in", "is", "if", "else"}


def constant_assertions(node):
    """Every `assert: that:` condition that names no variable at all (`true`, `- 1 == 1`, `'a' in 'abc'`)."""
    found = []
    if isinstance(node, list):
        for item in node:
            found += constant_assertions(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("ansible.builtin.assert", "assert") and isinstance(value, dict):
                conditions = value.get("that")
                for condition in conditions if isinstance(conditions, list) else [conditions]:
                    text = re.sub(r"'[^']*'|\"[^\"]*\"", "", str(condition))
                    names = [w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text) if w.lower() not in JINJA_WORDS]
                    if not names:
                        found.append(condition)
            else:
                found += constant_assertions(value)
    return found


@pytest.mark.parametrize("condition,constant", [
    ("true", True), (True, True), ("1 == 1", True), ("'a' in 'abc'", True), ("yes", True),
    ("docker_info.rc == 0", False), ("'docker' in groups.stdout", False), ("not (result is failed)", False),
])
def test_constant_assertion_guard(condition, constant):
    """The guard itself: a list item or an expression of literals counts as asserting nothing."""
    tasks = [{"name": "Check", "ansible.builtin.assert": {"that": ["x.rc == 0", condition], "fail_msg": "m"}}]
    assert (constant_assertions(tasks) == [condition]) is constant


def test_step_recaps_reads_each_step():
    """The parser behind the check-after-converge rule: one recap per step, in order, so a change predicted by the
    second check is found there and not mistaken for the first check's (a fresh host, where changes are due)."""
    def recap(changed):
        return "PLAY RECAP ****\nhost-a                     : ok=3    changed=%d    unreachable=0    failed=0\n\n" % changed
    output = "".join(recap(n) for n in (4, 9, 0, 1)) + "INFO [default > check] Executed: Successful\n"
    steps = step_recaps(output, ["prepare", "check", "idempotence", "check"])
    assert [[row[1] for row in step] for step in steps] == [["4"], ["9"], ["0"], ["1"]]
    with pytest.raises(AssertionError, match="3 play recaps for the 4 steps"):
        step_recaps("".join(recap(n) for n in (4, 9, 0)), ["prepare", "check", "idempotence", "check"])


def test_scenarios_exist():
    assert SCENARIOS, "no roles/*/molecule/*/molecule.yml found"


@pytest.mark.parametrize("path", SCENARIOS, ids=scenario_id)
def test_scenario_follows_house_rules(path):
    """Static: shared image and flags, house sequence, and a verify that asserts."""
    env = image_env()
    config = scenario_config(path)
    flags = shlex.split(env["SPARKFLEET_RUN_FLAGS"])
    sequence = config["scenario"]["test_sequence"]
    for step in REQUIRED_SEQUENCE:
        assert step in sequence, "%s: test_sequence lacks %s" % (path, step)
    assert sequence.index("check") < sequence.index("converge") < sequence.index("idempotence") < sequence.index("verify")
    assert config["driver"]["name"] == "docker"
    # The shared parts live in base.yml only, and the instance is reached as the operator login, not root.
    for key in ("driver", "dependency", "verifier", "scenario", "prerun"):
        assert key not in load(path), "%s: %s belongs in %s" % (path, key, BASE.relative_to(REPO))
    login = config["provisioner"]["inventory"]["group_vars"]["all"]
    assert login["ansible_user"] != "root" and "ansible_become_password" in login, login
    for name in ("converge.yml", "verify.yml"):
        plays = yaml.safe_load((path.parent / name).read_text())
        assert all(play.get("become") is True for play in plays), "%s/%s: every play escalates (sudo)" % (path.parent, name)
        roles = included_roles(plays)
        assert (roles or name == "verify.yml") and all(r.startswith("sparkfleet.vllm.") for r in roles), "%s/%s: roles by FQCN: %s" % (path.parent, name, roles)
    prepare = (path.parent / "prepare.yml").read_text()
    assert "shared/operator-login.yml" in prepare.split("\n- name:", 2)[1], "%s: prepare starts with the operator login" % path
    for platform in config["platforms"]:
        image = platform["image"]
        assert env["SPARKFLEET_IMAGE"] in image, "%s: image %s is not %s" % (path, image, env["SPARKFLEET_IMAGE"])
        assert platform.get("pre_build_image") is True, "%s: pre_build_image must be true (no registry)" % path
        assert platform.get("command") == env["SPARKFLEET_IMAGE_CMD"]
        assert not platform.get("privileged"), "%s: --privileged fails on the test host" % path
        if "--cgroupns=host" in flags:
            assert platform.get("cgroupns_mode") == "host", "%s: cgroupns_mode must be host" % path
        volumes = platform.get("volumes", [])
        tmpfs = platform.get("tmpfs", [])
        for flag, value in zip(flags, flags[1:]):
            if flag == "-v":
                assert value in volumes, "%s: platform lacks volume %s" % (path, value)
            if flag == "--tmpfs":
                assert value in tmpfs, "%s: platform lacks tmpfs %s" % (path, value)
    verify = (path.parent / "verify.yml").read_text()
    assert "shared/tasks/assert-operator-login.yml" in verify, "%s: verify checks the operator login first" % path
    assert "ansible.builtin.assert" in verify and "fail_msg" in verify, "%s: verify.yml asserts nothing" % path
    constant = constant_assertions(yaml.safe_load(verify))
    assert not constant, "%s: verify.yml asserts constants %s" % (path, constant)
    assert (path.parent / "README.md").exists(), "%s: every scenario says in README.md what it tests and what stands in" % path


@pytest.fixture(scope="session")
def docker_image():
    require(tool("molecule"), "molecule (pip install -r requirements/dev.txt)")
    # docker-up.sh installs Debian's docker.io itself when dockerd is missing.
    started = time.monotonic()
    proc = subprocess.run(["bash", str(HARNESS / "docker-up.sh")], capture_output=True, text=True, timeout=900,
                          check=False)
    require(proc.returncode == 0, "a Docker engine and the local systemd image (tests/harness/docker-up.sh: %s)"
            % proc.stderr.strip()[-1500:])
    require(tool("docker"), "a docker client after tests/harness/docker-up.sh")
    print("docker-up.sh took %.1f s" % (time.monotonic() - started))
    # Signed apt repositories of STAND-IN packages for the vendor repositories
    # no test machine can reach (cached; see tests/harness/aptrepo/build.sh).
    proc = subprocess.run(["bash", str(HARNESS / "aptrepo" / "build.sh")], capture_output=True, text=True, timeout=900, check=False,
                          env=dict(os.environ, SPARKFLEET_APTREPO_DIR=APTREPO_DIR))
    require(proc.returncode == 0, "the stand-in apt repositories (tests/harness/aptrepo/build.sh: %s)" % proc.stderr.strip()[-1500:])
    fingerprint = pathlib.Path(APTREPO_DIR, "fingerprint")
    require(fingerprint.exists(), "the stand-in key's fingerprint in %s (tests/harness/aptrepo/build.sh writes it)" % fingerprint)
    os.environ["SPARKFLEET_APTREPO_FINGERPRINT"] = fingerprint.read_text().strip()
    return image_env()["SPARKFLEET_IMAGE"]


# Scenarios run side by side: each has its own containers and molecule ephemeral directory (and no prerun,
# which would install the collection into one shared ~/.ansible). Two at a time on a 2-core machine (seven
# scenarios took 351 s, against 540 s one by one); SPARKFLEET_MOLECULE_WORKERS=1 runs them one by one, as
# `make test` does while another lane has the other core. A role with two cases (docker, nvidia_container_toolkit,
# nvidia_driver) runs them as two platforms of one scenario: one Molecule run of each step for both containers.
WORKERS = int(os.environ.get("SPARKFLEET_MOLECULE_WORKERS", "2"))


def run_scenario(path, image):
    """`molecule test` for one scenario; returns (returncode, output, seconds, log path)."""
    role_dir = path.parents[2]
    scenario = path.parent.name
    # A container left behind by an interrupted run would be reused by create.
    for platform in load(path)["platforms"]:
        subprocess.run(["docker", "rm", "-f", platform["name"]], capture_output=True, timeout=120, check=False)
    env = dict(os.environ)
    env.update({
        "SPARKFLEET_IMAGE": image,
        "SPARKFLEET_APTREPO_DIR": APTREPO_DIR,
        "SPARKFLEET_VENV_COLLECTIONS": sysconfig.get_paths()["purelib"],
        "PATH": "%s:%s" % (pathlib.Path(tool("molecule")).parent, env.get("PATH", "")),
        "SPARKFLEET_MOLECULE_BECOME_PASSWORD": BECOME_PASSWORD,
        "NO_COLOR": "1", "PY_COLORS": "0", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1",
    })
    env.pop("ANSIBLE_CONFIG", None)  # molecule writes its own ansible.cfg for the scenario
    # Molecule keeps a scenario's state (created, prepared, its inventory) in an ephemeral directory. A run that was
    # interrupted leaves "created" there, and the next `create` is skipped for a container that is gone: each run
    # starts from an empty one of its own.
    ephemeral = LOG_DIR / "ephemeral" / ("%s-%s" % (role_dir.name, scenario))
    shutil.rmtree(ephemeral, ignore_errors=True)
    env["MOLECULE_EPHEMERAL_DIRECTORY"] = str(ephemeral)
    started = time.monotonic()
    proc = run([tool("molecule"), "--base-config", str(BASE), "test", "-s", scenario], cwd=role_dir, env=env,
               timeout=1200, check=False)
    elapsed = time.monotonic() - started
    output = ANSI.sub("", proc.stdout + proc.stderr)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = LOG_DIR / ("%s-%s.log" % (role_dir.name, scenario))
    log.write_text(output)
    return proc.returncode, output, elapsed, log


@pytest.fixture(scope="session")
def scenario_runs(docker_image, request):
    """Every selected scenario's `molecule test`, WORKERS at a time; the tests below judge one result each."""
    selected = [item.callspec.params["path"] for item in request.session.items
                if item.originalname == "test_scenario_passes"]
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, WORKERS)) as pool:
        futures = {scenario_id(path): pool.submit(run_scenario, path, docker_image) for path in selected}
        results = {key: future.result() for key, future in futures.items()}
    print("molecule: %d scenarios, %d at a time, in %.1f s (one by one they add up to %.1f s)" % (
        len(results), WORKERS, time.monotonic() - started, sum(r[2] for r in results.values())))
    return results


@pytest.mark.parametrize("path", SCENARIOS, ids=scenario_id)
def test_scenario_passes(path, scenario_runs):
    role_dir = path.parents[2]
    scenario = path.parent.name
    config = scenario_config(path)
    returncode, output, elapsed, log = scenario_runs[scenario_id(path)]
    print("%s: molecule test took %.1f s (log: %s)" % (scenario_id(path), elapsed, log))
    assert returncode == 0, "molecule test -s %s in %s exited %s; log %s; tail:\n%s" % (
        scenario, role_dir, returncode, log, output[-6000:])
    for step in config["scenario"]["test_sequence"]:
        assert re.search(r"%s (?:➜|>) %s\]?:? Executed: Successful" % (re.escape(scenario), step), output), \
            "%s: step %s did not run successfully (log %s)" % (scenario_id(path), step, log)
    recaps = re.findall(RECAP_LINE, output, re.M)
    instance_recaps = [r for r in recaps if r[0] != "localhost"]
    assert instance_recaps, "%s: no play recap for the instance in the log %s" % (scenario_id(path), log)
    assert all(r[3] == "0" and r[2] == "0" for r in instance_recaps), instance_recaps
    # Molecule's check step only fails on errors. Check mode on a converged host must also predict no change (what
    # idempotence proves of a real run): a task that would report a change there misleads an operator's --check.
    sequence = config["scenario"]["test_sequence"]
    steps = step_recaps(output, sequence)
    for index, step in enumerate(sequence):
        if step == "check" and "converge" in sequence[:index]:
            changed = {row[0]: int(row[1]) for row in steps[index] if row[0] != "localhost"}
            assert changed and not any(changed.values()), "%s: check mode after converge (step %d) predicts changes %s (log %s)" % (
                scenario_id(path), index + 1, changed, log)


def test_driver_detection_reads_real_captures():
    """The nvidia_driver role reads the driver through sparkfleet.vllm.gpu_facts (tasks/detect.yml, with the
    Molecule stand-in's version file passed as proc_version_path); the module's parser, on the H200's real
    captures: branch 580 with the open modules, and a proprietary line that still parses."""
    detect = (REPO / "roles" / "nvidia_driver" / "tasks" / "detect.yml").read_text()
    assert "sparkfleet.vllm.gpu_facts:" in detect and 'proc_version_path: "{{ nvidia_driver_version_file }}"' in detect
    spec = importlib.util.spec_from_file_location("sparkfleet_gpu", REPO / "plugins" / "module_utils" / "gpu.py")
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    capture = REPO / "tests" / "unit" / "fixtures" / "nvidia-h200" / "proc-driver-nvidia-version.txt"
    require(capture.exists(), "the H200 capture %s" % capture)
    found = gpu.parse_proc_driver_version(capture.read_text())
    assert gpu.driver_branch(found["driver_version"]) == 580 and found["kernel_module"] == "open", found
    # The proprietary module words its line without "Open"; the branch still parses.
    proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"
    found = gpu.parse_proc_driver_version(proprietary)
    assert gpu.driver_branch(found["driver_version"]) == 550 and found["kernel_module"] == "proprietary", found
