"""The plan is the contract: playbooks, roles and templates read its fields (settings, port, served_name, ...),
and none of them parses a flag back out of the argv it carries (issue 16)."""
import os
import re

from conftest import REPO, run, tool

# A flag name written next to the plan's argv in YAML or Jinja: `'--max-model-len' in vllm_plan.argv`,
# `argv.index('--flag')`, `argv[argv.index(...) + 1]`.
# (A task's own `argv:` list for the command module is not the plan's and does not count.)
FLAG_NEAR_ARGV = re.compile(r"""plan\.\w*argv[^\n]{0,80}['"]--[a-z]|['"]--[a-z][a-z-]*['"]\s+(?:not\s+)?in\s+\(?[\w.]*plan\.\w*argv""")


def consumers():
    for pattern in ("playbooks/*.yml", "site.yml", "roles/*/tasks/*.yml", "roles/*/vars/*.yml",
                    "roles/*/defaults/*.yml", "roles/*/templates/*.j2", "awx/*.yml", "awx/templates/*"):
        yield from sorted(REPO.glob(pattern))


def test_guard_reads_the_spellings_it_must_catch():
    assert FLAG_NEAR_ARGV.search("{{ '--language-model-only' in (vllm_plan.argv | default([])) }}")
    assert FLAG_NEAR_ARGV.search("{{ vllm_plan.argv[vllm_plan.argv.index('--max-model-len') + 1] }}")
    assert FLAG_NEAR_ARGV.search("{{ (vllm_plan.ray_start_argv | default(['--port', '6379'])) | select('match', '^[0-9]+$') }}")
    assert not FLAG_NEAR_ARGV.search("{{ vllm_plan.settings.max_model_len }} {{ vllm_plan.argv | join(' ') }}")
    assert not FLAG_NEAR_ARGV.search('argv: [nvidia-smi, --query-gpu=driver_version, "--format=csv"]')


def test_no_consumer_parses_the_argv_back():
    files = list(consumers())
    assert len(files) > 20, files
    found = {str(path.relative_to(REPO)): match.group(0) for path in files
             for match in [FLAG_NEAR_ARGV.search(path.read_text())] if match}
    assert not found, "read the plan's fields (vllm_plan.settings ...) instead of parsing its argv: %s" % found


def test_runtime_comes_from_the_plan_only():
    """The runtime's default is the catalog's (defaults.runtime, through the planner); no playbook keeps its own.
    Before, stop.yml, status.yml and verify.yml defaulted to native while the catalog and host.yml said compose,
    so `stop.yml -i inventories/rtx_pro_6000` on its own left the compose server running."""
    pattern = re.compile(r"vllm_runtime\s*\|\s*default\(|runtime\s*\|\s*default\(['\"](?:native|compose)")
    found = {str(p.relative_to(REPO)): m.group(0) for p in consumers() if p.parts[-2] == "playbooks" or p.name == "site.yml"
             for m in [pattern.search(p.read_text())] if m}
    assert not found, found


def test_the_cluster_group_default_is_written_once():
    """Every play that targets or names the cluster's group reads it from playbooks/vars/cluster_group.yml
    (vars_files, which a play's hosts line sees), where vllm_cluster, the default, is written once."""
    import yaml  # noqa: PLC0415

    shared = REPO / "playbooks/vars/cluster_group.yml"
    assert yaml.safe_load(shared.read_text()) == {"__cluster_group": "{{ cluster_group | default('vllm_cluster') }}"}
    written = {str(p.relative_to(REPO)) for p in REPO.glob("playbooks/**/*.yml") if "default('vllm_cluster')" in p.read_text()}
    assert written == {"playbooks/vars/cluster_group.yml"}, written
    for path in sorted(REPO.glob("playbooks/*.yml")):
        for play in yaml.safe_load(path.read_text()):
            if "import_playbook" in str(play) or "__cluster_group" not in str(play):
                continue
            assert play.get("vars_files") == ["vars/cluster_group.yml"], "%s: play %r" % (path.name, play.get("name"))


def test_port_default_is_the_catalogs_only():
    """The API port's default lives in the catalog (defaults.port); playbooks read the plan's port, and the two
    places that run without a plan (cluster_status.yml, the firewall role on its own) ask the catalog."""
    files = list(consumers()) + sorted(REPO.glob("roles/*/meta/argument_specs.yml"))
    found = {str(p.relative_to(REPO)): m.group(0) for p in files
             for m in [re.search(r"default\(\s*8000\s*\)|:\s*8000\s*$", p.read_text(), re.M)] if m}
    assert not found, found


