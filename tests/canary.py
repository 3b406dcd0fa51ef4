"""Secrets canaries shared by the tiers that deploy with a key: recognisable values planted the operators' way.

The real key and token are given only as the variables vllm_api_key and vllm_hf_token in an Ansible Vault file;
the controller's environment holds *different* values (decoys) for VLLM_API_KEY and HF_TOKEN, so a runtime that
reads the environment instead of the secrets contract is caught. Each value starts with a unique mark that any
encoding of it (JSON, YAML, shell quoting) still shows whole; the key carries the printable characters env
files, shells and Compose treat specially, so a server that accepts it proves the round trip.
"""
import contextlib
import pathlib
import secrets
import subprocess
import urllib.error
import urllib.request

import yaml

SPECIAL = "$y'q\"\\#x`$(id)${HOME}"


class Canary:
    def __init__(self, name):
        token = secrets.token_hex(8)
        self.hf_mark, self.key_mark = "hf_CANARY%s%s" % (name, token), "sk-CANARY%s%s" % (name, token)
        self.hf, self.key = self.hf_mark, self.key_mark + SPECIAL
        self.hf_decoy, self.key_decoy = "hf_DECOY%s%s" % (name, token), "sk-DECOY%s%s" % (name, token)
        self.marks = (("HF_TOKEN", self.hf_mark), ("VLLM_API_KEY", self.key_mark),
                      ("HF_TOKEN decoy", self.hf_decoy), ("VLLM_API_KEY decoy", self.key_decoy))

    def leaks(self, text):
        """The names of the planted values that appear in ``text``."""
        return [name for name, mark in self.marks if mark in text]

    def decoy_env(self):
        return {"HF_TOKEN": self.hf_decoy, "VLLM_API_KEY": self.key_decoy}

    def vault(self, work, ansible_vault):
        """An encrypted vars file with the real values; the ansible-playbook arguments that read it."""
        work = pathlib.Path(work)
        vault_file, password_file = work / "canary-secrets.yml", work / "canary-vault-password"
        vault_file.write_text(yaml.safe_dump({"vllm_api_key": self.key, "vllm_hf_token": self.hf}))
        password_file.write_text(secrets.token_hex(16) + "\n")
        password_file.chmod(0o600)
        subprocess.run([ansible_vault, "encrypt", "--vault-password-file", str(password_file), str(vault_file)],
                       check=True, capture_output=True, text=True)
        assert not self.leaks(vault_file.read_text()), "the vars file is not encrypted"
        return ["--vault-password-file", str(password_file), "-e", "@%s" % vault_file]


def http_status(url, api_key=None, timeout=10):
    """The HTTP status ``url`` answers (with ``Authorization: Bearer api_key`` when given); None when nothing answers."""
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + api_key} if api_key else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the tests' own servers
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return None


def command_lines():
    """Every process's argv as `ps -eo args` prints it, one per line, read from /proc."""
    lines = []
    for cmdline in pathlib.Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            lines.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace").strip())
    return "\n".join(line for line in lines if line)


def run_sampled(cmd, work, sample, interval=0.5, **popen):
    """Run ``cmd`` to its end, calling ``sample()`` every ``interval`` seconds meanwhile (short-lived commands,
    a download or a module's helper, live for seconds). Returns (returncode, stdout, stderr, samples)."""
    work = pathlib.Path(work)
    out_file, err_file = work / "stdout.txt", work / "stderr.txt"
    samples = []
    with out_file.open("w") as out, err_file.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, **popen)  # noqa: S603 - the test's own
        try:
            while proc.poll() is None:
                samples.append(sample())
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=interval)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return proc.returncode, out_file.read_text(errors="replace"), err_file.read_text(errors="replace"), samples
