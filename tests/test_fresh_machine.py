"""A fresh machine: a missing system library or a mistyped command gets a line that says what to do."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app import system_check
from procs import ROOT

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`

LDD_WITHOUT_XCB_CURSOR = """\
\tlinux-vdso.so.1 (0x00007ffd)
\tlibQt6XcbQpa.so.6 => /venv/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f)
\tlibxcb-cursor.so.0 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxkbcommon-x11.so.0 => not found
\tlibxcb.so.1 => /lib/x86_64-linux-gnu/libxcb.so.1 (0x00007f)
"""


@pytest.mark.parametrize("soname, package", [
    ("libxcb-cursor.so.0", "libxcb-cursor0"), ("libxcb-icccm.so.4", "libxcb-icccm4"),
    ("libxcb-keysyms.so.1", "libxcb-keysyms1"), ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
    ("libX11-xcb.so.1", "libx11-xcb1"), ("libGL.so.1", "libgl1"), ("libglib-2.0.so.0", "libglib2.0-0"),
])
def test_a_missing_library_is_named_by_its_debian_package(soname, package):
    assert system_check.debian_package(soname) == package


def test_the_install_line_names_each_missing_package_once():
    problem = system_check.window_problem({"DISPLAY": ":0"}, plugin=Path("libqxcb.so"),
                                          ldd=lambda _: LDD_WITHOUT_XCB_CURSOR)
    assert "sudo apt-get install libxcb-cursor0 libxcb-icccm4 libxkbcommon-x11-0\n" in problem


def test_nothing_missing_and_a_display_opens_the_window_and_other_platforms_are_not_checked():
    found = lambda _: "\tlibxcb.so.1 => /lib/libxcb.so.1 (0x1)\n"  # noqa: E731
    assert system_check.window_problem({"DISPLAY": ":0"}, plugin=Path("libqxcb.so"), ldd=found) is None
    assert "DISPLAY is not set" in system_check.window_problem({}, plugin=Path("libqxcb.so"), ldd=found)
    for environ in ({"QT_QPA_PLATFORM": "offscreen"}, {"WAYLAND_DISPLAY": "wayland-0"}):
        assert system_check.window_problem(environ, plugin=Path("libqxcb.so"),
                                           ldd=lambda _: LDD_WITHOUT_XCB_CURSOR) is None


def _main_in_child(argv: list[str], setup: str = "") -> subprocess.CompletedProcess:
    """main.main(argv) in a fresh interpreter; fails if it imported Qt or torch on the way."""
    code = "import sys\n" + setup + textwrap.dedent(f"""
        import main
        code = main.main({argv!r})
        loaded = [m for m in ("PySide6", "pyqtgraph", "torch") if m in sys.modules]
        assert not loaded, loaded
        sys.exit(code)
    """)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}  # no DISPLAY, no QT_QPA_PLATFORM: as `make run` sees
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


def test_make_run_without_the_xcb_libraries_prints_the_install_line_and_exits_non_zero():
    proc = _main_in_child([], setup=textwrap.dedent("""
        from pathlib import Path
        from app import system_check
        system_check.run_ldd = lambda plugin: "\\tlibxcb-cursor.so.0 => not found\\n"
        system_check.xcb_plugin = lambda: Path("libqxcb.so")
    """))
    assert proc.returncode == 1, proc.stderr
    assert "sudo apt-get install libxcb-cursor0" in proc.stderr


def test_a_mistyped_command_is_an_error_naming_the_commands_without_qt():
    proc = _main_in_child(["rnu"])
    assert proc.returncode == 2, proc.stderr
    assert "unknown command 'rnu' (did you mean 'run'?)" in proc.stderr
    assert "run, runs, experiment, export, what-if, models, devices" in proc.stderr


def test_the_listed_commands_are_the_parsers():
    from engine.cli import COMMANDS, build_parser
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert tuple(sub.choices) == COMMANDS
