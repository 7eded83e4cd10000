"""engine/run/held_lines.py: a rank's event lines read a few at a time off a real pipe, none lost, in order, and
its end (a last line without a newline, undecodable bytes) read as the line-by-line reader read it."""
from __future__ import annotations

import fcntl
import os
import threading

import pytest

from engine.run.held_lines import PIPE_BYTES, READ_BYTES, enlarge_pipe, held_lines

pytestmark = pytest.mark.quick


def test_lines_written_during_a_hold_come_in_one_pass():
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"one\n")
    # written at once: before the reader's first read (one read) or during its hold (the pass's second read)
    writer = threading.Thread(target=lambda: (os.write(write_fd, b"two\nthree\nfou"), os.close(write_fd)))
    writer.start()
    passes = list(held_lines(read_fd, hold_s=2.0))
    writer.join()
    os.close(read_fd)
    assert passes == [["one", "two", "three"], ["fou"]]   # the last line without its newline still read


def test_a_writer_that_keeps_writing_gets_its_lines_read_in_passes_in_order():
    read_fd, write_fd = os.pipe()
    enlarge_pipe(read_fd)
    lines = [f"event {k} " + "x" * 200 for k in range(20_000)]   # about 4 MB: many full reads and passes

    def write():
        with os.fdopen(write_fd, "w", buffering=1) as out:
            for line in lines:
                out.write(line + "\n")
    writer = threading.Thread(target=write)
    writer.start()
    passes = list(held_lines(read_fd, hold_s=0.01))
    writer.join()
    os.close(read_fd)
    assert [line for batch in passes for line in batch] == lines
    assert 1 < len(passes) < len(lines) / 10   # read together, yet not all in one


def test_undecodable_bytes_are_replaced_and_a_silent_pipe_ends_with_nothing():
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"ok\n\xff\xfe\n")
    os.close(write_fd)
    assert list(held_lines(read_fd, hold_s=0.0)) == [["ok", "\ufffd\ufffd"]]
    os.close(read_fd)
    read_fd, write_fd = os.pipe()
    os.close(write_fd)
    assert list(held_lines(read_fd, hold_s=0.0)) == []
    os.close(read_fd)


@pytest.mark.skipif(not hasattr(fcntl, "F_GETPIPE_SZ"), reason="Linux pipes only")
def test_the_pipe_is_enlarged_so_that_a_hold_does_not_stop_a_fast_writer():
    read_fd, write_fd = os.pipe()
    enlarged = enlarge_pipe(read_fd)
    size = fcntl.fcntl(read_fd, fcntl.F_GETPIPE_SZ)
    # the system's limits may keep it at its default (or less, past a user's pipe pages): then it says so
    assert (enlarged and size == PIPE_BYTES) or (not enlarged and size <= READ_BYTES)
    os.close(read_fd)
    os.close(write_fd)
