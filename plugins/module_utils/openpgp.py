# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The primary-key fingerprints of an OpenPGP key file, in pure Python (no gpg on the host needed).

An apt source's Signed-By file trusts every key it holds, so a repository key is pinned by the set of primary
fingerprints the file carries, not by one of them. Fingerprints follow RFC 4880 section 12.2 (version 4: SHA-1 over
0x99, a two-octet length and the public-key packet body) and RFC 9580 section 5.5.4 (version 6: SHA-256 over 0x9B,
a four-octet length and the body; version 5 uses 0x9A). Armored (``-----BEGIN PGP PUBLIC KEY BLOCK-----``) and
binary (``gpg --export``) files are both read.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import re

PUBLIC_KEY_TAG = 6
CRC_LINE = re.compile(r"^=[A-Za-z0-9+/]{4}$")
ARMOR_BLOCK = re.compile(
    r"-----BEGIN PGP PUBLIC KEY BLOCK-----\r?\n(.*?)-----END PGP PUBLIC KEY BLOCK-----", re.S)


class KeyFileError(ValueError):
    """The data is not an OpenPGP public key file this module can read."""


def normalize(fingerprint):
    """A fingerprint as written anywhere (spaces, lower case, a 0x prefix) in the form compared here."""
    text = re.sub(r"\s+", "", str(fingerprint)).upper()
    return text[2:] if text.startswith("0X") else text


def dearmor(text):
    """The binary packets of every armored public-key block in ``text`` (headers and the CRC line dropped)."""
    blocks = ARMOR_BLOCK.findall(text)
    if not blocks:
        raise KeyFileError("no '-----BEGIN PGP PUBLIC KEY BLOCK-----' block")
    data = b""
    for block in blocks:
        # Armor headers ("Version: ...") hold a colon, which base64 never does; the CRC line is "=" and 4 characters.
        body = "".join(line.strip() for line in block.splitlines()
                       if line.strip() and ":" not in line and not CRC_LINE.match(line.strip()))
        try:
            data += base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise KeyFileError("an armored block is not base64: %s" % exc) from exc
    return data


def packets(data):
    """(tag, body) of each packet in ``data`` (old and new packet formats; partial lengths are refused)."""
    pos = 0
    while pos < len(data):
        head = data[pos]
        if not head & 0x80:
            raise KeyFileError("octet %d is not a packet header (0x%02x)" % (pos, head))
        if head & 0x40:  # new format
            tag = head & 0x3F
            first = _octet(data, pos + 1)
            if first < 192:
                length, pos = first, pos + 2
            elif first < 224:
                length, pos = ((first - 192) << 8) + _octet(data, pos + 2) + 192, pos + 3
            elif first == 255:
                length, pos = int(binascii.hexlify(data[pos + 2:pos + 6]), 16), pos + 6
            else:
                raise KeyFileError("packet at octet %d uses a partial body length, which no key packet may" % pos)
        else:  # old format
            tag = (head >> 2) & 0x0F
            kind = head & 0x03
            if kind == 3:
                length, pos = len(data) - pos - 1, pos + 1
            else:
                size = (1, 2, 4)[kind]
                length, pos = int(binascii.hexlify(data[pos + 1:pos + 1 + size]), 16), pos + 1 + size
        if pos + length > len(data):
            raise KeyFileError("packet of tag %d runs past the end of the data" % tag)
        yield tag, data[pos:pos + length]
        pos += length


def _octet(data, pos):
    if pos >= len(data):
        raise KeyFileError("the data ends inside a packet header")
    return data[pos]


def fingerprint(body):
    """The fingerprint of one public-key packet body (versions 4, 5 and 6)."""
    version = body[0] if body else None
    if version == 4:
        prefix = b"\x99" + len(body).to_bytes(2, "big")
        return hashlib.sha1(prefix + body).hexdigest().upper()
    if version in (5, 6):
        prefix = (b"\x9a" if version == 5 else b"\x9b") + len(body).to_bytes(4, "big")
        return hashlib.sha256(prefix + body).hexdigest().upper()
    raise KeyFileError("public key of version %s (only 4, 5 and 6 are in use)" % version)


def primary_fingerprints(content):
    """The fingerprint of every primary key in a key file, armored (str or bytes) or binary (bytes)."""
    if isinstance(content, str):
        content = content.encode("utf-8", "surrogateescape")
    data = dearmor(content.decode("ascii", "replace")) if b"-----BEGIN PGP" in content else content
    found = [fingerprint(body) for tag, body in packets(data) if tag == PUBLIC_KEY_TAG]
    if not found:
        raise KeyFileError("no public key packet")
    return found


def check_pins(content, pins):
    """(found fingerprints, problem or None): the file must hold at least one key and only pinned keys."""
    wanted = {normalize(pin) for pin in pins}
    found = primary_fingerprints(content)
    unpinned = [fpr for fpr in found if fpr not in wanted]
    if unpinned:
        return found, "holds key(s) %s, which are not pinned (pinned: %s)" % (
            ", ".join(unpinned), ", ".join(sorted(wanted)))
    return found, None
