"""The native runtime's launcher (roles/vllm_native/templates/launch.j2), rendered with the role's own defaults and
vars and run by bash: a plan that names secrets does not start without its secrets file.

Before, the launcher sourced the file only if it existed, so a missing file (a disk restored without /etc, a
hand-edited host) started vLLM without its API key, open to anyone who reached the port. The command it runs here is
`/bin/echo served` (the launcher's own logic is what is under test, not vLLM); everything else is the role's.
"""
import subprocess

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from conftest import REPO


def launcher(tmp_path, secret_env):
    loader = DataLoader()
    variables = {}
    for name in ("defaults/main.yml", "vars/main.yml"):
        variables.update(loader.load_from_file(str(REPO / "roles/vllm_native" / name), trusted_as_template=True))
    variables.update(
        vllm_plan={"argv": ["served"], "entrypoint": ["vllm", "serve"], "secret_env": secret_env},
        vllm_native_command_prefix=["/bin/echo"], vllm_native_config_dir=str(tmp_path), vllm_native_home=str(tmp_path),
        vllm_native_log_file=str(tmp_path / "serve.log"), vllm_native_user="root", vllm_native_group="root",
        vllm_native_service_name="vllm-serve-test", ansible_managed="test",
        # Set by the role's preflight from PID 1; start-stop-daemon's branch writes to the log file only.
        __vllm_native_manager="start-stop-daemon")
    text = Templar(loader=loader, variables=variables).template(
        trust_as_template((REPO / "roles/vllm_native/templates/launch.j2").read_text()))
    path = tmp_path / "launch"
    path.write_text(text)
    path.chmod(0o755)
    (tmp_path / "serve.env").write_text("SPARKFLEET_TEST=1\n")
    return path


def test_a_plan_with_secrets_does_not_start_without_its_secrets_file(tmp_path):
    path = launcher(tmp_path, ["VLLM_API_KEY"])
    missing = subprocess.run([str(path)], capture_output=True, text=True, timeout=60, check=False)
    log = (tmp_path / "serve.log").read_text()
    assert missing.returncode == 78, (missing.returncode, missing.stderr, log)
    expected = "refusing to start vllm-serve-test: its secrets file %s is missing (the plan names VLLM_API_KEY)" % (
        tmp_path / "secret.env")
    assert expected in missing.stderr and expected in log, (missing.stderr, log)
    assert "served" not in log, "vLLM's command ran without its key"
    (tmp_path / "secret.env").write_text('VLLM_API_KEY="sk-launcher-test-0123"\n')
    started = subprocess.run([str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert started.returncode == 0 and (tmp_path / "serve.log").read_text().endswith("served\n"), started.stderr


def test_a_plan_without_secrets_starts_without_the_file(tmp_path):
    started = subprocess.run([str(launcher(tmp_path, []))], capture_output=True, text=True, timeout=60, check=False)
    assert started.returncode == 0 and (tmp_path / "serve.log").read_text().endswith("served\n"), started.stderr
