# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A tiny RGB canvas and PNG encoder (stdlib zlib/struct only, no Pillow).

Used for the smoke check's vision image and the sweep report's line plot.
The 5x7 bitmap font covers digits, upper-case letters, a few lower-case ones
and the punctuation the plot labels need.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import struct
import zlib

# Each glyph: 7 rows of 5 bits, most significant bit on the left.
FONT_5X7 = {
    " ": (0, 0, 0, 0, 0, 0, 0),
    "0": (14, 17, 19, 21, 25, 17, 14), "1": (4, 12, 4, 4, 4, 4, 14), "2": (14, 17, 1, 2, 4, 8, 31),
    "3": (31, 2, 4, 2, 1, 17, 14), "4": (2, 6, 10, 18, 31, 2, 2), "5": (31, 16, 30, 1, 1, 17, 14),
    "6": (6, 8, 16, 30, 17, 17, 14), "7": (31, 1, 2, 4, 8, 8, 8), "8": (14, 17, 17, 14, 17, 17, 14),
    "9": (14, 17, 17, 15, 1, 2, 12),
    "A": (14, 17, 17, 31, 17, 17, 17), "B": (30, 17, 17, 30, 17, 17, 30), "C": (14, 17, 16, 16, 16, 17, 14),
    "D": (28, 18, 17, 17, 17, 18, 28), "E": (31, 16, 16, 30, 16, 16, 31), "F": (31, 16, 16, 30, 16, 16, 16),
    "G": (14, 17, 16, 23, 17, 17, 15), "H": (17, 17, 17, 31, 17, 17, 17), "I": (14, 4, 4, 4, 4, 4, 14),
    "J": (7, 2, 2, 2, 2, 18, 12), "K": (17, 18, 20, 24, 20, 18, 17), "L": (16, 16, 16, 16, 16, 16, 31),
    "M": (17, 27, 21, 21, 17, 17, 17), "N": (17, 17, 25, 21, 19, 17, 17), "O": (14, 17, 17, 17, 17, 17, 14),
    "P": (30, 17, 17, 30, 16, 16, 16), "Q": (14, 17, 17, 17, 21, 18, 13), "R": (30, 17, 17, 30, 20, 18, 17),
    "S": (15, 16, 16, 14, 1, 1, 30), "T": (31, 4, 4, 4, 4, 4, 4), "U": (17, 17, 17, 17, 17, 17, 14),
    "V": (17, 17, 17, 17, 17, 10, 4), "W": (17, 17, 17, 21, 21, 21, 10), "X": (17, 17, 10, 4, 10, 17, 17),
    "Y": (17, 17, 10, 4, 4, 4, 4), "Z": (31, 1, 2, 4, 8, 16, 31),
    "v": (0, 0, 17, 17, 17, 10, 4), "k": (16, 16, 18, 20, 24, 20, 18), "s": (0, 0, 15, 16, 14, 1, 30),
    "m": (0, 0, 26, 21, 21, 17, 17), "/": (1, 1, 2, 4, 8, 16, 16), ".": (0, 0, 0, 0, 0, 12, 12),
    "-": (0, 0, 0, 31, 0, 0, 0), "(": (2, 4, 8, 8, 8, 4, 2), ")": (8, 4, 2, 2, 2, 4, 8),
    ":": (0, 12, 12, 0, 12, 12, 0), "=": (0, 0, 31, 0, 31, 0, 0), ",": (0, 0, 0, 0, 12, 4, 8),
}

WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
GREY = (200, 200, 200)
PALETTE = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75))


class Canvas:
    """Mutable RGB raster; (0, 0) is the top-left pixel."""

    def __init__(self, width, height, background=WHITE):
        self.width = int(width)
        self.height = int(height)
        self.rows = [bytearray(bytes(background) * self.width) for _row in range(self.height)]

    def set(self, x, y, color):
        if 0 <= x < self.width and 0 <= y < self.height:
            offset = 3 * x
            self.rows[y][offset:offset + 3] = bytes(color)

    def get(self, x, y):
        offset = 3 * x
        return tuple(self.rows[y][offset:offset + 3])

    def rect(self, x0, y0, x1, y1, color):
        for y in range(max(0, y0), min(self.height, y1 + 1)):
            for x in range(max(0, x0), min(self.width, x1 + 1)):
                self.set(x, y, color)

    def line(self, x0, y0, x1, y1, color, thickness=1):
        """Bresenham line, optionally thickened by a square brush."""
        x0, y0, x1, y1 = int(round(x0)), int(round(y0)), int(round(x1)), int(round(y1))
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        half = thickness // 2
        while True:
            for ox in range(-half, thickness - half):
                for oy in range(-half, thickness - half):
                    self.set(x0 + ox, y0 + oy, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x, y, string, color=BLACK, scale=1):
        """Draw string with the 5x7 font; unknown characters fall back to upper case or a blank."""
        for index, char in enumerate(string):
            glyph = FONT_5X7.get(char) or FONT_5X7.get(char.upper()) or FONT_5X7[" "]
            left = x + index * 6 * scale
            for row, bits in enumerate(glyph):
                for col in range(5):
                    if bits & (16 >> col):
                        self.rect(left + col * scale, y + row * scale,
                                  left + col * scale + scale - 1, y + row * scale + scale - 1, color)

    @staticmethod
    def text_width(string, scale=1):
        return max(0, len(string) * 6 * scale - scale)

    def to_png(self):
        return encode_png(self.width, self.height, self.rows)


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(width, height, rows):
    """Encode 8-bit RGB rows (each bytes of length 3*width) as a PNG file."""
    raw = b"".join(b"\x00" + bytes(row) for row in rows)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 9)) + \
        _chunk(b"IEND", b"")


def decode_png_size(data):
    """(width, height) of a PNG, for tests and sanity checks."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    return struct.unpack(">II", data[16:24])


def text_image(text, scale=8, margin=24):
    """A black-on-white PNG with text written large: the vision smoke check's image."""
    width = Canvas.text_width(text, scale) + 2 * margin
    height = 7 * scale + 2 * margin
    canvas = Canvas(width, height)
    canvas.text(margin, margin, text, BLACK, scale)
    return canvas.to_png()
