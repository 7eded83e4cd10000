"""Installable as users install tools (``pip install .``, pyproject.toml): the ``splitscope`` command is
``python main.py``, the dependencies are requirements.txt's pins, and what the app reads from its package
(its style and icons) is shipped with it."""
from __future__ import annotations

import importlib
import tomllib
from fnmatch import fnmatch

import pytest

from procs import ROOT

pytestmark = pytest.mark.quick

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_dependencies_are_the_requirements_pins():
    pins = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert sorted(PROJECT["project"]["dependencies"]) == sorted(pins)


def test_the_console_script_is_main_py():
    module, _, name = PROJECT["project"]["scripts"]["splitscope"].partition(":")
    command = importlib.import_module(module)
    assert callable(getattr(command, name))
    assert "from splitscope.command import main" in (ROOT / "main.py").read_text()


def test_every_package_and_the_apps_own_files_are_shipped():
    setuptools = PROJECT["tool"]["setuptools"]
    include = setuptools["packages"]["find"]["include"]
    packages = {p.parent.relative_to(ROOT).parts[0] for p in ROOT.glob("*/__init__.py")} - {"tests", "bench"}
    assert all(any(fnmatch(name, pattern) for pattern in include) for name in packages), packages
    shipped = [f for f in (ROOT / "app" / "resources").rglob("*") if f.is_file()]
    assert shipped
    for f in shipped:
        inside = f.relative_to(ROOT / "app").as_posix()
        assert any(fnmatch(inside, pattern) for pattern in setuptools["package-data"]["app"]), inside
