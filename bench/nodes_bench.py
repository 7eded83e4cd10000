"""Runs over nodes: what the agents' relay costs a run, and how much a coordinator takes in.

1. Relay overhead (needs root: two network-namespace nodes, tests/netns.py): the
   median step time of ddp over 2 nodes, with the agents streaming telemetry at
   10 Hz and with it off, beside the same 2-rank ddp on this machine (no relay,
   loopback), runs interleaved.
2. Coordinator intake: simulated agents (the real wire protocol, on 127.0.0.2,
   127.0.0.3, ...) each stream 32 devices' telemetry at 10 Hz and 32 ranks' step
   events as fast as the coordinator (a real worker and session, with its store)
   takes them: 2 agents (64 devices) and 8 (256). Goal: 10 Hz from 64 and from 256
   devices without dropping a step event or a sample.

    python -m bench.nodes_bench [--steps 40] [--repeats 3] [--intake-steps 4000]
"""
from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from engine.config import ExperimentConfig
from engine.nodes import connection
from engine.nodes.agent import PROTOCOL
from engine.run.session import RunSession
from engine.store import Store
from engine.telemetry.sample import FIELD_NAMES, DeviceSample
from engine.wire import nodes as messages

ROOT = Path(__file__).resolve().parent.parent
DEVICES_PER_NODE = 32
TELEMETRY_HZ = 10.0


# ---- 1. relay overhead -------------------------------------------------------------------------------------
def _median_step(config: ExperimentConfig, db: str, telemetry_hz: float) -> float:
    session = RunSession(config, db_path=db, telemetry_hz=telemetry_hz)
    session.start()
    result = session.wait(600)
    if result is None or result.status != "finished":
        raise RuntimeError(f"run {session.run_id} did not finish: {result and result.error}")
    with Store(db) as store:
        times = [s.time_s for s in store.steps(result.run_id)[config.warmup:]]
    return statistics.median(times)


def relay_overhead(steps: int, repeats: int) -> dict | None:
    sys.path.insert(0, str(ROOT / "tests"))
    import netns
    why = netns.available()
    if why:
        print(f"relay overhead: skipped ({why})")
        return None
    directory = Path(tempfile.mkdtemp(prefix="splitscope-nodes-bench-"))
    db = str(directory / "runs.sqlite3")
    cluster = netns.Cluster(2, directory, clock_offsets=[0.0, 0.0])
    try:
        cluster.make()
        base = ExperimentConfig(strategy="ddp", model="mlp", width=512, depth=8, batch_size=1024, steps=steps,
                                warmup=3)
        nodes = base.replace(devices="cpu:1", nodes=cluster.nodes_option(), token_file=str(cluster.token_file))
        cases = {"one machine (no relay)": (base.replace(devices="cpu:2"), TELEMETRY_HZ),
                 "2 nodes, telemetry 10 Hz": (nodes, TELEMETRY_HZ),
                 "2 nodes, telemetry off": (nodes, 0.0)}
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeats):  # interleaved: the machine's drift hits every case alike
            for name, (config, hz) in cases.items():
                times[name].append(_median_step(config, db, hz))
    finally:
        cluster.close()
    alone = statistics.median(times["one machine (no relay)"])
    print(f"relay overhead: ddp mlp 512x8 batch 1024, 2 ranks on 2 cores, {steps} steps x {repeats} runs each "
          "(median of the runs' median step)")
    out = {}
    for name, values in times.items():
        median = statistics.median(values)
        out[name] = median
        print(f"  {name:28s} {median * 1e3:7.1f} ms   {median / alone:5.2f}x one machine")
    print(f"  telemetry streaming: {out['2 nodes, telemetry 10 Hz'] / out['2 nodes, telemetry off']:.3f}x "
          "the step time without it")
    return out


