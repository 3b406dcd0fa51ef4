"""awx/configure.yml: the survey specs, job template and workflow definitions
it would send to AWX (rendered offline with --tags render), checked against
AWX's own survey rules (a JSON schema of the survey_spec endpoint plus the
cross-item rules), against the catalog the choices must come from, against
the playbooks they launch, and against docs/awx.md, which must name the same
templates and workflows. Also syntax-check (ansible-lint's production profile covers awx/ in the
lint tier's one run, tests/lint/test_lint.py)."""
import json
import re

import pytest
import yaml
from awx_harness import SCHEMA, SECRET_ENV, canaries, read_workflows, render, render_process, short_name

from conftest import REPO, require, run, tool

TEMPLATES = ("Deploy", "Verify & benchmark", "Swap model", "Status", "Stop")
WORKFLOWS = ("Deploy and verify",)


@pytest.fixture(scope="module")
def render_dir(tmp_path_factory):
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    return tmp_path_factory.mktemp("awx-render")


@pytest.fixture(scope="module")
def rendered(render_dir):
    return render(render_dir)


@pytest.fixture(scope="module")
def templates(rendered):
    return {short_name(t): t for t in rendered[0]}


@pytest.fixture(scope="module")
def workflows(rendered, render_dir):
    return {short_name(w): w for w in read_workflows(render_dir)}


@pytest.fixture(scope="module")
def awx_vars():
    return yaml.safe_load((REPO / "awx/vars/main.yml").read_text())


@pytest.fixture(scope="module")
def catalog():
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as catalog_utils

    return catalog_utils.load_catalog()


def questions(template):
    return {q["variable"]: q for q in (template["survey_spec"] or {}).get("spec", [])}


def test_every_issue_template_is_defined(templates):
    assert set(TEMPLATES) <= set(templates), sorted(templates)


def test_survey_specs_validate_against_awx_schema(templates):
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    checked = 0
    for name, template in templates.items():
        if not template["survey_enabled"]:
            assert template["survey_spec"] == {}, name
            continue
        errors = sorted(validator.iter_errors(template["survey_spec"]), key=str)
        assert not errors, "%s: %s" % (name, "; ".join(e.message for e in errors))
        checked += 1
    assert checked >= 3, "Deploy, Verify & benchmark and Swap model all carry surveys"


