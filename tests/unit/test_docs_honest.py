"""README.md and the pages under docs/ name only what exists: their relative links reach a file (and a heading), the
repository paths they write in backticks exist, the role variables they name are declared or read by the collection,
the defaults their tables and parentheses give are the argument specs', the `make` targets they name exist, and the
lists a reader trusts to be whole (the README's plugins, verify-and-bench.md's log signatures, the records' index) are
whole.

Cheap on purpose: text in backticks and Markdown links, no rendering. docs/architecture.md's paths and map have their
own test (tests/unit/test_architecture.py); the README's absolute links theirs (test_collection_layout.py).
"""
import functools
import json
import re

import pytest
import yaml

from conftest import REPO

PAGES = [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md"))
PAGE_IDS = [str(p.relative_to(REPO)) for p in PAGES]
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir())
# A span starting with one of these is a repository path; so is any span with a "/" that ends in an extension.
REPO_TOPS = ("roles/", "playbooks/", "plugins/", "inventories/", "tests/", "docs/", "data/", "awx/", "meta/",
             "changelogs/", "requirements/")
# Inside a role: `defaults/main.yml` and the like name that file of a role (which one, the sentence says).
ROLE_DIRS = ("defaults", "vars", "tasks", "handlers", "templates", "files", "meta", "molecule")
# Prefixes of the role variables checked: each role's own, and the collection-wide vllm_* inputs.
VARIABLE = re.compile(r"(?<![\w./-])((?:vllm|%s)_[a-z0-9_]*[a-z0-9])(?![\w/-])"
                      % "|".join(re.escape(r) for r in sorted(ROLES, key=len, reverse=True)))

# Names and paths the docs write on purpose though the checkout has no such thing, each with why.
WRITTEN_BY_A_RUN = {  # git-ignored, so a fresh checkout lacks them
    "results/": "the reports and fault rows a run writes",
    "plans/": "the plan files playbooks/plan.yml writes",
    "tests/output/": "what the test tiers write",
    ".whl-gpu/": "the GPU kit's parts that tests/harness/device/gpu-kit.sh builds",
}
NOT_OURS = {  # look like paths, name something outside this repository
    "vllm/": "vLLM's own source tree (vllm/benchmarks/serve.py, ...) and its image (vllm/vllm-openai:<tag>)",
    "lib/endpoint_request_func.py": "vLLM's vllm/benchmarks/lib/, beside serve.py in the same sentence",
    "sample/logit_bias.py": "vLLM's V2 model runner, quoted from a traceback",
    "group/sparkfleet.vllm.api": "an action group as module_defaults names it",
    "registry.example.com/": "an example image name",
}
ALLOWED_PATHS = tuple(WRITTEN_BY_A_RUN) + tuple(NOT_OURS)
ALLOWED_VARIABLES = {
    # docs/security.md names the inputs the secrets contract replaced, so a reader of an old inventory learns they
    # are gone; the code must not have them back.
    "vllm_native_secret_values": "a removed secrets input, named as removed",
    "vllm_cluster_secrets": "a removed secrets input, named as removed",
    "vllm_compose_hf_token": "a removed secrets input, named as removed",
    "vllm_compose_api_key": "a removed secrets input, named as removed",
}


def prose(path):
    """A page's text without its fenced code blocks (shell sessions and YAML examples, not claims about the tree)."""
    return re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def spans(text):
    return re.findall(r"`([^`\n]+)`", text)


def anchors(markdown):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", markdown, re.M)}


def load(path):
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


@functools.cache
def argument_spec_options():
    options = {}
    for spec in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        options.update(load(spec)["argument_specs"]["main"]["options"])
    return options


def known_variables():
    """Declared (a role's defaults or argument specs), a plan input (a vllm_* the plan role reads into plan_*), or
    read by the collection's own code: playbooks (vllm_serve_hosts, vllm_bench_mode), role tasks and templates
    (facts such as vllm_plan), plugins (the secrets contract's vllm_api_key) and the shipped inventories."""
    names = set(argument_spec_options())
    for defaults in REPO.glob("roles/*/defaults/main.yml"):
        names.update(load(defaults))
    code = [REPO / "site.yml"] + sorted(REPO.glob("playbooks/**/*.yml")) + sorted(REPO.glob("inventories/**/*.yml"))
    code += sorted(p for p in REPO.glob("roles/**/*") if p.is_file() and p.suffix in (".yml", ".j2", ".py"))
    code += sorted(REPO.glob("plugins/**/*.py"))
    for path in code:
        names.update(re.findall(r"\b[a-z][a-z0-9_]*\b", path.read_text(encoding="utf-8")))
    return names


@pytest.fixture(scope="module")
def variables():
    return known_variables()


