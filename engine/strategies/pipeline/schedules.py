"""The pipeline schedules torch.distributed.pipelining has, importable without torch.

Each is registered under its ``--schedule`` name with a one-line description
(the app's schedule box and the CLI's help show it), the torch class that runs
it, how many stages each device holds (``--stages-per-device``, V) and where
they go, and whether it splits the backward into the input gradient (I) and the
weight gradient (W), which the zero-bubble schedules move into the bubble.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    name: str
    torch_class: str         # in torch.distributed.pipelining
    description: str
    stages_per_device: tuple[int, ...]   # the V it can run with; the first is its default
    placement: str = "loop"  # "loop": stage s on device s mod p; "v": device d holds stages d and 2p-1-d
    splits_backward: bool = False
    min_micro_batches: str = ""          # "stages" (m >= p*V) or "devices" (m >= p), checked before launch
    rounds: bool = False     # runs m in rounds of m // p micro-batches, which must divide m (torch's interleaved)
    title: str = ""          # its name for people ("Interleaved 1F1B"), as the papers and torch's docs say it
    overlaps_pairs: bool = False   # runs a forward and a backward as one action, sending both outputs at its end

    @property
    def display_name(self) -> str:
        return self.title or self.name

    @property
    def multi_stage(self) -> bool:
        return self.stages_per_device != (1,)

    def per_device(self, given: int | None) -> int:
        """The stages it runs on each device: the given V (--stages-per-device), else its default."""
        return given or self.stages_per_device[0]

    def stage_device(self, stage: int, devices: int) -> int:
        """Which device (rank) runs ``stage`` of ``devices * V`` stages."""
        if self.placement == "v":
            return stage if stage < devices else 2 * devices - 1 - stage
        return stage % devices

    def stages_of(self, device: int, devices: int, per_device: int) -> list[int]:
        """The stages device ``device`` runs, in stage order."""
        return [s for s in range(devices * per_device) if self.stage_device(s, devices) == device]

    def micro_batch_problem(self, micro_batches: int, devices: int, per_device: int) -> str | None:
        """Why torch's schedule cannot run ``micro_batches`` over ``devices`` x ``per_device`` stages, or None."""
        m, p, v = micro_batches, devices, per_device
        if self.min_micro_batches == "devices" and m < p:
            return f"the {self.name} schedule needs at least as many micro-batches as stages ({p}), got {m}"
        if self.min_micro_batches == "stages" and m < p * v:
            return (f"the {self.name} schedule needs at least as many micro-batches as stages ({p} devices x {v} = "
                    f"{p * v}), got {m}")
        if self.rounds and m > p and m % (m // p):
            # torch's interleaved schedules run m in rounds of m // p micro-batches each
            return (f"the {self.name} schedule runs the micro-batches in {m // p} rounds: {m} micro-batches must "
                    f"divide into them (use a multiple of {p}, or at most {p})")
        return None


SCHEDULE_LIST = (
    Schedule("gpipe", "ScheduleGPipe", "all forwards, then all backwards; keeps every micro-batch's activations",
             (1,), title="GPipe"),
    Schedule("1f1b", "Schedule1F1B", "one forward, one backward in steady state; keeps at most p micro-batches' "
             "activations", (1,), min_micro_batches="devices", title="1F1B"),
    Schedule("interleaved1f1b", "ScheduleInterleaved1F1B", "1F1B over V stages per device placed in a loop: "
             "the bubble shrinks about V-fold, (p-1)/(V*m+p-1)", (2, 3, 4), rounds=True, title="Interleaved 1F1B"),
    Schedule("loopedbfs", "ScheduleLoopedBFS", "V stages per device in a loop, breadth first: every micro-batch "
             "through a device's first stage before its next", (2, 3, 4), title="Looped BFS"),
    Schedule("interleavedzb", "ScheduleInterleavedZeroBubble", "interleaved 1F1B with each backward split into "
             "input gradient (I) and weight gradient (W), the W moved into the bubble", (2, 3, 4),
             splits_backward=True, rounds=True, title="Interleaved zero bubble"),
    Schedule("zbv", "ScheduleZBVZeroBubble", "zero bubble in a V: two stages per device (d and 2p-1-d), split "
             "backward; almost no bubble when F, I and W take equal time", (2,), placement="v",
             splits_backward=True, title="ZB-V (zero bubble in a V)"),
    Schedule("dualpipev", "ScheduleDualPipeV", "DeepSeek's DualPipe in a V: two stages per device, forward and "
             "backward of two micro-batches overlapped, split backward", (2,), placement="v", splits_backward=True,
             min_micro_batches="stages", title="DualPipeV", overlaps_pairs=True),
)
SCHEDULE_INFO: dict[str, Schedule] = {s.name: s for s in SCHEDULE_LIST}
SCHEDULES: dict[str, str] = {s.name: s.description for s in SCHEDULE_LIST}
