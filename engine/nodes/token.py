"""The shared token that agents and coordinators prove to each other: read from a file, never an argument.

A token on a command line is in every user's process list, so only a file names it,
and, as ssh does with a private key, a file others may read (its mode), or that is
another user's (its owner), is refused before anything starts.
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
    """The token in ``path`` (surrounding whitespace dropped), or TokenError saying what is wrong: one line that
    names the file and what to do. Its owner and mode are checked on the opened file before a byte is read."""
    path = Path(path)
    try:
        # O_NONBLOCK: a FIFO given as the file is refused below instead of waiting here for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise TokenError(f"cannot read the token file {path}: {exc.strerror or exc}; make one with "
                         f"`python main.py node --new-token {path}`") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        problem = _unsafe(path, info)
        if problem:
            raise TokenError(problem)
        try:
            text = f.read().strip()
        except OSError as exc:
            raise TokenError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    if len(text) < MIN_LENGTH:
        raise TokenError(f"the token in {path} is too short ({len(text)} characters); use at least {MIN_LENGTH}, "
                         f"as `python main.py node --new-token {path}` writes")
    return text


def _unsafe(path: Path, info: os.stat_result) -> str | None:
    """Why the opened token file must not be trusted, as ssh judges a private key: not a plain file, another
    user's (who could read it, or change it), or readable or writable by others."""
    if not stat.S_ISREG(info.st_mode):
        return f"the token file {path} is not a regular file; make one with `python main.py node --new-token FILE`"
    if info.st_uid != os.geteuid():
        return (f"the token file {path} belongs to {_user(info.st_uid)}, who may read or change it, not to you "
                f"(uid {os.geteuid()}); use a copy of your own: cp {path} NEW && chmod 600 NEW")
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        return (f"the token file {path} may be read or changed by other users (mode "
                f"{stat.S_IMODE(info.st_mode):04o}); allow only its owner: chmod 600 {path}")
    return None


def _user(uid: int) -> str:
    try:
        import pwd
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def token_for(path: str | os.PathLike | None) -> bytes:
    """The token of ``--token-file`` (``path``), or of the default file when none is given."""
    return read_token(path or default_token_file())


def new_token(path: str | os.PathLike) -> Path:
    """Write a fresh random token to ``path``, readable by its owner alone; never overwrites."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)   # the token's own folder private, when made here
    # Made 0600 as it is created (O_EXCL: never another's file, never through a link), so that read_token
    # accepts it: the umask only takes bits away.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return path