# ---- 2. coordinator intake ------------------------------------------------------------------------------------
class SimulatedAgent(threading.Thread):
    """A node agent that starts no process: it answers the coordinator as agent.py does, then streams its ranks'
    steps (as fast as the connection takes them) and its devices' telemetry (at 10 Hz)."""

    def __init__(self, host: str, token: bytes, steps: int):
        super().__init__(name=f"simulated-agent-{host}", daemon=True)
        self.server = socket.create_server((host, 0))
        self.address = f"{host}:{self.server.getsockname()[1]}"
        self.token, self.steps = token, steps
        self.sent_events = 0
        self.sent_samples = 0
        self.samples_while_stepping = 0  # sent before this agent's last step: these must all be stored
        self.stepping = True

    def run(self) -> None:
        conn, _ = self.server.accept()
        channel = connection.handshake_agent(conn, self.token)
        messages.send(channel, messages.Info(
            protocol=PROTOCOL, hostname="simulated", address=self.address, interface="lo",
            cores=list(range(DEVICES_PER_NODE)), gpus=0, torch=_torch(), python=sys.version.split()[0], pid=0,
            time=time.perf_counter()))
        launched = threading.Event()
        stop = threading.Event()
        launches: list[messages.Launch] = []

        def read():
            try:
                while True:
                    m = messages.receive(channel)
                    if isinstance(m, messages.Ping):
                        messages.send(channel, messages.Pong(m.id, time.perf_counter()))
                    elif isinstance(m, messages.Launch):
                        launches.append(m)
                        messages.send(channel, messages.Launched(0, m.rendezvous or self.address))
                        launched.set()
                    elif isinstance(m, messages.Stop):
                        stop.set()
                        messages.send(channel, messages.Ended([]))
            except (connection.WireError, messages.MessageError):
                stop.set()
                launched.set()   # a launch never read ends the agent, rather than leave it waiting
        threading.Thread(target=read, daemon=True).start()
        launched.wait()
        if not launches:
            return
        launch = launches[0]
        first = launch.node_rank * launch.nproc
        ranks = range(first, first + launch.nproc)
        devices = [d["name"] for d in launch.devices]
        threading.Thread(target=self._telemetry, args=(channel, [devices[r] for r in ranks], stop),
                         daemon=True).start()
        for r in ranks:
            messages.send(channel, messages.RankHello(r, r - first, 0))
            messages.send(channel, messages.RankEvent(r, {"type": "ready", "time": time.perf_counter(), "pid": 0,
                                                          "split": None}))
        for step in range(self.steps):
            if stop.is_set():
                return
            start = time.perf_counter()
            for r in ranks:
                messages.send(channel, messages.RankEvent(r, {
                    "type": "rank_step", "time": start + 0.001, "step": step, "start": start, "end": start + 0.001,
                    "intervals": {devices[r]: [["forward", start, start + 0.0004],
                                               ["backward", start + 0.0004, start + 0.001]]},
                    "loss_part": 1.0 / len(devices), "samples": 8, "batch_split": None}))
                self.sent_events += 1
        self.stepping = False
        for r in ranks:
            messages.send(channel, messages.RankEvent(r, {"type": "done", "time": time.perf_counter(),
                                                          "param_sq": 1.0, "change_sq": 0.5}))
            messages.send(channel, messages.RankClosed(r))
        messages.send(channel, messages.TorchrunExit(0))
        stop.wait(60)

    def _telemetry(self, channel, devices: list[str], stop: threading.Event) -> None:
        period = 1.0 / TELEMETRY_HZ
        deadline = time.perf_counter()
        while not stop.is_set():
            t = time.perf_counter()
            rows = [[getattr(DeviceSample(t=t, device=name, util=50.0, mem_used=1 << 30, mem_total=1 << 34), f)
                     for f in FIELD_NAMES] for name in devices]
            try:
                messages.send(channel, messages.Samples(rows))
            except connection.WireError:
                return
            self.sent_samples += len(rows)
            if self.stepping:
                self.samples_while_stepping += len(rows)
            deadline += period
            time.sleep(max(0.0, deadline - time.perf_counter()))


def _torch() -> str | None:
    from importlib import metadata
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def coordinator_intake(steps: int, agents: int = 2) -> dict:
    directory = Path(tempfile.mkdtemp(prefix="splitscope-intake-bench-"))
    token_file = directory / "token"
    token_file.write_text("bench-token-" + "x" * 32)
    token_file.chmod(0o600)
    hosts = [f"127.0.0.{2 + k}" for k in range(agents)]
    agents = [SimulatedAgent(host, token_file.read_text().encode(), steps) for host in hosts]
    for agent in agents:
        agent.start()
    config = ExperimentConfig(strategy="ddp", model="mlp", devices=f"cpu:{DEVICES_PER_NODE}", steps=steps, warmup=1,
                              nodes=",".join(a.address for a in agents), token_file=str(token_file))
    db = str(directory / "runs.sqlite3")
    session = RunSession(config, db_path=db, telemetry_hz=TELEMETRY_HZ)
    begun = time.perf_counter()
    session.start()
    result = session.wait(600)
    took = time.perf_counter() - begun
    with Store(db) as store:
        stored_steps = store.step_count(result.run_id)
        stored_samples = len(store.samples(result.run_id))
    events = sum(a.sent_events for a in agents)
    samples = sum(a.sent_samples for a in agents)
    while_stepping = sum(a.samples_while_stepping for a in agents)
    rate = (events + samples) / took
    verdict = "ok" if stored_steps == steps and result.status == "finished" and stored_samples >= while_stepping \
        else "DROPPED"
    ranks = len(agents) * DEVICES_PER_NODE
    print(f"coordinator intake: {len(agents)} simulated agents x {DEVICES_PER_NODE} devices ({ranks} ranks), "
          f"telemetry at {TELEMETRY_HZ:g} Hz, {steps} steps")
    print(f"  {result.status}: {stored_steps} of {steps} steps stored ({verdict}), {events} rank events and "
          f"{samples} samples sent ({while_stepping} while the steps came), {stored_samples} samples stored, in "
          f"{took:.1f} s")
    print(f"  {rate:,.0f} events/s through the coordinator ({events / took:,.0f} rank step events/s = "
          f"{stored_steps / took:.1f} merged {ranks}-rank steps/s, plus {samples / took:,.0f} samples/s)")
    return {"status": result.status, "ranks": ranks, "steps": steps, "stored_steps": stored_steps,
            "events_per_s": rate, "samples_sent": samples, "samples_while_stepping": while_stepping,
            "samples_stored": stored_samples, "seconds": took, "verdict": verdict}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="steps of each relay-overhead run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each relay-overhead case")
    parser.add_argument("--intake-steps", type=int, default=4000, help="steps of the 64-device intake run (the "
                        "256-device one runs a quarter of them: as many rank events)")
    parser.add_argument("--only", choices=("intake", "relay"), default=None)
    args = parser.parse_args(argv)
    def intake() -> dict:
        return {"64": coordinator_intake(args.intake_steps, agents=2),
                "256": coordinator_intake(args.intake_steps // 4, agents=8)}
    if args.only:
        return {args.only: intake() if args.only == "intake" else relay_overhead(args.steps, args.repeats)}
    results = {"intake": intake(), "relay": relay_overhead(args.steps, args.repeats)}
    return results


if __name__ == "__main__":
    main()
