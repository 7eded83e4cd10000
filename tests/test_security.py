"""Security: every socket a run listens on is bound to loopback."""
from __future__ import annotations

import ipaddress
import threading

import psutil

from engine.config import ExperimentConfig
from engine.results import Step
from engine.run.session import RunSession
from procs import tagged_processes


def listening_sockets() -> list[tuple[int, str]]:
    found = []
    for proc in tagged_processes():
        try:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found.append((proc.pid, conn.laddr.ip))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_rendezvous_and_ranks_listen_on_loopback_only():
    stepping = threading.Event()
    config = ExperimentConfig(strategy="ddp", devices="cpu:2", model="mlp", width=64, depth=2, batch_size=64,
                              steps=100000, warmup=0)
    session = RunSession(config, on_event=lambda e: isinstance(e, Step) and e.step >= 2 and stepping.set())
    session.start()
    try:
        assert stepping.wait(60)
        sockets = listening_sockets()
    finally:
        session.stop()
        session.wait(10)
    assert sockets, "a ddp run listens for its rendezvous"
    for pid, ip in sockets:
        assert ipaddress.ip_address(ip).is_loopback, (pid, ip)
