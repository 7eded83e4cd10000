"""Progress on stderr: a bar redrawn in place on a terminal, a line every tenth of the run otherwise."""
from __future__ import annotations

import sys
import threading
import time

from engine.events import Log, Warned, WorkerEvent
from engine.results import Step


class Progress:
    def __init__(self, total_steps: int, enabled: bool = True, stream=None):
        self.total = total_steps
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()
        self._lock = threading.Lock()
        self._last_reported = -1
        self._start = time.monotonic()

    def on_event(self, event: WorkerEvent) -> None:
        if not self.enabled:
            return
        with self._lock:
            match event:
                case Step():
                    self._step(event)
                case Warned():
                    self._line(f"warning: {event.message}")
                case Log():
                    self._line(f"log: {event.message}")

    def _step(self, event: Step) -> None:
        done = event.step + 1
        text = (f"step {done}{f'/{self.total}' if self.total else ''}  {event.throughput or 0:.0f} samples/s"
                + (f"  loss {event.loss:.4f}" if event.loss is not None else ""))
        if not self.total:   # a watched script that ends by itself: no end to show, a line every 10 steps
            if done == 1 or done % 10 == 0:
                self._line(text)
            return
        left = (time.monotonic() - self._start) / done * (self.total - done)
        text += f"  ~{left:.0f}s left"
        if self.tty:
            width = 24
            filled = int(width * done / self.total)
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}\x1b[K")
            self.stream.flush()
        elif done * 10 // self.total != self._last_reported or done == self.total:
            self._last_reported = done * 10 // self.total
            self._line(text)

    def _line(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