def lookup_model(name):
    return run([tool("ansible"), "localhost", "-c", "local", "-m", "ansible.builtin.debug", "-a",
                "msg={{ lookup('sparkfleet.vllm.catalog', model=%r).short }}" % name],
               env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")), timeout=120, check=False)


def test_preflight_resolves_the_model_as_the_planner_does():
    """Before, preflight accepted short names only: a checkpoint id plan.yml accepts was refused later by
    site.yml. It now takes the plan's model, and resolves a name through the catalog's own resolve_model."""
    defaults = (REPO / "roles/preflight/defaults/main.yml").read_text()
    assert "preflight_model: \"{{ vllm_plan.model.short if vllm_plan is defined" in defaults
    storage = (REPO / "roles/preflight/tasks/storage.yml").read_text()
    assert "lookup('sparkfleet.vllm.catalog', model=preflight_model, runtime=__preflight_runtime)" in storage
    assert "in __preflight_models" not in storage
    for name in ("31b", "unsloth/gemma-4-31B-it-NVFP4", "31B"):
        proc = lookup_model(name)
        assert proc.returncode == 0 and "msg: 31b" in proc.stdout, proc.stdout + proc.stderr
    unknown = lookup_model("gemma-5")
    assert unknown.returncode != 0 and "unknown model 'gemma-5'; set vllm_model to one of: 31b" in unknown.stdout + unknown.stderr


def test_preflight_sizes_the_disk_as_the_planner_does():
    """Without a plan (playbooks/preflight.yml on its own) preflight sized the weights through a key list of its own;
    now the catalog lookup gives the planner's catalog.disk_need for the model on that runtime, and a plan's disk wins."""
    import json  # noqa: PLC0415
    import sys  # noqa: PLC0415

    sys.path.insert(0, str(REPO / ".collections"))
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog  # noqa: PLC0415

    storage = (REPO / "roles/preflight/tasks/storage.yml").read_text()
    assert "vllm_plan.disk.weights_gib if vllm_plan is defined" in storage
    assert "__preflight_model.disk.weights_gib" in storage and "weight_size_keys" not in storage
    loaded = catalog.load_catalog(use_cache=False)
    for runtime in ("compose", "native"):
        proc = run([tool("ansible"), "localhost", "-c", "local", "-m", "ansible.builtin.debug", "-a",
                    "msg={{ lookup('sparkfleet.vllm.catalog', model='unsloth/gemma-4-26B-A4B-it-NVFP4', runtime=%r).disk }}"
                    % runtime],
                   env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_CALLBACK_RESULT_FORMAT="json"),
                   timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        shown = json.loads(proc.stdout.split("=>", 1)[1])["msg"]
        need = catalog.disk_need(loaded, {}, runtime, loaded["models"]["26b-a4b"])
        assert shown == need and need["weights_gib"] > 0, proc.stdout


def test_the_gateway_follows_the_plan():
    """serve.yml puts the gateway in front when the plan says a gateway fronts the server (the planner then bound vLLM
    to 127.0.0.1), and the gateway's upstream is the plan's bind_address and port, never a flag read from argv."""
    import yaml  # noqa: PLC0415

    tasks = yaml.safe_load((REPO / "playbooks/serve.yml").read_text())[0]["tasks"]
    roles = [(t, t.get("ansible.builtin.include_role") or {}) for t in tasks]
    gateway = [t for t, r in roles if r.get("name") == "sparkfleet.vllm.vllm_gateway" and "tasks_from" not in r]
    assert len(gateway) == 1 and gateway[0]["when"] == "vllm_plan.gateway | default(false) | bool", gateway
    runtime = [t for t, r in roles if r.get("name") == "sparkfleet.vllm.vllm_{{ vllm_plan.runtime }}"]
    assert runtime and tasks.index(gateway[0]) > tasks.index(runtime[-1]), "the gateway comes after the runtime it fronts"
    # Where the plan has none, the same role takes an earlier run's gateway away (vllm_gateway turned off).
    removal = [t for t, r in roles if r.get("name") == "sparkfleet.vllm.vllm_gateway" and r.get("tasks_from") == "remove"]
    assert len(removal) == 1 and removal[0]["when"] == "not (vllm_plan.gateway | default(false) | bool)", removal
    defaults = yaml.safe_load((REPO / "roles/vllm_gateway/defaults/main.yml").read_text())
    assert "vllm_plan.bind_address" in defaults["vllm_gateway_upstream_host"]
    assert "vllm_plan.port" in defaults["vllm_gateway_upstream_port"]
    # Where the gateway listens is the plan's client endpoint, whose URL verify.yml, bench.yml and status.yml use:
    # none of them builds it again from its parts.
    assert "vllm_plan.endpoint.port" in defaults["vllm_gateway_port"]
    for playbook in ("verify.yml", "bench.yml", "status.yml"):
        text = (REPO / "playbooks" / playbook).read_text()
        assert "vllm_plan.endpoint.url" in text, playbook
        assert not re.search(r"endpoint\.(scheme|port)|ansible_host", text), playbook