def test_schema_rejects_what_awx_rejects():
    """The schema is not vacuous: the mistakes AWX answers with HTTP 400 fail it."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    good = {"name": "n", "description": "", "spec": [
        {"type": "multiplechoice", "question_name": "Model", "question_description": "", "variable": "vllm_model",
         "required": False, "choices": ["a", "b"], "default": ""}]}
    assert validator.is_valid(good)
    broken = [
        {"name": "n", "description": "", "spec": []},                                  # empty spec
        {"description": "", "spec": good["spec"]},                                     # no name
        {"name": "n", "description": "", "spec": [dict(good["spec"][0], required="no")]},
        {"name": "n", "description": "", "spec": [dict(good["spec"][0], type="dropdown")]},
        {"name": "n", "description": "", "spec": [{k: v for k, v in good["spec"][0].items() if k != "choices"}]},
        {"name": "n", "description": "", "spec": [dict(good["spec"][0], type="integer", default="8")]},
        {"name": "n", "description": "", "spec": [dict(good["spec"][0], min=1.5)]},
    ]
    for spec in broken:
        assert not validator.is_valid(spec), spec


def test_survey_cross_item_rules(templates):
    """What the schema cannot say: unique variables, defaults among the
    choices and within the limits, a required question that can be answered."""
    for name, template in templates.items():
        spec = (template["survey_spec"] or {}).get("spec", [])
        variables = [q["variable"] for q in spec]
        assert len(variables) == len(set(variables)), "%s: duplicated variables %s" % (name, variables)
        for q in spec:
            where = "%s / %s" % (name, q["variable"])
            if q["type"] in ("multiplechoice", "multiselect"):
                assert q["choices"], where
                if q.get("default"):
                    assert q["default"] in q["choices"], "%s: default %r not among %s" % (where, q["default"], q["choices"])
            if q["type"] == "integer":
                assert q.get("min") is None or q.get("max") is None or q["min"] <= q["max"], where
                if q.get("default") not in ("", None):
                    assert q["min"] <= q["default"] <= q["max"], where


def _throughput_modes():
    from ansible_collections.sparkfleet.vllm.plugins.modules import throughput

    return yaml.safe_load(throughput.DOCUMENTATION)["options"]["mode"]["choices"]


def test_choices_come_from_the_catalog(templates, catalog):
    """Choices are the catalog's tables, and agree with what the planner and
    the throughput module accept, so a survey answer is never refused later."""
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as catalog_utils
    from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner

    seen = set()
    for name, template in templates.items():
        for variable, q in questions(template).items():
            seen.add(variable)
            if variable == "vllm_model":
                assert q["choices"] == list(catalog["models"]), name
            elif variable == "vllm_drafter":
                assert set(catalog["drafters"]) <= set(q["choices"]), name
                # Besides the catalog's drafters only the two keywords of vllm_drafter.
                assert set(q["choices"]) - set(catalog["drafters"]) == {"auto", catalog_utils.DRAFTER_NONE}, name
                assert set(q["choices"]) == set(planner.DRAFTER_CHOICES), name
            elif variable == "vllm_max_model_len":
                assert q["max"] == max(m["max_context"] for m in catalog["models"].values()), name
            elif variable == "vllm_objective":
                assert q["choices"] == list(catalog["objectives"]), name
                assert set(q["choices"]) == set(planner.OBJECTIVES), name
                assert catalog["defaults"]["objective"] in q["choices"], name
            elif variable == "vllm_bench_mode":
                assert q["choices"] == list(catalog["bench_modes"]), name
                assert set(q["choices"]) == set(_throughput_modes()), name
            else:
                pytest.fail("%s: question %s is not checked against the catalog" % (name, variable))
    missing = {"vllm_model", "vllm_drafter", "vllm_max_model_len", "vllm_objective", "vllm_bench_mode"} - seen
    assert not missing, (
        "no survey asks %s: the catalog needs an `objectives` table (the planner's OBJECTIVES) and a "
        "`bench_modes` table (the throughput module's modes) for the surveys to offer them" % sorted(missing))


def test_each_template_asks_what_applies(templates):
    assert {"vllm_model", "vllm_drafter", "vllm_max_model_len", "vllm_objective"} <= set(questions(templates["Deploy"]))
    assert "vllm_bench_mode" in questions(templates["Verify & benchmark"])
    swap = questions(templates["Swap model"])
    assert swap["vllm_model"]["required"] is True, "Swap model must ask which model"
    for name in ("Deploy", "Verify & benchmark"):
        # Empty answers leave the inventory in charge, so one template serves every inventory.
        assert not any(q["required"] for q in questions(templates[name]).values()), name


def test_launch_options(templates):
    for name, template in templates.items():
        assert template["ask_limit_on_launch"] is True, name
        assert template["ask_inventory_on_launch"] is True, name
        # Survey answers are the only extra vars: secrets can never be typed into the launch form.
        assert template["ask_variables_on_launch"] is False, name
        assert template["allow_simultaneous"] is False, name


def test_playbooks_exist(templates):
    missing = [t["playbook"] for t in templates.values() if not (REPO / t["playbook"]).exists()]
    assert not missing, "job templates point at missing playbooks: %s" % missing


def _plays(path, seen=None):
    """Every play of a playbook, following import_playbook."""
    seen = seen if seen is not None else set()
    if path in seen:
        return
    seen.add(path)
    for play in yaml.safe_load(path.read_text()) or []:
        target = play.get("import_playbook") or play.get("ansible.builtin.import_playbook")
        if target:
            if target.startswith("sparkfleet.vllm."):
                target = "playbooks/%s.yml" % target.split(".", 2)[2]
                yield from _plays(REPO / target, seen)
            else:
                yield from _plays((path.parent / target).resolve(), seen)
        else:
            yield path, play


# Read-only reports, exempt with their reason: a report that stops at the first node it cannot reach hides what the
# others say. cluster_status.yml changes nothing, and names such a node "not read" beside the others' lines (under mp
# a worker's cut link leaves only the head's one-token probe to tell; docs/cluster.md).
READ_ONLY_REPORTS = {"playbooks/cluster_status.yml"}


def test_playbooks_treat_the_group_as_one_unit(templates):
    """A tensor-parallel group is one unit: every play that touches the hosts
    (not the controller) stops everywhere as soon as one host fails, except the read-only reports above."""
    offenders = []
    for template in templates.values():
        path = REPO / template["playbook"]
        require(path.exists(), template["playbook"])
        for source, play in _plays(path):
            hosts = str(play.get("hosts", ""))
            if hosts in ("localhost", "127.0.0.1") or play.get("connection") == "local":
                continue
            if str(source.relative_to(REPO)) in READ_ONLY_REPORTS:
                assert play.get("any_errors_fatal") is not True, "%s is listed as a read-only report" % source
                continue
            if play.get("any_errors_fatal") is not True:
                offenders.append("%s: play %r (hosts %s)" % (source.relative_to(REPO), play.get("name"), hosts))
    assert not offenders, "plays without any_errors_fatal: true:\n" + "\n".join(sorted(set(offenders)))


def test_survey_variables_are_known_to_the_collection(templates):
    """Every survey variable is a variable some role or playbook reads."""
    texts = []
    for pattern in ("roles/*/defaults/main.yml", "roles/*/meta/argument_specs.yml", "playbooks/*.yml"):
        texts.extend(p.read_text() for p in REPO.glob(pattern))
    corpus = "\n".join(texts)
    for name, template in templates.items():
        for variable in questions(template):
            assert re.search(r"\b%s\b" % re.escape(variable), corpus), "%s: %s is read nowhere" % (name, variable)


def test_credential_type_injects_env_only(rendered):
    objects = rendered[1]
    ctype = objects["credential_type"]
    assert ctype["kind"] == "cloud"
    fields = {f["id"]: f for f in ctype["inputs"]["fields"]}
    assert set(fields) == {"hf_token", "api_key"}
    assert all(f["secret"] is True for f in fields.values())
    # Environment variables only: extra_vars would put the values into the job's variables and events.
    assert set(ctype["injectors"]) == {"env"}
    assert ctype["injectors"]["env"] == {"HF_TOKEN": "{{ hf_token }}", "VLLM_API_KEY": "{{ api_key }}"}
    assert set(ctype["injectors"]["env"]) == set(SECRET_ENV)


def test_one_awx_inventory_per_shipped_inventory(rendered):
    objects = rendered[1]
    shipped = sorted(p.name for p in (REPO / "inventories").iterdir() if p.is_dir())
    assert objects["inventories"] == shipped
    assert "local" in shipped


def test_no_credential_attached_without_secrets(templates):
    """Rendered with neither HF_TOKEN nor VLLM_API_KEY set: no credential to attach."""
    for name, template in templates.items():
        assert template["credentials"] == [], name


def test_secrets_given_to_configure_attach_the_credential_and_stay_unwritten(tmp_path):
    """With the secrets, every template carries the credential and is bound to awx_inventory: it asks for no
    inventory and no limit at launch (a launcher could otherwise send the key and the token to a host of their own),
    and the workflows ask for neither either. The secrets are never written."""
    planted = canaries()
    proc = render_process(tmp_path, secret_env=planted, extra_vars={"awx_inventory": "spark4"})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    job_templates = json.loads((tmp_path / "job_templates.json").read_text())
    for template in job_templates:
        assert template["credentials"] == ["sparkfleet vLLM secrets"], template["name"]
        assert template["inventory"] == "sparkfleet vLLM / spark4", template["name"]
        assert template["ask_inventory_on_launch"] is False and template["ask_limit_on_launch"] is False, template["name"]
    for workflow in read_workflows(tmp_path):
        assert workflow["ask_inventory_on_launch"] is False and workflow["ask_limit_on_launch"] is False, workflow["name"]
    written = proc.stdout + proc.stderr + "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    for name, value in planted.items():
        assert value not in written, "%s leaked into the render output" % name


@pytest.mark.parametrize("extra, needle", [
    ({}, "awx_inventory is '' while the job templates carry"),
    ({"awx_inventory": "local"}, "awx_inventory is 'local'"),
    ({"awx_inventory": "spark9"}, "awx_inventory is 'spark9'"),
    ({"awx_inventory": "", "awx_machine_credential": "spark ssh"}, "spark ssh"),
], ids=["secrets-unbound", "local", "unknown", "machine-credential"])
def test_a_template_with_a_credential_must_be_bound_to_an_inventory(tmp_path, extra, needle):
    """Before: every template carried the secrets credential (and the Machine credential) and asked for the
    inventory at launch. Now configure.yml refuses that before it renders or creates anything, naming the fix."""
    proc = render_process(tmp_path, secret_env=canaries(), extra_vars=extra)
    text = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0 and needle in text and "Fix: set awx_inventory" in text, text[-3000:]
    assert not (tmp_path / "job_templates.json").exists()


def test_syntax_check():
    require(tool("ansible-playbook"), "ansible-playbook")
    run([tool("ansible-playbook"), "--syntax-check", "awx/configure.yml"])


class _PlaybookLoader(yaml.SafeLoader):
    """Reads a playbook's `!unsafe` strings as plain strings."""


