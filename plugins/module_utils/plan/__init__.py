# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The serve planner (docs/architecture.md, "The planner's package"); callers import its modules by name."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type
