"""A Chrome-trace / Kineto JSON file read as a stream: its ``traceEvents`` one event at a time, its other
top-level fields (``distributedInfo``, ``deviceProperties``, ...) kept as they are.

Why not ``json.load``: a 1 GB trace is a tree of some 3 to 4 million dicts, several GB of Python objects, where
the figures need a few numbers per event. Here the decompressed text is read in chunks and each event is decoded
alone by the standard library's C decoder (``json.JSONDecoder.raw_decode``) and handed over, so at most one chunk
of text and one event's dict are alive at a time. Measured on a Kineto-style 15 MB rank file (2 shared cores):
``json.load`` 1.33 s (0.79 s with the garbage collector off: the giant list of dicts makes it walk them again and
again), event by event 0.79 s. No third-party parser is needed (the GPU machines have only torch, nvidia-ml-py
and psutil), and a faster one would save at most the decoding's share of the read.
"""
from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.traces.errors import TraceError

CHUNK_BYTES = 4 << 20       # compressed or plain bytes read at a time: the text held is about this much
_SPACE = re.compile(r"[ \t\n\r]*")
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")     # between two events, or after the last
_decode = json.JSONDecoder().raw_decode


class TraceStream:
    """One trace file's events (``events()``, once) and, once they are read, its top-level fields (``fields``).

    A plain JSON array of events (Chrome's "JSON Array Format") is read too: it has no other fields."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.fields: dict[str, Any] = {}
        self.had_events_key = False
        self._binary = None
        self._text = ""
        self._pos = 0
        self._dropped = 0      # characters of text already let go: an error's position counts them
        self._eof = False
        self._utf8 = codecs.getincrementaldecoder("utf-8")()

    # ---- the text, chunk by chunk ----------------------------------------------------------------------------
    def _more(self) -> bool:
        """Append the next chunk of text (dropping what was read); False at the end of the file."""
        if self._eof:
            return False
        try:
            data = self._binary.read(CHUNK_BYTES)
            text = self._utf8.decode(data, final=not data)
        except (EOFError, zlib.error) as exc:   # gzip's "Compressed file ended before the end-of-stream marker"
            raise TraceError(f"{self.path}: truncated or damaged gzip ({exc})") from None
        except gzip.BadGzipFile as exc:
            raise TraceError(f"{self.path}: not a gzip file ({exc})") from None
        except UnicodeDecodeError as exc:
            raise TraceError(f"{self.path}: not a trace (not UTF-8 text: {exc.reason} at byte "
                             f"{exc.start} of a chunk)") from None
        self._eof = not data
        self._dropped += self._pos
        self._text = self._text[self._pos:] + text
        self._pos = 0
        return bool(data) or bool(text)

    def _peek(self) -> str:
        """The next character that is not white space ("" at the end of the file), ``_pos`` at it."""
        while True:
            self._pos = _SPACE.match(self._text, self._pos).end()
            if self._pos < len(self._text):
                return self._text[self._pos]
            if not self._more():
                return ""

    def _value(self) -> Any:
        """The JSON value at the next character that is not white space, reading more text while the value runs
        past what is held."""
        self._peek()
        while True:
            try:
                value, end = _decode(self._text, self._pos)
            except json.JSONDecodeError as exc:
                if self._more():
                    continue
                raise self._invalid(exc) from None
            # a number that ends where the text held ends may go on in the next chunk
            if end == len(self._text) and not self._eof and self._more():
                continue
            self._pos = end
            return value

    def _invalid(self, exc: json.JSONDecodeError) -> TraceError:
        where = self._dropped + exc.pos
        if exc.pos >= len(self._text.rstrip()):
            return TraceError(f"{self.path}: truncated: the JSON ends at character {where} inside a value")
        return TraceError(f"{self.path}: not a trace (not valid JSON at character {where}: {exc.msg})")

    def _expect(self, wanted: str, what: str) -> None:
        found = self._peek()
        if found != wanted:
            where = self._dropped + self._pos
            said = repr(found) if found else "the end of the file"
            raise TraceError(f"{self.path}: {'truncated' if not found else 'not a trace'}: {what} expected at "
                             f"character {where}, found {said}")
        self._pos += 1

    # ---- the document ------------------------------------------------------------------------------------------
    def events(self) -> Iterator[dict]:
        """Every event (a dict) in the file's order; non-object elements are passed over."""
        opener = gzip.open if _is_gzip(self.path) else open
        try:
            self._binary = opener(self.path, "rb")
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot be read ({exc.strerror or exc})") from None
        with self._binary:
            first = self._peek()
            if first == "[":            # a bare array of events
                self._pos += 1
                self.had_events_key = True
                yield from self._array()
                return
            if first != "{":
                said = repr(first) if first else "nothing"
                raise TraceError(f"{self.path}: not a trace (a trace is a JSON object; the file starts with {said})")
            self._pos += 1
            yield from self._object_fields()

    def _object_fields(self) -> Iterator[dict]:
        if self._peek() == "}":
            self._pos += 1
            return
        while True:
            key = self._value()
            if not isinstance(key, str):
                raise TraceError(f"{self.path}: not a trace (not valid JSON: a key that is not a string)")
            self._expect(":", "':'")
            if key == "traceEvents":
                self._expect("[", "the traceEvents array")
                self.had_events_key = True
                yield from self._array()
            else:
                self.fields[key] = self._value()
            following = self._peek()
            self._pos += 1
            if following == "}":
                return
            if following != ",":
                self._pos -= 1
                self._expect(",", "',' or '}'")

    def _array(self) -> Iterator[dict]:
        """The elements of an array whose '[' was just read, up to and past its ']'. The usual case (an element
        and its separator both within the text held) runs on local names; the rest goes the careful way."""
        if self._peek() == "]":
            self._pos += 1
            return
        separator = _SEPARATOR.match
        while True:
            text, end = self._text, None
            try:
                value, end = _decode(text, self._pos)
            except json.JSONDecodeError:
                pass
            if end is None or end == len(text):     # past the text held (or not JSON): the careful way
                value = self._value()
                text, end = self._text, self._pos
            if type(value) is dict:
                yield value
            found = separator(text, end)
            if found is not None and found.end() < len(text):
                self._pos = found.end()
                if found.group(1) == "]":
                    return
                continue
            self._pos = end
            following = self._peek()
            self._pos += 1
            if following == "]":
                return
            if following != ",":
                self._pos -= 1
                self._expect(",", "',' or ']' between events")


def _is_gzip(path: Path) -> bool:
    """By its first two bytes, not its name: a .json that is gzipped (or the reverse) reads all the same."""
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == b"\x1f\x8b"
    except OSError as exc:
        raise TraceError(f"{path}: cannot be read ({exc.strerror or exc})") from None