_PlaybookLoader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def _awx_task(module):
    """The configure.yml task that calls awx.awx.<module>."""
    play = yaml.load((REPO / "awx/configure.yml").read_text(), Loader=_PlaybookLoader)[0]
    tasks = [t for task in play["tasks"] for t in task.get("block", [task])]
    return next(t["awx.awx.%s" % module] for t in tasks if "awx.awx.%s" % module in t)


def test_no_default_inventory_reaches_the_job_pod(templates):
    """Shipped as it is, no template has an inventory: a launch must name one, and `local` (localhost, which in
    AWX is the job's own pod) is never what an unattended launch deploys to."""
    for name, template in templates.items():
        assert template["inventory"] is None, "%s defaults to inventory %s" % (name, template["inventory"])
    assert "omit" in _awx_task("job_template")["inventory"]


def test_inventory_sync_keeps_admin_added_hosts(rendered):
    options = rendered[1]["inventory_source"]
    assert options["overwrite"] is False and options["overwrite_vars"] is False and options["update_on_launch"] is True
    source = _awx_task("inventory_source")
    for key in options:
        assert source[key] == "{{ __awx_inventory_source_options.%s }}" % key, key


def test_rotated_secrets_reach_awx(rendered):
    """update_secrets: true, so running configure.yml with a new HF_TOKEN or VLLM_API_KEY replaces the stored one."""
    assert rendered[1]["credential"]["update_secrets"] is True
    assert _awx_task("credential")["update_secrets"] == "{{ __awx_credential_options.update_secrets }}"


