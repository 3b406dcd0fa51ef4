"""Preflight's GPU checks on a card another workload shares: the warning names each process and its memory, and the
RTX 5090 (the notes: "the card dedicated to the model") is told to stop them.

Stand-in, named as such: there is no GPU here. A fake ``nvidia-smi`` on the module's PATH replays fixtures:
``--query-gpu`` answers with the constructed RTX 5090 (or RTX PRO 6000) line of tests/unit/fixtures, and ``-q -x``
with the real XML an H200 printed while a PyTorch process held 20,998 MiB (tests/unit/fixtures/nvidia-h200-busy),
the CSV's bus id set to the XML's so gpu_facts joins the two as it does on a real host. Everything after the
``nvidia-smi`` call is the real module, role and playbook.
"""

import pathlib
import shlex
import sys

import pytest

from conftest import REPO, ansible_env, ansible_playbook

FIXTURES = REPO / "tests/unit/fixtures"
BUSY_XML = FIXTURES / "nvidia-h200-busy/nvidia-smi-q-with-process.xml"
CSV = {
    "rtx_5090": FIXTURES / "nvidia-rtx-5090-constructed/nvidia-smi-query.csv",
    "rtx_pro_6000": FIXTURES / "nvidia-rtx-pro-6000-constructed/nvidia-smi-query.csv",
}
XML_BUS_ID = "00000000:00:06.0"  # the H200's <gpu id=...> in BUSY_XML


def fake_nvidia_smi(bin_dir, profile, busy=True):
    """An ``nvidia-smi`` that answers the two queries gpu_facts makes from the fixtures."""
    csv = CSV[profile].read_text().splitlines()
    header, line = csv[0], csv[1]
    fields = [f.strip() for f in line.split(",")]
    fields[3] = XML_BUS_ID
    query = pathlib.Path(bin_dir) / "query.csv"
    query.write_text("%s\n%s\n" % (header, ", ".join(fields)))
    xml = BUSY_XML.read_text()
    if not busy:
        start, end = xml.index("<processes>"), xml.index("</processes>") + len("</processes>")
        xml = xml[:start] + "<processes>\n\t\t</processes>" + xml[end:]
    smi_xml = pathlib.Path(bin_dir) / "q.xml"
    smi_xml.write_text(xml)
    smi = pathlib.Path(bin_dir) / "nvidia-smi"
    smi.write_text("#!/bin/sh\n# Stand-in nvidia-smi (tests/integration/test_preflight_gpu.py): replays fixtures.\n"
                   'case "$1" in --query-gpu=*) cat %s ;; -q) cat %s ;; *) exit 6 ;; esac\n' % (
                       shlex.quote(str(query)), shlex.quote(str(smi_xml))))
    smi.chmod(0o755)
    return bin_dir


def preflight_gpu(tmp_path, profile, busy=True):
    bin_dir = fake_nvidia_smi(tmp_path, profile, busy)
    env = ansible_env()
    env["PATH"] = "%s:%s" % (bin_dir, env["PATH"])
    return ansible_playbook("playbooks/preflight.yml", {"preflight_profile": profile, "ansible_python_interpreter": sys.executable},
                            env=env,
                            args=["--tags", "preflight_gpu"], check=False, secrets={})


def warnings_of(run):
    """The report's warnings about other GPU processes (the YAML callback wraps long lines: words re-joined)."""
    text = " ".join(run.stdout.split())
    return [part.split("' - '")[0] for part in text.split("WARNING: ")[1:] if part.startswith("other processes hold GPU memory")]


def passed(run, profile):
    return "preflight passed on localhost (profile %s)" % profile in " ".join(run.stdout.split())


def test_a_dedicated_card_shared_with_another_process_is_told_to_stop_it(tmp_path):
    run = preflight_gpu(tmp_path, "rtx_5090")
    assert run.returncode == 0, run.stdout[-3000:]
    assert passed(run, "rtx_5090"), run.stdout[-3000:]
    warned = warnings_of(run)
    assert len(warned) == 1, run.stdout[-3000:]
    assert "pid 441 (python3, 20998 MiB on GPU 0)" in warned[0], warned
    assert "The rtx_5090 profile needs the card to itself" in warned[0] and "stop them before serving" in warned[0], warned


def test_a_shared_card_of_a_profile_that_tolerates_it_is_told_to_lower_its_share(tmp_path):
    run = preflight_gpu(tmp_path, "rtx_pro_6000")
    assert run.returncode == 0, run.stdout[-3000:]
    warned = warnings_of(run)
    assert len(warned) == 1 and "pid 441 (python3, 20998 MiB on GPU 0)" in warned[0], run.stdout[-3000:]
    assert "lower vllm_gpu_memory_utilization to fit beside them" in warned[0], warned
    assert "needs the card to itself" not in warned[0], warned


@pytest.mark.parametrize("profile", sorted(CSV))
def test_a_card_nobody_else_uses_draws_no_warning(tmp_path, profile):
    run = preflight_gpu(tmp_path, profile, busy=False)
    assert run.returncode == 0, run.stdout[-3000:]
    assert passed(run, profile), run.stdout[-3000:]
    assert not warnings_of(run), run.stdout[-3000:]
