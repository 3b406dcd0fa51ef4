"""The simulated hosts' operator login, from the test side (tests/harness/sim-host.sh sets it up).

Each simulated host — the operator test host and the four cluster nodes — has the ordinary login ``sparkop``
with password sudo, root logins refused; the sudo password is only in a vault file beside the host's SSH key.
These helpers are what the tiers share: the ansible-playbook arguments that read that vault, an SSH command as
a given login, and the PLAY RECAP read back.
"""
import re
import subprocess

LOGIN = "sparkop"


def vault_args(state):
    """-e @<state>/become.vault.yml --vault-password-file <state>/vault-pass: the become password, vaulted."""
    return ["-e", "@%s" % (state / "become.vault.yml"), "--vault-password-file", str(state / "vault-pass")]


def ssh_as(login, address, key, command, timeout=60):
    """``command`` over SSH as ``login`` with ``key``, never prompting (a refused login fails at once)."""
    return subprocess.run(["ssh", "-q", "-i", str(key), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                           "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5", "%s@%s" % (login, address),
                           command], capture_output=True, text=True, timeout=timeout, check=False)


def recap(output):
    """{host: {'ok': n, 'changed': n, 'unreachable': n, 'failed': n, ...}} from a PLAY RECAP."""
    return {host: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", body)}
            for host, body in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", output, re.M)}