def test_escalation_is_the_playbooks_own(templates):
    """The templates that change hosts run plays that say become: true themselves; no template adds AWX's
    --become, which would escalate the controller-side plays inside the job pod as well."""
    changing = {"Deploy": True, "Swap model": True, "Stop": True, "Status": False, "Verify & benchmark": False}
    for name, template in templates.items():
        assert template["become_enabled"] is False, name
        escalating = [play for _source, play in _plays(REPO / template["playbook"]) if play.get("become") is True]
        assert bool(escalating) == changing[name], "%s: plays with become: true %s" % (name, escalating)


# The workflows (awx_workflows): nodes, edges, the templates they run, what they ask at launch.


def _children(workflow, relation):
    return {node["identifier"]: [child["identifier"] for child in node["related"].get(relation, [])]
            for node in workflow["workflow_nodes"]}


def test_every_issue_workflow_is_defined(workflows):
    assert set(WORKFLOWS) <= set(workflows), sorted(workflows)


def test_deploy_and_verify_runs_verify_only_after_a_successful_deploy(workflows):
    workflow = workflows["Deploy and verify"]
    assert [node["identifier"] for node in workflow["workflow_nodes"]] == ["Deploy", "Verify & benchmark"]
    assert _children(workflow, "success_nodes") == {"Deploy": ["Verify & benchmark"], "Verify & benchmark": []}
    # No failure path: AWX counts a failure (or always) child as handling the failure, and would call a
    # workflow whose Deploy failed successful.
    assert _children(workflow, "failure_nodes") == {"Deploy": [], "Verify & benchmark": []}
    assert not any("always_nodes" in node["related"] for node in workflow["workflow_nodes"])


