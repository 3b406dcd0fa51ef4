# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What may go into a server environment: secret-looking names, and values an env file carries unchanged.

Pure functions, shared by the planner (which refuses at plan time) and by
whoever renders an env file (who may rely on them):

* ``secret_name_rule(name)``: the pattern a secret-looking variable name
  matches, or None. Secrets reach a server only through the 0600 secret env
  file, never through a user's extra environment.
* ``env_value_problems(value)``: the characters of a secret value (the API
  key) that some env-file reader would rewrite, or an empty list.

The env-value rule. A value is carried unchanged by every reader this
collection feeds when it is printable ASCII without whitespace (0x21-0x7E):
each runtime quotes it for its own reader (the ``env_quote`` filter:
double quotes with ``\\ " ` $`` escaped for bash and systemd
``EnvironmentFile=``, ``$`` doubled for a Compose ``env_file``; the cluster
hands secrets to its containers by name, never through
``docker --env-file``, which keeps quotes literally). What the refused
characters would do:

* whitespace and control characters (newline, tab, NUL, ...): systemd trims
  whitespace around a value and every reader ends a value at a newline;
* anything outside ASCII: readers disagree on encodings.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# (pattern as documented, regular expression over the upper-cased name). TOKENS and TOKENIZER are counts and
# tokenizer settings (VLLM_..._MAX_TOKENS, TOKENIZERS_PARALLELISM), not credentials.
SECRET_NAME_RULES = (
    ("*TOKEN*", re.compile(r"TOKEN(?!S|IZER)")),
    ("*_KEY", re.compile(r"_KEY$")),
    ("*SECRET*", re.compile(r"SECRET")),
    ("*PASSWORD*", re.compile(r"PASSWORD")),
    ("RAY_AUTH_*", re.compile(r"^RAY_AUTH_")),
)
SECRET_NAME_PATTERNS = ", ".join(label for label, _rule in SECRET_NAME_RULES)

# Printable ASCII (0x21-0x7E): every runtime's env_quote carries each of these unchanged.
ENV_VALUE_REFUSED = ""
ENV_VALUE_ALLOWED = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in ENV_VALUE_REFUSED)
ENV_VALUE_ALLOWED_TEXT = "printable ASCII without whitespace (letters, digits and punctuation)"
_NAMES = {" ": "space", "\t": "tab", "\n": "newline", "\r": "carriage return", "\x00": "NUL", "`": "backtick (`)",
          "\\": "backslash (\\)", "'": "single quote (')", '"': 'double quote (")', "$": "dollar ($)"}


def secret_name_rule(name):
    """The documented pattern (``*TOKEN*``, ...) that ``name`` matches, or None."""
    text = str(name).upper()
    for label, rule in SECRET_NAME_RULES:
        if rule.search(text):
            return label
    return None


def describe_character(char):
    """A character as a refusal names it: ``space``, ``dollar ($)``, ``U+00E9``."""
    if char in _NAMES:
        return _NAMES[char]
    return "U+%04X" % ord(char) if not 0x21 <= ord(char) <= 0x7E else repr(char)


def env_value_problems(value):
    """The characters of ``value`` outside the env-value rule, described, first occurrence order; [] if none."""
    seen = []
    for char in str(value):
        if char not in ENV_VALUE_ALLOWED and char not in seen:
            seen.append(char)
    return [describe_character(c) for c in seen]
