"""What a coordinator and a node's agent say to each other after the handshake, typed (docs/nodes.md).

Each message is a dataclass, tagged by ``type`` on the wire (one MAC'd JSON line each,
engine/nodes/connection.py). ``encode`` makes the JSON object, ``decode`` reads one back and
checks every field's type against its annotation (engine/wire/codec.py): a message of a known
type with a field missing or of another type is garbled (MessageError), one of a type this
end does not know is None (a newer peer's: ignored). The handshake's own lines (challenge, auth, welcome,
refused) are engine/nodes/connection.py's, before any key exists.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.wire.codec import (
    Channel,
    WireError as MessageError,  # noqa: F401 (what decode raises)
)


# ---- the coordinator to an agent ------------------------------------------------------------
@dataclass(frozen=True)
class Ping:
    id: int


@dataclass(frozen=True)
class SourceFile:
    """A file that travels because the user named it (a model file, a watched script): its name and its text."""
    name: str
    text: str


@dataclass(frozen=True)
class Launch:
    """Start this node's ranks under torchrun: ``nproc`` of them as node ``node_rank`` of ``nnodes``."""
    run_id: str
    config: dict                       # ExperimentConfig.to_dict(), without nodes and token file
    devices: list[dict]                # every device of the run (Device.to_dict()), in rank order
    node_rank: int
    nnodes: int
    nproc: int
    rendezvous: str | None = None      # the rendezvous store's address; None: this node hosts it
    model_file: SourceFile | None = None
    script: SourceFile | None = None   # a watched script's (strategy script): run only by an agent that allows it
    telemetry_hz: float = 0.0
    silence_s: float | None = None     # the coordinator silent this long is gone: the agent ends the run


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class Bye:
    pass


# ---- an agent to the coordinator -----------------------------------------------------------
@dataclass(frozen=True)
class Info:
    """The node, before anything is launched: its devices and its versions."""
    protocol: int
    hostname: str
    address: str
    interface: str
    cores: list[int]
    gpus: int
    torch: str | None
    python: str
    pid: int
    time: float
    runs_scripts: bool = False         # started with --allow-scripts: it runs a watched script sent to it


@dataclass(frozen=True)
class Busy:
    message: str


@dataclass(frozen=True)
class Pong:
    id: int | None
    time: float


@dataclass(frozen=True)
class Failed:
    """The launch could not be done, or went wrong on the node."""
    message: str


@dataclass(frozen=True)
class Launched:
    pid: int
    rendezvous: str


@dataclass(frozen=True)
class Ended:
    """The run ended on the node; ``remaining``: rank pids still alive after the kill (none, normally)."""
    remaining: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Samples:
    rows: list[list]                  # DeviceSample's fields in order, ``t`` on the node's clock


@dataclass(frozen=True)
class Warned:
    message: str


@dataclass(frozen=True)
class TorchrunExit:
    code: int
    failures: dict = field(default_factory=dict)    # rank -> exit code, as torchrun reports them
    error: str | None = None
    output: list[str] = field(default_factory=list)
    stopping: bool = False                           # the run was being stopped


@dataclass(frozen=True)
class RankHello:
    rank: int
    local_rank: int
    pid: int


@dataclass(frozen=True)
class RankOutput:
    rank: int
    stream: str                        # stdout, stderr, or garbled (an events line that was not JSON)
    line: str


@dataclass(frozen=True)
class RankClosed:
    rank: int


@dataclass(frozen=True)
class RankEvent:
    """A rank's event (engine/wire/rank.py), as it wrote it, its times on the node's clock."""
    rank: int
    event: dict


@dataclass(frozen=True)
class RankProfile:
    """A rank's profiler event, after the chunks of its trace file."""
    rank: int
    event: dict


@dataclass(frozen=True)
class RankProfileChunk:
    rank: int
    data: str                          # base64


Message = (Ping | Launch | Stop | Bye | Info | Busy | Pong | Failed | Launched | Ended | Samples | Warned
           | TorchrunExit | RankHello | RankOutput | RankClosed | RankEvent | RankProfile | RankProfileChunk)
CODEC = Channel("node wire", "type", {
    "ping": Ping, "launch": Launch, "stop": Stop, "bye": Bye, "info": Info, "busy": Busy, "pong": Pong,
    "error": Failed, "launched": Launched, "ended": Ended, "samples": Samples, "warning": Warned,
    "torchrun_exit": TorchrunExit, "rank_hello": RankHello, "rank_output": RankOutput, "rank_closed": RankClosed,
    "rank_event": RankEvent, "rank_profile": RankProfile, "rank_profile_chunk": RankProfileChunk})
encode, decode = CODEC.encode, CODEC.decode


# ---- the handshake, before any key (engine/nodes/connection.py) --------------------------------------
@dataclass(frozen=True)
class Challenge:
    nonce: str                         # hex
    agent: str = "splitscope-node"


@dataclass(frozen=True)
class Auth:
    nonce: str
    proof: str


@dataclass(frozen=True)
class Welcome:
    proof: str


@dataclass(frozen=True)
class Refused:
    reason: str


HANDSHAKE = Channel("node handshake", "type", {"challenge": Challenge, "auth": Auth, "welcome": Welcome,
                                               "refused": Refused})


# ---- on the node: a rank to its agent, torchrun to its agent -------------------------------------
@dataclass(frozen=True)
class StreamHello:
    """The first line of each of a rank's connections to its agent's socket (engine/run/rank.py node_channel):
    which rank, and which of its streams the connection carries (events, stdout or stderr)."""
    rank: int
    local_rank: int
    pid: int
    stream: str


@dataclass(frozen=True)
class TorchrunReport:
    """What a node's torchrun (engine/nodes/torchrun.py) says on its status pipe as it ends: nothing when its
    ranks all ended well."""
    failures: dict[str, int] | None = None   # rank -> exit code, as torchrun's ChildFailedError has them
    error: str | None = None


def send(channel, message: Message) -> None:
    """``message`` on a handshaken channel (engine/nodes/connection.py Channel.send); WireError when the
    connection is gone."""
    channel.send(encode(message))


def receive(channel) -> Message | None:
    """The next message (None: a type this end does not know); WireError when the connection ends,
    MessageError when it is garbled."""
    return decode(channel.receive())
