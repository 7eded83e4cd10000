"""The shared token that agents and coordinators prove to each other: read from a file, never an argument.

A token on a command line is in every user's process list, so only a file names it,
and, as ssh does with a private key, a file others may read is refused.
"""
from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from engine.environment import variable

MIN_LENGTH = 16  # characters; `new_token` writes 64 (32 random bytes in hex)
DEFAULT_TEXT = "SPLITSCOPE_NODE_TOKEN_FILE or ~/.config/splitscope/node-token"  # default_token_file, in words


class TokenError(ValueError):
    pass


def default_token_file() -> Path:
    """SPLITSCOPE_NODE_TOKEN_FILE, else the user's config folder (the XDG location): where --token-file looks
    when it is not given."""
    env = variable("SPLITSCOPE_NODE_TOKEN_FILE")
    if env:
        return Path(env)
    return Path(variable("XDG_CONFIG_HOME") or Path.home() / ".config") / "splitscope" / "node-token"


def read_token(path: str | os.PathLike) -> bytes:
    """The token in ``path`` (surrounding whitespace dropped), or TokenError saying what is wrong."""
    path = Path(path)
    try:
        info = path.stat()
        text = path.read_bytes().strip()
    except OSError as exc:
        raise TokenError(f"cannot read the token file {path}: {exc.strerror or exc}; make one with "
                         f"`python main.py node --new-token {path}`") from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(f"the token file {path} may be read by other users (mode {stat.S_IMODE(info.st_mode):o}); "
                         f"allow only its owner: chmod 600 {path}")
    if len(text) < MIN_LENGTH:
        raise TokenError(f"the token in {path} is too short ({len(text)} characters); use at least {MIN_LENGTH}, "
                         f"as `python main.py node --new-token {path}` writes")
    return text


def token_for(path: str | os.PathLike | None) -> bytes:
    """The token of ``--token-file`` (``path``), or of the default file when none is given."""
    return read_token(path or default_token_file())


def new_token(path: str | os.PathLike) -> Path:
    """Write a fresh random token to ``path``, readable by its owner alone; never overwrites."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return path
