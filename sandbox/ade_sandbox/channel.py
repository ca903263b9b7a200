"""The parent's side of the frame protocol: strict JSON out, strict and bounded JSON in.

A strategy can write raw frames to its message descriptor and bypass the bootstrap's encoder,
so the parent's decoder is the boundary. Every frame is refused (``FrameRefused``, a
``bad_output``) unless it is strict JSON: finite numbers, no NaN/Infinity constants, valid
Unicode (no lone surrogates), nesting no deeper than ``max_depth`` and at most ``max_items``
values and keys. Depth and size are checked on the bytes before anything is decoded, because
decoding inflates: a byte cap alone lets an 8 MiB frame of ``[{},{},...]`` become 2.8 million
objects in the harness, and a 100,000-deep frame ends it with a ``RecursionError``.

The checks cost a few ``bytes.count`` calls for ordinary frames; only a frame whose raw
counts exceed a bound is scanned further (strings blanked, then one pass over its brackets).
"""

from __future__ import annotations

import json
import math
import re
import struct
from array import array
from itertools import accumulate
from typing import Any

HEADER = struct.Struct(">I")

# A JSON string literal, escapes included; blanked so that brackets and commas in text do not count.
# An unterminated one runs to the end, so that no quote is scanned twice (linear time).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
# A \uD800-\uDFFF escape: only a frame holding one needs the surrogate check.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # as signed bytes: +1, +1, -1, -1
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


# A message wraps its value in one object of a few fields; the bounds are the value's.
_ENVELOPE_DEPTH, _ENVELOPE_ITEMS = 1, 16


class FrameRefused(ValueError):
    """A frame that is not strict, bounded JSON."""


def encode(message: Any) -> bytes:
    """Strict JSON bytes of ``message`` (TypeError/ValueError for anything that is not JSON)."""
    return json.dumps(message, allow_nan=False, separators=(",", ":")).encode("utf-8")


def _reject_constant(name: str) -> Any:
    raise FrameRefused(f"non-standard JSON constant {name}")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise FrameRefused(f"number {text[:40]} does not fit a finite float")
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite)


def check_shape(raw: bytes, max_depth: int, max_items: int) -> None:
    """Refuse the message ``raw`` when its value nests deeper than ``max_depth`` or holds more than
    ``max_items`` values and keys (counted from above: an empty container counts twice)."""
    depth_bound, items_bound = max_depth + _ENVELOPE_DEPTH, max_items + _ENVELOPE_ITEMS
    opens = raw.count(b"[") + raw.count(b"{")
    items = opens + raw.count(b",") + raw.count(b":") + 1
    if opens <= depth_bound and items <= items_bound:
        return  # raw counts bound the structural ones from above
    bare = _STRING.sub(b'""', raw) if b'"' in raw else raw
    opens = bare.count(b"[") + bare.count(b"{")
    items = opens + bare.count(b",") + bare.count(b":") + 1
    if items > items_bound:
        raise FrameRefused(f"message holds about {items} JSON values and keys, more than the limit of {max_items}")
    if opens <= depth_bound:
        return
    # Depth is the largest running sum of +1 per opening and -1 per closing bracket.
    steps = array("b", bare.translate(_STEPS, _NOT_BRACKETS))
    depth = max(accumulate(steps)) - _ENVELOPE_DEPTH
    if depth > max_depth:
        raise FrameRefused(f"message value nests {depth} deep, deeper than the limit of {max_depth}")


def decode(raw: bytes, *, max_depth: int, max_items: int) -> Any:
    """The JSON message in one frame body, or ``FrameRefused`` saying why not."""
    check_shape(raw, max_depth, max_items)
    try:
        text = raw.decode("utf-8")
        value = _DECODER.decode(text)
    except FrameRefused:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FrameRefused(f"malformed message: {exc}"[:500]) from None
    if b"\\u" in raw and _SURROGATE_ESCAPE.search(raw):
        try:  # a surrogate pair decodes to one character; a lone surrogate cannot be encoded
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise FrameRefused("message holds a lone UTF-16 surrogate (not valid Unicode)") from None
    return value
