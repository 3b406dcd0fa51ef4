# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: catalog
author:
  - sparkfleet.vllm contributors (@sparkfleet)
version_added: 1.0.0
short_description: Read the sparkfleet.vllm catalog of models, drafters, hardware, releases and baselines
description:
  - Returns the collection's catalog (C(data/catalog.yml)), or the value at each dotted key given, for
    playbooks, templates and AWX surveys. The catalog is the single source of truth; read it through this
    lookup instead of copying figures.
  - Integer path segments also select integer keys and list items (V(sweeps.concurrency.rows.0.cells.64)).
options:
  _terms:
    description:
      - Dotted keys into the catalog (V(models), V(models.31b.max_context)). None returns the whole catalog.
    type: list
    elements: str
    required: false
  path:
    description:
      - Catalog file to read instead of the collection's.
    type: path
  model:
    description:
      - Instead of keys, resolve this model name the way the planner does (short name, checkpoint id, served or
        display name, any case) and return its catalog entry with its short name added as C(short). An unknown
        name fails with the catalog's names and the variable to set.
    type: str
    version_added: 2.0.0
  runtime:
    description:
      - With O(model), the entry also carries C(disk), the disk that model needs on this runtime (V(compose) or
        V(native)) as the planner sizes it (C(weights_gib), C(runtime_gib)), before a release or a drafter is chosen;
        a plan's own C(disk) adds those.
    type: str
    version_added: 2.0.0
"""

EXAMPLES = r"""
- name: List the model short names for a survey
  ansible.builtin.debug:
    msg: "{{ lookup('sparkfleet.vllm.catalog', 'models') | list }}"

- name: Maximum context of the E4B
  ansible.builtin.debug:
    msg: "{{ lookup('sparkfleet.vllm.catalog', 'models.e4b.max_context') }}"

- name: The catalog entry of a model named by its checkpoint id
  ansible.builtin.debug:
    msg: "{{ lookup('sparkfleet.vllm.catalog', model='unsloth/gemma-4-31B-it-NVFP4').short }}"  # 31b

- name: Disk the 31B needs under compose, sized as the planner sizes it
  ansible.builtin.debug:
    msg: "{{ lookup('sparkfleet.vllm.catalog', model='31b', runtime='compose').disk }}"

- name: The whole catalog
  ansible.builtin.set_fact:
    vllm_catalog: "{{ lookup('sparkfleet.vllm.catalog') }}"
"""

RETURN = r"""
_raw:
  description: The catalog, or one value per term.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.sparkfleet.vllm.plugins.module_utils.catalog import CatalogError, disk_need, get_path, load_catalog, resolve_model


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        try:
            catalog = load_catalog(self.get_option("path") or None)
            if self.get_option("model"):
                short = resolve_model(catalog, self.get_option("model"))
                entry = dict(catalog["models"][short], short=short)
                runtime = self.get_option("runtime")
                if runtime:
                    if runtime not in catalog["defaults"]["runtime_disk_gib"]:
                        raise AnsibleLookupError("runtime %r is not one of %s; set vllm_runtime to one of them" % (
                            runtime, ", ".join(sorted(catalog["defaults"]["runtime_disk_gib"]))))
                    entry["disk"] = disk_need(catalog, {}, runtime, entry)
                return [entry]
            if not terms:
                return [catalog]
            return [get_path(catalog, term) for term in terms]
        except CatalogError as exc:
            raise AnsibleLookupError(str(exc)) from exc
