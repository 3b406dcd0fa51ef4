"""What the collection tarball may carry: installed content only.

Read by the build test (tests/integration/test_collection_build.py) and by `make release`
(tests/harness/release.sh), so the rule is written down once:

    python tests/tarball_contents.py build/sparkfleet-vllm-<version>.tar.gz [<version>]

prints the file count and every problem, and exits 1 when there is one.
"""
import fnmatch
import json
import sys
import tarfile

# Top-level entries of an installed collection. Anything else at the top is a checkout file that slipped
# past galaxy.yml's build_ignore.
INSTALLED_TOP = {
    "MANIFEST.json", "FILES.json", "README.md", "LICENSE", "CHANGELOG.md", "CHANGELOG.rst", "bindep.txt",
    "changelogs", "data", "docs", "inventories", "meta", "playbooks", "plugins", "requirements", "roles",
}

# Checkout-only paths (fnmatch patterns on the tarball's member names), each named so that a regression says
# which one came back.
CHECKOUT_ONLY = (
    "ansible.cfg", "Makefile", "ruff.toml", ".yamllint", ".ansible-lint", ".gitignore", "site.yml",
    "execution-environment.yml", "requirements/dev.txt", "requirements/vllm-cpu.txt",
    ".ci/*", ".collections/*", ".venv*", ".whl*", ".gl/*", ".git/*", "tests/*", "*/molecule/*", "molecule/*",
    "inventories/sim4/*", "inventories/local/*", "awx/*", "build/*", "context/*", "plans/*", "results/*",
    "changelogs/fragments/*", "*__pycache__*", "*.pyc", "*.tar.gz",
)

# What an installed collection must carry for Galaxy, ansible-builder and `ansible-playbook sparkfleet.vllm.site`.
REQUIRED = (
    "MANIFEST.json", "README.md", "LICENSE", "CHANGELOG.md", "changelogs/changelog.yaml", "meta/runtime.yml",
    "meta/execution-environment.yml", "requirements/ee-python.txt", "bindep.txt", "playbooks/site.yml",
    "data/catalog.yml",
)


def member_files(tarball):
    """The tarball's regular files (directories left out), as ansible-galaxy wrote them."""
    with tarfile.open(tarball) as archive:
        return sorted(member.name for member in archive.getmembers() if member.isfile())


def manifest_version(tarball):
    with tarfile.open(tarball) as archive:
        handle = archive.extractfile("MANIFEST.json")
        return json.load(handle)["collection_info"]["version"]


def problems(names, version=None, found_version=None):
    """Every way the file list `names` breaks the rule, as sentences; empty when it is installed content only."""
    found = []
    for name in names:
        top = name.split("/", 1)[0]
        if top not in INSTALLED_TOP:
            found.append("%s: not installed content (top-level %r)" % (name, top))
        for pattern in CHECKOUT_ONLY:
            if fnmatch.fnmatch(name, pattern):
                found.append("%s: checkout-only (%s)" % (name, pattern))
    found.extend("missing %s" % required for required in REQUIRED if required not in names)
    if version is not None and found_version != version:
        found.append("MANIFEST.json says version %s, expected %s" % (found_version, version))
    return found


def main(argv):
    tarball = argv[1]
    version = argv[2] if len(argv) > 2 else None
    names = member_files(tarball)
    found = problems(names, version, manifest_version(tarball))
    print("%s: %d files" % (tarball, len(names)))
    for problem in found:
        print("  " + problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
