#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apt_signing_key
short_description: Fetch an apt repository's signing key and keep it only when its fingerprints are pinned
version_added: 2.0.0
description:
  - Downloads the OpenPGP key file a vendor publishes for its apt repository (Docker's C(gpg), NVIDIA's C(gpgkey)
    or C(3bf863cc.pub)) and reads the fingerprint of every primary key in it, armored or binary, without gpg.
  - Writes the file to O(dest) (root, mode 0644; a missing directory is created, mode 0755) only when it holds at
    least one key and every primary key in it is in O(fingerprints). An apt source's C(Signed-By) file trusts
    every key it holds, so one extra key is refused too.
  - Refuses before writing anything when the key is not the pinned one, naming O(pin_variable), the fingerprints
    found and the ones pinned. O(dest) is then left as it was.
  - The file is fetched on every run (a read, also in check mode), so a key the mirror replaced is noticed; O(dest)
    changes only when the content differs.
  - Give O(dest) to M(ansible.builtin.deb822_repository) as C(signed_by).
author:
  - sparkfleet.vllm contributors (@sparkfleet)
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
attributes:
  check_mode:
    support: full
    details: Fetches and checks the key, reports whether O(dest) would change, and writes nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  url:
    description:
      - Where the repository's key file is served (the vendor's URL, or the same path on a mirror).
    type: str
    required: true
  dest:
    description:
      - The keyring file to write, such as C(/etc/apt/keyrings/docker.asc).
    type: path
    required: true
  fingerprints:
    description:
      - The primary-key fingerprints to trust, as the vendor publishes them (spaces and case do not matter).
    type: list
    elements: str
    required: true
  pin_variable:
    description:
      - The variable that sets O(fingerprints), named in the refusal so the operator knows what to change.
    type: str
    default: fingerprints
  validate_certs:
    description:
      - Whether to verify the server's TLS certificate.
    type: bool
    default: true
  timeout:
    description:
      - Seconds to wait for the server.
    type: int
    default: 30
notes:
  - The fingerprint is computed as RFC 4880 (version 4 keys) and RFC 9580 (versions 5 and 6) define it.
"""

EXAMPLES = r"""
- name: Fetch Docker's repository key and keep it only if it is Docker's
  sparkfleet.vllm.apt_signing_key:
    url: https://download.docker.com/linux/debian/gpg
    dest: /etc/apt/keyrings/docker.asc
    fingerprints: [9DC8 5822 9FC7 DD38 854A E2D8 8D81 803C 0EBF CD88]
    pin_variable: docker_apt_key_fingerprint
"""

RETURN = r"""
fingerprints:
  description: The primary-key fingerprints found in the served file.
  returned: success
  type: list
  elements: str
  sample: [9DC858229FC7DD38854AE2D88D81803C0EBFCD88]
dest:
  description: The keyring file.
  returned: always
  type: str
  sample: /etc/apt/keyrings/docker.asc
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.sparkfleet.vllm.plugins.module_utils import openpgp


def current(dest):
    """The keyring's content, or None where there is none yet."""
    if not os.path.isfile(dest):
        return None
    with open(dest, "rb") as handle:
        return handle.read()


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "dest": {"type": "path", "required": True},
            "fingerprints": {"type": "list", "elements": "str", "required": True},
            "pin_variable": {"type": "str", "default": "fingerprints"},
            "validate_certs": {"type": "bool", "default": True},
            "timeout": {"type": "int", "default": 30},
        },
        supports_check_mode=True,
    )
    url, dest, pin = module.params["url"], module.params["dest"], module.params["pin_variable"]
    if not [f for f in module.params["fingerprints"] if openpgp.normalize(f)]:
        module.fail_json(msg="%s is empty: set it to the fingerprint the vendor publishes for %s" % (pin, url), dest=dest)
    response, info = fetch_url(module, url, timeout=module.params["timeout"])
    if info.get("status") != 200 or response is None:
        module.fail_json(msg="Could not fetch the signing key %s: HTTP %s %s" % (url, info.get("status"), info.get("msg")),
                         dest=dest)
    content = response.read()
    try:
        found, problem = openpgp.check_pins(content, module.params["fingerprints"])
    except openpgp.KeyFileError as exc:
        module.fail_json(msg="%s is not an OpenPGP public key file (%s); %s was left as it was" % (url, exc, dest),
                         dest=dest)
    if problem:
        module.fail_json(
            msg="Refusing the signing key at %s: it %s. %s was left as it was. If the vendor rotated its key, compare "
                "the new fingerprint with the one it publishes, then set %s to it." % (url, problem, dest, pin),
            fingerprints=found, dest=dest)
    changed = current(dest) != content
    if changed and not module.check_mode:
        directory = os.path.dirname(dest) or "."
        if not os.path.isdir(directory):
            # As deb822_repository does for /etc/apt/keyrings: the keyring directory, root's, 0755.
            os.makedirs(directory, 0o755)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".apt-signing-key-")
        with os.fdopen(handle, "wb") as out:
            out.write(content)
        module.atomic_move(temporary, dest)
    if os.path.exists(dest):  # in check mode these only report a difference
        changed = module.set_owner_if_different(dest, "root", changed)
        changed = module.set_group_if_different(dest, "root", changed)
        changed = module.set_mode_if_different(dest, "0644", changed)
    module.exit_json(changed=changed, fingerprints=found, dest=dest)


if __name__ == "__main__":
    main()