def test_workflow_graphs_are_trees_of_their_own_nodes(workflows):
    """One root, every edge to a node of the same workflow, no node with two parents, no cycle: what AWX
    refuses (or, for a missing identifier, what the awx.awx module fails on half-way through)."""
    for name, workflow in workflows.items():
        identifiers = [node["identifier"] for node in workflow["workflow_nodes"]]
        assert len(identifiers) == len(set(identifiers)), "%s: repeated nodes %s" % (name, identifiers)
        edges = [(parent, child) for relation in ("success_nodes", "failure_nodes")
                 for parent, children in _children(workflow, relation).items() for child in children]
        assert {child for _parent, child in edges} <= set(identifiers), "%s: edges %s" % (name, edges)
        parents = [child for _parent, child in edges]
        assert len(parents) == len(set(parents)), "%s: a node with two parents in %s" % (name, edges)
        roots = [i for i in identifiers if i not in parents]
        assert len(roots) == 1, "%s: roots %s" % (name, roots)
        reached, frontier = set(), roots
        while frontier:
            reached.update(frontier)
            frontier = [child for parent, child in edges if parent in frontier and child not in reached]
        assert reached == set(identifiers), "%s: unreachable nodes (a cycle) %s" % (name, set(identifiers) - reached)


def test_workflow_nodes_run_the_defined_templates(workflows, templates, awx_vars):
    """Each node looks its job template up by the prefixed name configure.yml gives it, in the organization."""
    for name, workflow in workflows.items():
        data = next(w for w in awx_vars["awx_workflows"] if w["name"] == name)
        assert [node["identifier"] for node in workflow["workflow_nodes"]] == [n["template"] for n in data["nodes"]]
        for node in workflow["workflow_nodes"]:
            ujt = node["unified_job_template"]
            assert ujt["type"] == "job_template", (name, node)
            assert ujt["organization"] == {"name": awx_vars["awx_organization"]}, (name, node)
            assert ujt["name"] == "%s / %s" % (awx_vars["awx_name_prefix"], node["identifier"]), (name, node)
            assert node["identifier"] in templates, "%s: node %s runs no defined job template" % (name, node)
            assert templates[node["identifier"]]["name"] == ujt["name"], (name, node)


def test_workflow_launch_prompts(workflows, templates):
    """Templates have no inventory, so the workflow asks for it (and the limit) and hands it to its nodes; AWX
    does that only for templates that ask too. A node sets no prompt itself: AWX would then check all of
    them and refuse the node for its template's missing inventory."""
    for name, workflow in workflows.items():
        assert workflow["ask_inventory_on_launch"] is True, name
        assert workflow["ask_limit_on_launch"] is True, name
        assert workflow["ask_variables_on_launch"] is False, name
        assert workflow["allow_simultaneous"] is False, name
        assert "inventory" not in workflow and "extra_vars" not in workflow, name
        for node in workflow["workflow_nodes"]:
            assert set(node) == {"identifier", "unified_job_template", "related"}, (name, node)
            template = templates[node["identifier"]]
            assert template["ask_inventory_on_launch"] is True and template["ask_limit_on_launch"] is True, (name, node)