def path_claims(text):
    for span in spans(text):
        if " " in span or span.startswith(("/", "~", "$", "http", "-")) or re.search(r"[<>*{}$|]", span):
            continue
        path = span.split("::")[0].rstrip("/")
        if path.startswith(REPO_TOPS) or ("/" in path and re.search(r"\.[A-Za-z]\w*$", path)):
            yield span, path


def resolves(path, page):
    if (REPO / path).exists() or (page.parent / path).exists():
        return True
    head = path.split("/", 1)[0]
    return head in ROLE_DIRS and any((REPO / "roles" / role / path).exists() for role in ROLES)


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_relative_links_reach_a_file_and_a_heading(page):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(page)):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _hash, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append("%s: no such file" % target)
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            broken.append("%s: no such heading" % target)
    assert not broken, "%s: %s" % (page.relative_to(REPO), broken)


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_paths_in_backticks_exist(page):
    missing = sorted({span for span, path in path_claims(prose(page))
                      if not resolves(path, page) and not path.startswith(ALLOWED_PATHS)})
    assert not missing, "%s names paths that do not exist: %s" % (page.relative_to(REPO), missing)


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_role_variables_named_exist(page, variables):
    named = {m.group(1) for span in spans(prose(page)) for m in VARIABLE.finditer(span)}
    unknown = sorted(named - variables - set(ALLOWED_VARIABLES))
    assert not unknown, "%s names variables no role declares or reads: %s" % (page.relative_to(REPO), unknown)


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_make_targets_named_exist(page):
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", (REPO / "Makefile").read_text(encoding="utf-8"), re.M))
    named = {m for span in spans(prose(page)) for m in re.findall(r"^make ([a-z][a-z0-9-]*)", span)}
    assert not sorted(named - targets), "%s names make targets the Makefile lacks: %s" % (page.relative_to(REPO), sorted(named - targets))


def test_the_allow_lists_hold_only_what_is_absent(variables):
    """An allowed name that the code has after all, or an allowed path that exists, no longer needs its exception."""
    assert not sorted(set(ALLOWED_VARIABLES) & variables)
    assert not [p for p in NOT_OURS if (REPO / p).exists()]


def shown(value):
    """The ways a page writes a default: JSON, YAML flow, a bare comma list, true/false."""
    if isinstance(value, bool):
        return {str(value).lower()}
    if isinstance(value, list):
        items = ", ".join(str(v) for v in value)
        return {json.dumps(value), "[%s]" % items, items}
    return {str(value), json.dumps(value)}


def default_claims(text):
    """(variable, value as written) for a table row `| `name` | `value` ... |` and for `name` (N) in prose, where the
    value is a literal (a Jinja default is the plan's or another role's, and says so in words)."""
    for name, value in re.findall(r"^\| `([a-z0-9_]+)` \| `([^`]*)`", text, re.M):
        yield name, value
    for name, value in re.findall(r"`([a-z0-9_]+)` \((\d+|true|false)\)", text):
        yield name, value


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_defaults_given_are_the_argument_specs(page):
    options = argument_spec_options()
    wrong = []
    for name, value in default_claims(prose(page)):
        if name not in options or "{{" in str(options[name].get("default")):
            continue
        if value not in shown(options[name].get("default")):
            wrong.append("%s: page %r, argument_specs %r" % (name, value, options[name].get("default")))
    assert not wrong, "%s: %s" % (page.relative_to(REPO), wrong)


def test_the_readme_names_every_plugin():
    """The README's Contents paragraph is where Galaxy readers learn the plugins: every module, lookup and filter."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    listed = readme[readme.index("\nModules:"):].split("\n\n", 1)[0]
    names = [p.stem for kind in ("modules", "lookup") for p in (REPO / "plugins" / kind).glob("*.py") if p.stem != "__init__"]
    names += [p.stem for p in (REPO / "plugins/filter").glob("*.yml")]  # a filter's documentation file is named for it
    missing = sorted(n for n in names if "`%s`" % n not in listed)
    assert not missing, "README.md's Contents does not name %s" % missing


def test_verify_and_bench_lists_every_log_signature():
    ids = [d["id"] for d in load(REPO / "data/catalog.yml")["diagnostics"]]
    page = (REPO / "docs/verify-and-bench.md").read_text(encoding="utf-8")
    missing = [i for i in ids if "| `%s` |" % i not in page]
    assert not missing, "docs/verify-and-bench.md's signature table lacks %s" % missing


def test_every_record_is_dated_and_indexed():
    records = REPO / "docs/records"
    index = (records / "README.md").read_text(encoding="utf-8")
    files = sorted(p.name for p in records.glob("*.md") if p.name != "README.md")
    assert files, "docs/records/ holds no record"
    undated = [f for f in files if not re.match(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md$", f)]
    assert not undated, "records are named <date>-<subject>.md: %s" % undated
    unlisted = [f for f in files if "](%s)" % f not in index]
    assert not unlisted, "docs/records/README.md does not list %s" % unlisted
