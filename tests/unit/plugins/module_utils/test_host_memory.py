"""plugins/module_utils/host_memory.py: available memory and its largest holders, over /proc files captured on this
2-core Debian 12 machine while `make test` served the tiny stand-in (tests/unit/fixtures/proc-debian12-2core)."""
import shutil

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import host_memory
from conftest import REPO

PROC = REPO / "tests/unit/fixtures/proc-debian12-2core"


def cmdline(name):
    return (PROC / ("cmdline-" + name)).read_bytes().decode()


def test_meminfo_gives_total_and_available_in_mib():
    memory = host_memory.parse_meminfo((PROC / "meminfo").read_text())
    assert memory == {"total_mib": 24683772 // 1024, "available_mib": 22094716 // 1024}
    assert host_memory.parse_meminfo("MemTotal: 1024 kB\n") == {"total_mib": 1, "available_mib": None}


@pytest.mark.parametrize("name,expected", [
    ("api-server", ("python", 714436)),
    ("engine-core", ("VLLM::EngineCor", 4941388)),
    ("cat", ("cat", 1716)),
    ("kthreadd", ("kthreadd", 0)),  # a kernel thread has no VmRSS
])
def test_status_gives_the_name_and_resident_size(name, expected):
    assert host_memory.parse_status((PROC / ("status-" + name)).read_text()) == expected


@pytest.mark.parametrize("name,vllm", [("api-server", True), ("engine-core", True), ("ray-head", False)])
def test_a_vllm_process_is_told_apart_by_its_command_line(name, vllm):
    """The API server (python -m vllm.entrypoints...) and the engine vLLM titled are vLLM's; Ray, started from a venv
    whose path holds "vllm", is not."""
    assert host_memory.is_vllm(cmdline(name)) is vllm


@pytest.mark.parametrize("words,vllm", [
    (["/opt/vllm/venv/bin/vllm", "serve", "unsloth/gemma-4-31B-it-NVFP4"], True),
    (["/opt/venv/bin/python", "-c", "from vllm.entrypoints.cli.main import main; main()", "serve", "m"], True),
    (["VLLM::Worker_TP1"], True),
    (["/usr/bin/python3", "/srv/tools/vllm-report.py"], False),
    ([], False),
])
def test_other_spellings_of_a_vllm_server(words, vllm):
    assert host_memory.is_vllm("\0".join(words)) is vllm


def test_holders_add_gpu_memory_and_sort_largest_first():
    processes = [(10, "python", 714436, True), (11, "VLLM::EngineCor", 4941388, True), (12, "sshd", 8000, False),
                 (13, "python3", 200 * 1024, False)]
    gpu = [{"pid": 13, "used_memory_mib": 90000}, {"pid": 99, "used_memory_mib": 5}, {"name": "no pid"}]
    rows = host_memory.holders(processes, gpu, count=3)
    assert rows == [{"pid": 13, "name": "python3", "mib": 90200, "vllm": False},
                    {"pid": 11, "name": "VLLM::EngineCor", "mib": 4825, "vllm": True},
                    {"pid": 10, "name": "python", "mib": 697, "vllm": True}]


def test_a_running_vllm_counts_as_available_to_the_next_start():
    processes = [(10, "python", 714436, True), (11, "VLLM::EngineCor", 4941388, True), (12, "sshd", 8000, False)]
    facts = host_memory.summary((PROC / "meminfo").read_text(), processes, [{"pid": 11, "used_memory_mib": 1000}])
    assert facts["vllm_mib"] == 697 + 4825 + 1000
    assert facts["available_for_server_mib"] == 22094716 // 1024 + 697 + 4825 + 1000
    assert [h["pid"] for h in facts["holders"]] == [11, 10, 12]


def test_a_proc_tree_is_read_as_the_module_reads_it(tmp_path):
    """read_host_memory over a /proc laid out like the real one: pids as folders, a vanished pid skipped."""
    (tmp_path / "meminfo").write_text((PROC / "meminfo").read_text())
    for pid, name in ((12500, "api-server"), (12962, "engine-core")):
        (tmp_path / str(pid)).mkdir()
        shutil.copy(PROC / ("status-" + name), tmp_path / str(pid) / "status")
        shutil.copy(PROC / ("cmdline-" + name), tmp_path / str(pid) / "cmdline")
    (tmp_path / "4242").mkdir()  # exited between the listing and the read: no status
    (tmp_path / "self").mkdir()
    facts = host_memory.read_host_memory(str(tmp_path))
    assert facts["holders"] == [{"pid": 12962, "name": "VLLM::EngineCor", "mib": 4825, "vllm": True},
                                {"pid": 12500, "name": "python", "mib": 697, "vllm": True}]
    assert facts["vllm_mib"] == 4825 + 697 and facts["total_mib"] == 24683772 // 1024