def test_workflow_survey_asks_each_node_question_once(workflows, templates):
    """AWX gives a workflow's survey answers to every node's job. The workflow asks the union of its
    nodes' questions, each as the node's own survey asks it, required where a node requires it."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    for name, workflow in workflows.items():
        node_templates = [templates[node["identifier"]] for node in workflow["workflow_nodes"]]
        expected = {}
        for template in node_templates:
            for variable, question in questions(template).items():
                seen = expected.setdefault(variable, dict(question))
                assert {k: v for k, v in seen.items() if k != "required"} == \
                    {k: v for k, v in question.items() if k != "required"}, (name, variable)
                seen["required"] = seen["required"] or question["required"]
        assert workflow["survey_enabled"] is bool(expected), name
        if not expected:
            assert workflow["survey_spec"] == {}, name
            continue
        errors = sorted(validator.iter_errors(workflow["survey_spec"]), key=str)
        assert not errors, "%s: %s" % (name, "; ".join(e.message for e in errors))
        assert list(questions(workflow)) == list(expected), name
        assert questions(workflow) == expected, name


def test_workflow_task_sends_the_rendered_definition(workflows):
    task = _awx_task("workflow_job_template")
    assert task["organization"] == "{{ awx_organization }}"
    assert "inventory" not in task
    for key in next(iter(workflows.values())):
        assert task[key] == "{{ item.%s }}" % key, key


def test_a_workflow_of_unknown_templates_is_refused(tmp_path):
    """A node naming no job template, or an edge to no node, fails configure.yml before anything is sent."""
    for nodes in ([{"template": "Deploy", "success": ["Verify"]}, {"template": "Verify"}],
                  [{"template": "Deploy", "success": ["Status"]}],
                  [{"template": "Deploy"}, {"template": "Deploy"}]):
        proc = render_process(tmp_path, extra_vars={"awx_workflows": [
            {"name": "Broken", "description": "", "nodes": nodes}]})
        assert proc.returncode != 0, nodes
        assert "Workflow Broken: each node names a job template" in proc.stdout, proc.stdout[-3000:]


# docs/awx.md names what awx/vars/main.yml defines, so the two cannot disagree again.


def _doc_table(first_header):
    """The rows (lists of cells) of the docs/awx.md table whose header starts with `first_header`."""
    lines = (REPO / "docs/awx.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| %s |" % first_header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _survey_cell(template):
    """The survey as docs/awx.md lists it: question names without their parenthesis, `(required)` marked."""
    labels = ["%s%s" % (q["question_name"].split(" (")[0], " (required)" if q["required"] else "")
              for q in questions(template).values()]
    return ", ".join(labels) or "none"


def test_docs_name_every_template_with_its_playbook(awx_vars, templates):
    rows = {row[0]: row for row in _doc_table("Job template")}
    defined = {t["name"]: t for t in awx_vars["awx_job_templates"]}
    assert set(rows) == set(defined), "docs/awx.md lists %s, awx/vars/main.yml defines %s" % (sorted(rows), sorted(defined))
    for name, template in defined.items():
        _name, playbook, does, survey, changes = rows[name]
        assert playbook == "`%s`" % template["playbook"], name
        assert does == template["description"], name
        assert survey == _survey_cell(templates[name]), name
        escalates = any(play.get("become") is True for _source, play in _plays(REPO / template["playbook"]))
        assert changes.startswith("yes") == escalates, "%s: docs say %r, plays with become: true: %s" % (name, changes, escalates)


def test_docs_name_every_workflow_with_its_nodes(awx_vars, workflows):
    rows = {row[0]: row for row in _doc_table("Workflow")}
    defined = {w["name"]: w for w in awx_vars["awx_workflows"]}
    assert set(rows) == set(defined), "docs/awx.md lists %s, awx/vars/main.yml defines %s" % (sorted(rows), sorted(defined))
    playbooks = {t["name"]: t["playbook"] for t in awx_vars["awx_job_templates"]}
    for name, workflow in defined.items():
        _name, runs, does, survey = rows[name]
        for node in workflow["nodes"]:
            assert "%s (`%s`)" % (node["template"], playbooks[node["template"]]) in runs, (name, node["template"])
            for relation in ("success", "failure"):
                for child in node.get(relation, []):
                    assert "on %s %s" % (relation, child) in runs, (name, relation, child)
        if not any(node.get("failure") for node in workflow["nodes"]):
            assert "no failure path" in runs, name
        assert does == workflow["description"], name
        assert survey == _survey_cell(workflows[name]), name


def test_docs_settings_table_shows_the_defaults_of_awx_vars(awx_vars):
    """The "Settings you are likely to change" table names variables of awx/vars/main.yml with their defaults
    there: a changed default (the release tag, the EE image) cannot leave the page behind."""
    rows = _doc_table("Variable")
    assert rows, "docs/awx.md has no settings table"
    for name, default, _meaning in rows:
        name = name.strip("`")
        assert name in awx_vars, "docs/awx.md documents %s, which awx/vars/main.yml does not define" % name
        value = awx_vars[name]
        if isinstance(value, str):
            shown = "" if default == "empty" else default.strip("`")
            assert shown == value, "docs/awx.md: %s defaults to %r, awx/vars/main.yml to %r" % (name, default, value)
