"""engine/run/event_writer.py: the worker's steps go to the session a few together, everything else at once, in the
order sent, and nothing held is lost at the end."""
from __future__ import annotations

import io

import pytest

from engine.run.event_writer import EventWriter

pytestmark = pytest.mark.quick


class Pipe(io.StringIO):
    def __init__(self):
        super().__init__()
        self.flushes = 0

    def flush(self):
        self.flushes += 1


def test_steps_are_held_and_go_with_the_next_line_in_order():
    out = Pipe()
    writer = EventWriter(out, hold_s=3600)   # held as long as the test: no clock decides
    writer.write("step 1", hold=True)
    writer.write("step 2", hold=True)
    writer.write_due()
    assert out.getvalue() == "" and out.flushes == 0
    writer.write("warning")
    assert out.getvalue() == "step 1\nstep 2\nwarning\n" and out.flushes == 1   # one write, one wake-up
    writer.write("step 3", hold=True)
    writer.write_all()
    writer.write_all()
    assert out.getvalue().endswith("warning\nstep 3\n") and out.flushes == 2


def test_a_held_line_is_written_once_it_is_due():
    out = Pipe()
    writer = EventWriter(out, hold_s=0.0)
    writer.write("step 1", hold=True)
    assert out.getvalue() == "step 1\n"


def test_a_closed_reader_ends_nothing():
    out = Pipe()
    out.close()
    writer = EventWriter(out, hold_s=0.0)
    writer.write("finished")   # ValueError on a closed file: the run still ends cleanly
    writer.write_all()
