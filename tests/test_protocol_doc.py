"""docs/protocol.md checked against the wire (engine/wire): every message of every channel has its row, under its
channel's heading, naming each of its fields; every row names a message the channel has."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from engine.wire import advise, children, forkserver, nodes, planner, rank, worker

pytestmark = pytest.mark.quick

DOC = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
# channel -> (its heading in docs/protocol.md, fields every message has that the doc says once for all)
CHANNELS = {worker.CHANNEL: ("Worker to session (stdout)", {"t"}),
            rank.CHANNEL: ("Rank to worker", set()),
            nodes.CODEC: ("The worker and the node agents", set()),
            nodes.HANDSHAKE: ("The worker and the node agents", set()),
            forkserver.CODEC: ("The fork server", set()),
            planner.CHANNEL: ("The app and its planner", set())}
# untagged messages: (heading, the dataclasses its text names the fields of)
ANSWERS = {"Validation child": [children.CheckRequest, children.CheckItem, children.CheckAnswer,
                                children.RankingRequest, children.StoredTraces, advise.AdviceAnswer],
           "Session to worker (stdin)": [worker.RunRequest],
           "The app and its planner": [planner.Request],
           "The worker and the node agents": [nodes.StreamHello, nodes.TorchrunReport]}


def sections() -> dict[str, str]:
    parts = re.split(r"^## (.+)$", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {title.strip(): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def section(heading: str) -> str:
    """The text under the heading that begins with ``heading`` (a heading may name its process after it)."""
    (body,) = [body for title, body in sections().items() if title.startswith(heading)]
    return body


def rows(body: str) -> list[str]:
    return [line for line in body.splitlines() if line.startswith("| `") or re.match(r"\| \w+ \| `", line)]


def tags_of(row: str, channel) -> set[str]:
    """The message names a row stands for: the backticked names in its first cells that are the channel's tags."""
    cells = row.split("|")[1:3]
    return {name for cell in cells for name in re.findall(r"`([a-z_]+)`", cell) if name in channel.kinds}


@pytest.mark.parametrize("channel", list(CHANNELS), ids=lambda c: c.name)
def test_every_message_of_a_channel_has_its_row_naming_its_fields(channel):
    heading, common = CHANNELS[channel]
    body = section(heading)
    documented = {}
    for row in rows(body):
        for tag in tags_of(row, channel):
            documented[tag] = documented.get(tag, "") + row
    missing = set(channel.kinds) - set(documented)
    assert not missing, f"docs/protocol.md, {heading}: no row for {sorted(missing)}"
    for tag, kind in channel.kinds.items():
        fields = {f.name for f in dataclasses.fields(kind)} - common
        unnamed = sorted(f for f in fields if f"`{f}`" not in documented[tag])
        assert not unnamed, f"docs/protocol.md, {heading}: the {tag} row does not name {unnamed}"


@pytest.mark.parametrize("heading", list(ANSWERS))
def test_every_untagged_message_has_its_fields_named(heading):
    body = section(heading)
    for kind in ANSWERS[heading]:
        unnamed = sorted(f.name for f in dataclasses.fields(kind) if f'"{f.name}"' not in body
                         and f"`{f.name}`" not in body)
        assert not unnamed, f"docs/protocol.md, {heading}: {kind.__name__}'s {unnamed} not named"


def test_the_doc_names_the_modules_that_hold_the_channels():
    text = DOC.read_text(encoding="utf-8")
    for module in ("codec", "worker", "rank", "nodes", "forkserver", "planner", "children", "advise"):
        assert f"engine/wire/{module}.py" in text
