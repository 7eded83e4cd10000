"""``python -m forked_probe``: what a process finds when it starts, as JSON on stdout, for tests/test_forkserver.py.

PROBE_FD: write "hello" to this descriptor; PROBE_SLEEP: sleep this long first; PROBE_RAISE: raise
ValueError(its text); PROBE_TORCH: import what a rank imports before looking; PROBE_EXIT: the exit status;
PROBE_MODULES: comma-separated modules, each said imported or not when the probe began.
"""
import os
import sys

TORCH_BEFORE_US = "torch" in sys.modules  # preloaded by a fork server, not by a fresh interpreter
BEFORE_US = {name: name in sys.modules for name in os.environ.get("PROBE_MODULES", "").split(",") if name}
if os.environ.get("PROBE_TORCH"):
    import torch.distributed.pipelining  # noqa: F401

import gc  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

if os.environ.get("PROBE_SLEEP"):
    time.sleep(float(os.environ["PROBE_SLEEP"]))
if os.environ.get("PROBE_RAISE"):
    raise ValueError(os.environ["PROBE_RAISE"])
if os.environ.get("PROBE_FD"):
    os.write(int(os.environ["PROBE_FD"]), b"hello")
with open("/proc/self/cmdline", "rb") as f:
    cmdline = f.read().rstrip(b"\0").decode()


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


fds = sorted(fd for fd in map(int, os.listdir("/proc/self/fd")) if is_open(fd))  # less the listing's own
json.dump({"env": dict(os.environ), "cwd": os.getcwd(), "argv": sys.argv[1:], "name": __name__, "path": sys.path,
           "stdin": sys.stdin.read(), "fds": fds,
           "cmdline": cmdline, "torch_preloaded": TORCH_BEFORE_US, "preloaded": BEFORE_US,
           "frozen": gc.get_freeze_count(), "stdout_buffered": not sys.stdout.write_through,
           "ppid": os.getppid()}, sys.stdout)
sys.stdout.flush()
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
