"""Preflight's GPU checks on a card another workload shares: the warning names each process and its memory, and the
RTX 5090 (the notes: "the card dedicated to the model") is told to stop them.

Stand-in, named as such: there is no GPU here. A fake ``nvidia-smi`` on the module's PATH replays fixtures:
``--query-gpu`` answers with the constructed RTX 5090 (or RTX PRO 6000) line of tests/unit/fixtures, and ``-q -x``
with the real XML an H200 printed while a PyTorch process held 20,998 MiB (tests/unit/fixtures/nvidia-h200-busy),
the CSV's bus id set to the XML's so gpu_facts joins the two as it does on a real host. Everything after the
``nvidia-smi`` call is the real module, role and playbook.
"""

import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner
from conftest import REPO, ansible_env, ansible_playbook, keyless

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


# --- unified memory (DGX Spark): what is available to the server, and who holds the rest --------------------------

GB10 = FIXTURES / "nvidia-gb10-constructed"
HOG_GPU_MIB = 90000


@pytest.fixture()
def memory_hog():
    """A real process holding 256 MiB, named sf-memhog (its comm), that the stand-in nvidia-smi lists as holding
    90,000 MiB of the GB10's pool, as GB10's nvidia-smi lists a CUDA process: /proc gives its name and resident size,
    nvidia-smi its GPU memory."""
    hog = subprocess.Popen([sys.executable, "-c", "open('/proc/self/comm', 'w').write('sf-memhog'); "
                            "b = b'x' * (256 << 20); print('ready', flush=True); import time; time.sleep(600)"],
                           stdout=subprocess.PIPE, text=True)
    assert hog.stdout.readline().strip() == "ready"
    yield hog.pid
    hog.kill()
    hog.wait()


def preflight_spark(tmp_path, hog_pid, **extra):
    """preflight.yml's GPU checks as profile dgx_spark, with no plan, on this host behind a GB10 nvidia-smi (the
    constructed fixtures; its XML lists the hog)."""
    csv = (GB10 / "nvidia-smi-query.csv").read_text()
    xml = (GB10 / "nvidia-smi-q.xml").read_text().replace("</fb_memory_usage>", (
        "</fb_memory_usage>\n\t\t<processes><process_info><pid>%d</pid><type>C</type><process_name>sf-memhog"
        "</process_name><used_memory>%d MiB</used_memory></process_info></processes>") % (hog_pid, HOG_GPU_MIB))
    (tmp_path / "query.csv").write_text(csv)
    (tmp_path / "q.xml").write_text(xml)
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n# Stand-in nvidia-smi (tests/integration/test_preflight_gpu.py): replays fixtures.\n"
                   'case "$1" in --query-gpu=*) cat %s ;; -q) cat %s ;; *) exit 6 ;; esac\n' % (
                       shlex.quote(str(tmp_path / "query.csv")), shlex.quote(str(tmp_path / "q.xml"))))
    smi.chmod(0o755)
    env = ansible_env()
    env["PATH"] = "%s:%s" % (tmp_path, env["PATH"])
    return ansible_playbook("playbooks/preflight.yml", dict({"preflight_profile": "dgx_spark",
                                                              "ansible_python_interpreter": sys.executable}, **extra),
                            env=env, args=["--tags", "preflight_gpu"], check=False, secrets={})


def memory_shortfall(run):
    return [part.split("' - '")[0] for part in " ".join(run.stdout.split()).split("WARNING: ")[1:]
            if "of unified memory is available to the server" in part]


def test_unified_memory_short_of_the_server_is_named_with_its_largest_holders(tmp_path, memory_hog):
    """This 24 GiB host is far below what a Spark's server may take (the dgx_spark profile's 120 GiB less its 12 GiB
    host reserve): preflight warns with the figures it read from /proc and the largest holder first, the hog, whose
    size is its resident memory plus the GPU memory nvidia-smi gave it; with preflight_strict_memory it refuses with the
    same words."""
    run = preflight_spark(tmp_path, memory_hog)
    assert run.returncode == 0, run.stdout[-3000:]
    warned = memory_shortfall(run)
    assert len(warned) == 1, run.stdout[-3000:]
    text = warned[0]
    assert "below the 110592 MiB of the ceiling of the dgx_spark profile for the server (no plan yet)" in text, text
    hog = re.search(r"the largest holders: pid (\d+) \(sf-memhog, (\d+) MiB\)", text)
    assert hog and int(hog.group(1)) == memory_hog and HOG_GPU_MIB + 256 <= int(hog.group(2)) < HOG_GPU_MIB + 400, text
    available = int(re.search(r"\(MemAvailable (\d+) MiB", text).group(1))
    total = int(pathlib.Path("/proc/meminfo").read_text().split()[1]) // 1024
    assert 0 < available < total, (available, total)
    assert "preflight_strict_memory: true refuses" in text, text

    # Refused under preflight_strict_memory, against what a real plan for one Spark needs (its planned footprint, the
    # memory guard's memory_high_bytes: the pool at the catalog's utilization and what the engine holds outside it),
    # not the profile's ceiling.
    plan = planner.plan(cat.load_catalog(None), keyless({"profile": "dgx_spark"}))
    need = -(-plan["memory_guard"]["memory_high_bytes"] // (1 << 20))
    refused = preflight_spark(tmp_path, memory_hog, preflight_strict_memory=True, vllm_plan=plan)
    words = " ".join(refused.stdout.split())
    assert refused.returncode != 0 and "preflight_strict_memory is true" in words, refused.stdout[-3000:]
    assert "below the %d MiB of the memory budget of the plan" % need in words, refused.stdout[-3000:]
    assert "(sf-memhog, " in words, refused.stdout[-3000:]


def test_unified_memory_that_covers_the_server_draws_no_warning(tmp_path, memory_hog):
    """The control: the same host against a need it covers (preflight_memory_min_available_gib 0.5) passes quietly."""
    run = preflight_spark(tmp_path, memory_hog, preflight_memory_min_available_gib=0.5)
    assert run.returncode == 0, run.stdout[-3000:]
    assert passed(run, "dgx_spark"), run.stdout[-3000:]
    assert not memory_shortfall(run), run.stdout[-3000:]
