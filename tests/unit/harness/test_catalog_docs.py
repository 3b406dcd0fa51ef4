"""tests/harness/catalog_docs.py: docs/catalog.md is rendered from data/catalog.yml and kept in step with it."""
import os

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from conftest import REPO, load_harness_module

catalog_docs = load_harness_module("catalog_docs.py")


def test_docs_catalog_md_is_generated_from_the_catalog():
    catalog = cat.load_catalog()
    path = REPO / "docs/catalog.md"
    rendered = catalog_docs.render_markdown(catalog)
    if os.environ.get("REGENERATE_DOCS") == "1":
        path.write_text(rendered, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == rendered, (
        "docs/catalog.md is stale: python tests/harness/catalog_docs.py regenerates it")
    for figure in ("120.3", "4,247 / 16", "271.09", "z-lab/gemma4-12B-it-DFlash", "607,331"):
        assert figure in rendered
    for section in ("## Objectives", "## Benchmark modes", "### Known smoke-test misses", "## Start-up failure diagnostics"):
        assert section in rendered, section
    for text in ("`reverse_necessary`", "unless drafters dflash", "when profiles dgx_spark", "`mm_token_budget_floor`",
                 "RPC call to sample_tokens timed out", "`aggregate_8_tok_s`"):
        assert text in rendered, text


def test_the_command_line_writes_the_page(tmp_path, monkeypatch):
    page = tmp_path / "catalog.md"
    monkeypatch.setattr(catalog_docs, "PAGE", page)
    monkeypatch.setattr(catalog_docs, "REPO", tmp_path)
    assert catalog_docs.main() == 0
    assert page.read_text(encoding="utf-8") == (REPO / "docs/catalog.md").read_text(encoding="utf-8")
