"""Error texts as people read them, without Qt: no quoting that Python's repr() adds.

``f"{type(exc).__name__}: {exc}"`` is how the app and the engine word a failure. For most
exceptions ``str(exc)`` is the message, but a KeyError's is the repr of its argument (torch's,
for a block name holding a dot: KeyError: 'module name can\\'t contain ".", got: layer1.0'), and
a message that quotes a garbled protocol line carries ``{text!r}``: a string holding both kinds
of quote comes out escaped. The error panel shows its header through ``readable``;
``exception_text`` words an exception without the repr.
"""
from __future__ import annotations

# repr() escapes only these inside a quoted string; a path's backslash ("C:\\Users") stays.
_REPR_ESCAPES = {"\\'": "'", '\\"': '"'}


def readable(message: str) -> str:
    """``message`` with repr's escaped quotes unescaped."""
    for escaped, plain in _REPR_ESCAPES.items():
        message = message.replace(escaped, plain)
    return message


def exception_text(exc: BaseException) -> str:
    """"KeyError: no block named x" rather than "KeyError: 'no block named x'"."""
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        return f"{type(exc).__name__}: {exc.args[0]}"
    return readable(f"{type(exc).__name__}: {exc}")
