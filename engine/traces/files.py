"""Which files a job's traces are, and which rank each one is.

A path is a trace file or a folder of them (its ``*.json`` and ``*.json.gz`` files, not its subfolders; a
TensorBoard-handler folder holds ``*.pt.trace.json``). A rank's number comes from the file's
``distributedInfo`` (Kineto writes it for a distributed job); else from its name (``rank-3``, ``rank3``,
``rank_3``); else from the order the files were given in. Each file says which (``RankSource``)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from engine.traces.errors import TraceError

SUFFIXES = (".json", ".json.gz")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
FROM_DISTRIBUTED_INFO, FROM_FILE_NAME, FROM_ORDER = "distributedInfo", "file name", "order given"


def trace_files(paths: list[str | Path]) -> list[Path]:
    """The trace files the paths name, in the order given (a folder's files sorted by name)."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(SUFFIXES))
            if not inside:
                raise TraceError(f"{path}: no trace files in this folder (*.json or *.json.gz)")
            found += inside
        elif path.is_file():
            found.append(path)
        elif not path.exists():
            raise TraceError(f"{path}: no such file or folder")
        else:
            raise TraceError(f"{path}: not a file or folder")
    seen: set[Path] = set()
    for path in found:
        if path.resolve() in seen:
            raise TraceError(f"{path}: given twice")
        seen.add(path.resolve())
    return found


def rank_in_name(path: Path) -> int | None:
    found = _RANK_IN_NAME.search(path.name)
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class RankIdentity:
    """Where a file's rank and world size came from."""
    rank: int
    world_size: int | None
    source: str           # FROM_DISTRIBUTED_INFO, FROM_FILE_NAME or FROM_ORDER


def identify(path: Path, fields: dict, position: int) -> RankIdentity:
    """The rank of the file at ``position`` of those given, from its top-level ``fields``."""
    info = fields.get("distributedInfo")
    if isinstance(info, dict):
        rank, world = info.get("rank"), info.get("world_size")
        world = world if isinstance(world, int) and not isinstance(world, bool) and world > 0 else None
        if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
            return RankIdentity(rank, world, FROM_DISTRIBUTED_INFO)
    named = rank_in_name(path)
    if named is not None:
        return RankIdentity(named, None, FROM_FILE_NAME)
    return RankIdentity(position, None, FROM_ORDER)


def check_job(identities: list[tuple[Path, RankIdentity]]) -> int | None:
    """The job's world size (None where no file says), after checking that no rank is given twice and that the
    files agree on the world size; a TraceError names the file that does not fit."""
    world: tuple[int, Path] | None = None
    for path, identity in identities:
        if identity.world_size is not None:
            if world is not None and world[0] != identity.world_size:
                raise TraceError(f"{path}: world size {identity.world_size}, but {world[1]} says {world[0]}: "
                                 "traces of different jobs")
            world = world or (identity.world_size, path)
    seen: dict[int, Path] = {}
    for path, identity in identities:
        if identity.rank in seen:
            raise TraceError(f"{path}: rank {identity.rank} twice (also {seen[identity.rank]}; rank from its "
                             f"{identity.source})")
        seen[identity.rank] = path
        if world is not None and identity.rank >= world[0]:
            raise TraceError(f"{path}: rank {identity.rank} in a job of world size {world[0]}")
    return world[0] if world else None
