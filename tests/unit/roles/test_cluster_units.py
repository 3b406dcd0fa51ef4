"""Golden tests of the vllm_cluster role's systemd units.

The units are rendered by ansible-playbook itself (tests/unit/roles/
render_cluster_units.yml, -c local, nothing contacted) from plans the real
planner makes for inventories/spark2 and spark4, for every model with every
drafter the planner accepts on a cluster, under both executors. Each unit must
carry the flags and environment multi-node vLLM needs on DGX Sparks, and the
exact argv of its node's plan. The native runtime (the simulated cluster's
stand-in) is rendered from inventories/sim4 and must carry the same
environment and ordering.
"""
import concurrent.futures
import json
import os
import shlex
import stat
import subprocess
import sys

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner
from conftest import REPO, keyless, run, tool

LINK = {2: ["192.0.2.101", "192.0.2.102"], 4: ["192.0.2.101", "192.0.2.102", "192.0.2.103", "192.0.2.104"]}
ENV_KEYS = ("VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "UCX_NET_DEVICES")


def valid_combos(nodes, executor):
    """Every model x drafter the planner accepts for a dgx_spark cluster of this size."""
    catalog = cat.load_catalog(None)
    combos = []
    for model in sorted(catalog["models"]):
        for drafter in ("none", "mtp", "dflash"):
            request = {"model": model, "drafter": drafter, "profile": "dgx_spark", "node_count": nodes, "node_index": 0,
                       "executor": executor, "head_address": LINK[nodes][0], "node_address": LINK[nodes][0],
                       "cluster_interface": "enp1s0f1np1", "cluster_hca": "rocep1s0f1"}
            try:
                planner.plan(catalog, keyless(request))
            except planner.PlanError:
                continue
            combos.append({"name": "%s-%s" % (model, drafter), "model": model, "drafter": drafter, "executor": executor})
    return combos


def render(tmp_path, inventory, combos, collect=False):
    """Render through the role's render.yml into tmp_path/<executor>/<combo>/<host>/, every combo (each names its
    executor) in one ansible-playbook run. With collect, the role writes no files: every host's previews (the fact
    render.yml sets) come back in one JSON file, laid out here the same way."""
    run([tool("ansible-playbook"), "-c", "local", "-i", str(REPO / "inventories" / inventory), "--skip-tags", "plan_report",
         str(REPO / "tests/unit/roles/render_cluster_units.yml"),
         # The shipped inventories hold no key (a vault or AWX brings it): these units are the key-less ones.
         "-e", json.dumps({"combos": combos, "render_dir": str(tmp_path), "collect": collect, "vllm_open_api": "all"})],
        timeout=900)
    if collect:
        for host, previews in json.loads((tmp_path / "previews.json").read_text()).items():
            for combo, files in previews.items():
                base = tmp_path / combo / host
                base.mkdir(parents=True)
                for name, text in files.items():
                    (base / name).write_text(text)


def exec_words(unit, key="ExecStart="):
    lines = [line for line in unit.splitlines() if line.startswith(key)]
    return [shlex.split(line[len(key):].replace("$$", "$").replace("%%", "%")) for line in lines]


def environment(unit):
    env = {}
    for line in unit.splitlines():
        if line.startswith("Environment="):
            key, _separator, value = shlex.split(line[len("Environment="):])[0].partition("=")
            env[key] = value
    return env


def check_container_flags(words):
    text = " ".join(words)
    for flag in ("--network host", "--ipc host", "--device=/dev/infiniband", "--cap-add IPC_LOCK", "--ulimit memlock=-1",
                 "--ulimit stack=67108864", ":/root/.cache/huggingface", ":/root/.cache/vllm", "--gpus all"):
        assert flag in text, "missing %r in %s" % (flag, text)
    assert "--privileged" not in words
    for key in ENV_KEYS + ("RAY_memory_monitor_refresh_ms",):
        assert "--env=" + key in words


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    if tool("ansible-playbook") is None:
        pytest.fail("ansible-playbook is missing from the controller toolchain")
    out, runs = {}, []
    for nodes in (2, 4):
        where, both = tmp_path_factory.mktemp("units-%d" % nodes), []
        for executor in ("ray", "mp"):
            combos = valid_combos(nodes, executor)
            assert len(combos) >= 5, "the planner accepted only %s on %d nodes" % (combos, nodes)
            out[(nodes, executor)] = (where / executor, combos)
            both += combos
        runs.append((where, "spark%d" % nodes, both))
    # One ansible-playbook run per inventory, both executors (the tier's costliest set-up), the two side by side.
    # Collected: one file write in all instead of three to four module runs per host and configuration.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        jobs = [pool.submit(render, where, inventory, combos, collect=True) for where, inventory, combos in runs]
        for job in jobs:
            job.result()
    return out


@pytest.mark.parametrize("nodes", [2, 4])
@pytest.mark.parametrize("executor", ["ray", "mp"])
def test_container_units_carry_flags_env_and_plan(rendered, nodes, executor):
    where, combos = rendered[(nodes, executor)]
    hosts = ["spark-%02d" % (i + 1) for i in range(nodes)]
    for combo in combos:
        for index, host in enumerate(hosts):
            base = where / combo["name"] / host
            plan = json.loads((base / "plan.json").read_text())
            assert plan["node_index"] == index and plan["node_count"] == nodes
            head = index == 0
            units = {p.name: p.read_text() for p in base.glob("*.service")}
            expected_units = {"vllm-cluster-ray.service"} if executor == "ray" else set()
            if head or executor == "mp":
                expected_units.add("vllm-cluster.service")
            assert set(units) == expected_units, (combo, host)
            for unit in units.values():
                env = environment(unit)
                assert env["VLLM_HOST_IP"] == LINK[nodes][index]
                assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "enp1s0f1np1"
                assert env["NCCL_IB_HCA"] == "rocep1s0f1" and env["UCX_NET_DEVICES"] == "rocep1s0f1:1"
                assert env["RAY_memory_monitor_refresh_ms"] == "0"
                # The role placed and verified the model and drafter on every node: no rank asks the hub at start.
                assert env["HF_HUB_OFFLINE"] == "1"
                # Under Ray a stop does not wait for a drain only Ray Serve uses (the head's GCS is gone by then).
                assert env.get("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S") == ("0" if executor == "ray" else None)
                assert "StartLimitBurst=5" in unit and "Restart=on-failure" in unit
                assert "HF_TOKEN=" not in unit and "VLLM_API_KEY=" not in unit  # names only (--env=NAME)
                # Required (no "-"): a unit whose secret file is missing does not start, and systemd names the file.
                assert "EnvironmentFile=/etc/vllm-cluster/secret.env" in unit and "EnvironmentFile=-" not in unit
            if executor == "ray":
                (ray_start,) = exec_words(units["vllm-cluster-ray.service"])
                check_container_flags(ray_start)
                script = ray_start[-1]
                assert "pip install --quiet 'ray[default]==2.60.0'" in script
                assert "--node-ip-address %s" % LINK[nodes][index] in script
                assert ("--head --port 6379" in script) == head
                assert ("--address %s:6379" % LINK[nodes][0] in script) == (not head)
                if head:
                    assert "--include-dashboard=false" in script
            if "vllm-cluster.service" in units:
                unit = units["vllm-cluster.service"]
                (start,) = exec_words(unit)
                assert start[-len(plan["argv"]):] == plan["argv"], "the unit's argv differs from the plan"
                argv = plan["argv"]
                assert argv[argv.index("--tensor-parallel-size") + 1] == str(nodes)
                if combo["drafter"] != "none":
                    assert "--speculative-config" in argv
                    spec = json.loads(argv[argv.index("--speculative-config") + 1])
                    assert plan["drafter_model"]["checkpoint"] == spec["model"]
                if executor == "ray":
                    assert "--distributed-executor-backend" in argv
                    pre = exec_words(unit, "ExecStartPre=")
                    gate = [w for w in pre if "/usr/local/lib/sparkfleet/ray_status.py" in w]
                    assert gate and gate[0][gate[0].index("--expect") + 1] == ",".join(LINK[nodes])
                    assert "PartOf=vllm-cluster-ray.service" in unit
                    assert start[:3] == ["/usr/bin/docker", "exec", "-e"]
                else:
                    check_container_flags(start)
                    # The plan's whole command: its entrypoint's first word as docker's, the rest before the argv.
                    entry = plan["entrypoint"]
                    assert start[start.index("--entrypoint") + 1] == entry[0] == "vllm"
                    assert start[-len(argv) - len(entry) + 1:] == entry[1:] + argv
                    assert argv[argv.index("--nnodes") + 1] == str(nodes)
                    assert argv[argv.index("--node-rank") + 1] == str(index)
                    assert argv[argv.index("--master-addr") + 1] == LINK[nodes][0]
                    assert ("--headless" in argv) == (not head)


def test_every_model_is_rendered_with_a_drafter(rendered):
    names = {c["name"] for (_n, _e), (_w, combos) in rendered.items() for c in combos}
    catalog = cat.load_catalog(None)
    cluster_models = {m for m in catalog["models"] if any(n.startswith(m + "-") for n in names)}
    assert len(cluster_models) >= 5
    assert any(n.endswith("-dflash") for n in names) and any(n.endswith("-mtp") for n in names)


def test_native_runtime_is_the_same_group(tmp_path):
    """The simulated cluster's stand-in: same env, same ordering, processes from venvs."""
    sim_catalog = REPO / "tests/output/cluster/catalog-sim.yml"
    run([tool("python") or "python3", str(REPO / "tests/cluster/sim_catalog.py"), str(sim_catalog)])
    # Both executors in one run, collected (the role's file writes are proven by the vaulted secret test below).
    render(tmp_path, "sim4", [{"name": "tiny", "model": "tiny", "drafter": "none", "executor": executor}
                              for executor in ("ray", "mp")], collect=True)
    for executor in ("ray", "mp"):
        head = (tmp_path / executor / "tiny" / "sim-1")
        worker = (tmp_path / executor / "tiny" / "sim-3")
        serve = (head / "vllm-cluster.service").read_text()
        (start,) = exec_words(serve)
        assert start[0].endswith("/.venv-vllm/bin/python") and start[3] == "serve"
        assert "docker" not in serve
        assert environment(serve)["VLLM_HOST_IP"] == "172.29.47.11"
        if executor == "ray":
            (ray_start,) = exec_words((worker / "vllm-cluster-ray.service").read_text())
            assert ray_start[0].endswith("/.venv-vllm/bin/ray")  # Ray's workers import vLLM from it
            assert ray_start[ray_start.index("--resources") + 1] == '{"standin_device": 1}'
            assert ray_start[ray_start.index("--node-ip-address") + 1] == "172.29.47.13"
            assert "--num-cpus" in ray_start and "--object-store-memory" in ray_start
        else:
            worker_unit = (worker / "vllm-cluster.service").read_text()
            assert "--headless" in exec_words(worker_unit)[0]
            plan = json.loads((worker / "plan.json").read_text())
            assert yaml.safe_load(json.dumps(plan))["node_role"] == "worker"


def test_secret_env_holds_the_plans_names_from_the_vaulted_variables(tmp_path):
    """The operator's way: key and token only in an Ansible Vault vars file, a decoy in the controller's environment.

    Each node's secret.env (the preview renders it 0600 when asked) must hold exactly its plan's secret_env names,
    with the vault's values read back unchanged by the same double-quote rules systemd's EnvironmentFile= uses
    (bash sources them alike); the decoy must appear nowhere; a container gets each secret by name only. The vault's
    Hugging Face token is the weights download's only: it reaches no rank's file or unit.
    """
    # The planner refuses whitespace in a key (rule api-key); every other printable character is here.
    key, token, decoy = "k$y'q\"\\#x`$(id)", "hf_vault_token_%s" % tmp_path.name, "decoy-from-the-environment"
    vars_file, password_file = tmp_path / "secrets.yml", tmp_path / "vault-password"
    vars_file.write_text(yaml.safe_dump({"vllm_api_key": key, "vllm_hf_token": token}))
    password_file.write_text("test-vault-password\n")
    run([tool("ansible-vault"), "encrypt", "--vault-password-file", str(password_file), str(vars_file)])
    assert key not in vars_file.read_text()
    combo = [c for c in valid_combos(2, "ray") if c["drafter"] == "none"][:1]
    env = dict(os.environ, VLLM_API_KEY=decoy, HF_TOKEN=decoy)
    run([tool("ansible-playbook"), "-c", "local", "-i", str(REPO / "inventories/spark2"), "--skip-tags", "plan_report",
         str(REPO / "tests/unit/roles/render_cluster_units.yml"), "--vault-password-file", str(password_file),
         "-e", "@%s" % vars_file,
         "-e", json.dumps({"combos": combo, "render_dir": str(tmp_path / "units"), "vllm_cluster_render_secrets": True})],
        env=env, timeout=600)
    for host in ("spark-01", "spark-02"):
        base = tmp_path / "units" / "ray" / combo[0]["name"] / host
        plan = json.loads((base / "plan.json").read_text())
        # The hub token is the head's download's only (the weights role): the ranks run with the hub offline.
        assert plan["secret_env"] == ["VLLM_API_KEY"] and plan["env"]["HF_HUB_OFFLINE"] == "1", plan
        secret_file = base / "secret.env"
        assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
        text = secret_file.read_text()
        names = [line.split("=", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
        assert sorted(names) == sorted(plan["secret_env"]), text
        assert decoy not in text and token not in text
        script = "set -a; . %s; printf '%%s' \"$VLLM_API_KEY\"" % shlex.quote(str(secret_file))
        read_back = subprocess.run(["bash", "-c", script], capture_output=True, check=True, env={"PATH": "/usr/bin:/bin"})
        assert read_back.stdout.decode() == key
        for unit in base.glob("*.service"):
            unit_text = unit.read_text()
            assert decoy not in unit_text and key not in unit_text and token not in unit_text
            assert "--env-file" not in unit_text, "docker's --env-file would not unquote secret.env"
            if "docker run" in unit_text:
                words = exec_words(unit_text)[0]
                assert "--env=VLLM_API_KEY" in words and "--env=HF_TOKEN" not in words, words


def test_the_head_shares_the_drafters_repository_beside_the_models(tmp_path):
    """The cluster's weight copy covers what the plan serves: the role's own expression for the repositories the
    head lists and shares (__vllm_cluster_repo_dirs in roles/vllm_cluster/vars/main.yml), evaluated by Ansible for
    the planner's plans with and without a drafter."""
    catalog = cat.load_catalog(None)
    plans = {drafter: planner.plan(catalog, keyless({"model": "31b", "drafter": drafter, "profile": "dgx_spark"}))
             for drafter in ("none", "mtp", "dflash")}
    play = [{"name": "Evaluate the cluster role's repository list", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Load the role's internal variables",
                        "ansible.builtin.include_vars": str(REPO / "roles/vllm_cluster/vars/main.yml")},
                       {"name": "Write the list for each plan", "ansible.builtin.copy": {
                           "content": "{{ __vllm_cluster_repo_dirs | to_json }}", "mode": "0644",
                           "dest": str(tmp_path) + "/{{ item.key }}.json"},
                        "loop": "{{ plans | dict2items }}",
                        "vars": {"vllm_plan": "{{ item.value }}"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    run([tool("ansible-playbook"), "-c", "local", "-i", "localhost,", str(tmp_path / "play.yml"),
         "-e", json.dumps({"plans": plans, "ansible_python_interpreter": sys.executable})])
    assert json.loads((tmp_path / "none.json").read_text()) == ["models--" + plans["none"]["model"]["checkpoint"].replace("/", "--")]
    for drafter in ("mtp", "dflash"):
        dirs = json.loads((tmp_path / ("%s.json" % drafter)).read_text())
        assert dirs == ["models--" + plans[drafter][key]["checkpoint"].replace("/", "--") for key in ("model", "drafter_model")]


def test_a_weight_server_port_among_the_pinned_cluster_ports_is_refused(tmp_path):
    """The role's own preflight task (roles/vllm_cluster/tasks/preflight.yml), run by Ansible for three ports: 18999
    (the 1.x default, inside Ray's worker range 10002-19999), 6380 (a Ray node port) and the default 29600 (outside
    every range of the catalog's rules.cluster_tcp_ports)."""
    tasks = yaml.safe_load((REPO / "roles/vllm_cluster/tasks/preflight.yml").read_text())
    task = next(t for t in tasks if t["name"].startswith("Refuse a weight-server port"))
    checks = []
    for port in (18999, 6380, 29600):
        check = dict(task, register="port_%d" % port, ignore_errors=True)
        check["vars"] = dict(task["vars"], vllm_cluster_weights_port=port, vllm_cluster_copy_weights=True)
        checks.append(check)
    play = [{"name": "Run the role's port check", "hosts": "localhost", "gather_facts": False, "tasks": checks + [
        {"name": "Write the outcomes", "ansible.builtin.copy": {
            "dest": str(tmp_path / "outcomes.json"), "mode": "0644",
            "content": "{{ {'18999': port_18999, '6380': port_6380, '29600': port_29600} | to_json }}"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    run([tool("ansible-playbook"), "-c", "local", "-i", "localhost,", str(tmp_path / "play.yml"),
         "-e", json.dumps({"ansible_python_interpreter": sys.executable})])
    outcomes = json.loads((tmp_path / "outcomes.json").read_text())
    assert outcomes["18999"]["failed"] and "inside 10002-19999 of the ports the cluster pins" in outcomes["18999"]["msg"]
    assert outcomes["6380"]["failed"] and "inside 6379-6387" in outcomes["6380"]["msg"], outcomes["6380"]
    assert not outcomes["29600"].get("failed"), outcomes["29600"]
