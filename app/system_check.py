"""Before Qt starts: can this machine open the window? If not, say what to install.

Qt's xcb platform plugin aborts the process ("could not load the Qt platform
plugin xcb") when a system library it links to is missing; on a fresh Debian or
Ubuntu that is usually libxcb-cursor0 and a few other xcb libraries. Here the
dynamic loader is asked (``ldd`` on PySide6's own plugin, nothing imported from
Qt) which of the plugin's libraries it cannot find, and each missing soname is
turned into its Debian package name, so the user gets one ``apt-get install``
line instead of a core dump.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from engine.environment import variable

# Debian names a library's package lib<name><soversion>, with a "-" before the version when the name ends
# in a digit (libxkbcommon-x11.so.0 -> libxkbcommon-x11-0); these few do not follow the rule.
PACKAGE_EXCEPTIONS = {"libglib-2.0.so.0": "libglib2.0-0", "libgthread-2.0.so.0": "libglib2.0-0",
                      "libGLX.so.0": "libglx0", "libGLdispatch.so.0": "libglvnd0", "libz.so.1": "zlib1g",
                      "libharfbuzz.so.0": "libharfbuzz0b"}
_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found", re.M)


def xcb_plugin() -> Path | None:
    """PySide6's xcb platform plugin, found without importing PySide6."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return path if path.exists() else None


def run_ldd(library: Path) -> str:
    """ldd's report, or "" when it cannot be had (then nothing is reported missing and Qt tries)."""
    try:
        return subprocess.run(["ldd", str(library)], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def debian_package(soname: str) -> str:
    """libxcb-cursor.so.0 -> libxcb-cursor0 (Debian's naming rule for shared-library packages)."""
    if soname in PACKAGE_EXCEPTIONS:
        return PACKAGE_EXCEPTIONS[soname]
    name, _, version = soname.partition(".so.")
    version = version.split(".")[0]
    name = name.lower()
    return f"{name}-{version}" if version and name[-1].isdigit() else f"{name}{version}"


def missing_packages(plugin: Path, ldd: Callable[[Path], str] = run_ldd) -> list[str]:
    """The Debian packages of the plugin's libraries the loader cannot find, sorted, each once."""
    return sorted({debian_package(soname) for soname in _NOT_FOUND.findall(ldd(plugin))})


def uses_xcb(environ=os.environ) -> bool:
    """Whether Qt will try the xcb plugin: Linux, no other platform asked for, no Wayland session."""
    platform = variable("QT_QPA_PLATFORM", "", env=environ)
    if not sys.platform.startswith("linux"):
        return False
    return platform.startswith("xcb") or (not platform and not variable("WAYLAND_DISPLAY", env=environ))


def window_problem(environ=os.environ, plugin: Path | None = None,
                   ldd: Callable[[Path], str] | None = None) -> str | None:
    """What stops the window from opening here, with what to do about it; None when nothing seen does."""
    if not uses_xcb(environ):
        return None
    plugin = plugin or xcb_plugin()
    if ldd is None and shutil.which("ldd") is not None:
        ldd = run_ldd
    missing = missing_packages(plugin, ldd) if plugin is not None and ldd is not None else []
    if missing:
        return ("the window needs system libraries that are not installed; on Debian or Ubuntu:\n"
                f"    sudo apt-get install {' '.join(missing)}\n"
                "(the command line needs none of them: python main.py run --help)")
    if not variable("DISPLAY", env=environ):
        return ("no display to open the window on (DISPLAY is not set): run it in a desktop session, "
                "under Xvfb (see the README), or use the command line: python main.py run --help")
    return None
