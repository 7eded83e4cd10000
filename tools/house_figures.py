"""The house's figures (docs/architecture.md, "The house's figures"): what makes a change to the code expensive,
counted the same way each time. `python -m tools.house_figures` prints them; tests/test_house.py holds the limits.

No import of the code it counts: it reads the files (ast), so it runs anywhere in a second.
"""
from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("app", "engine")
# Readers and writers of formats that are not ours (the exports; Kineto traces and what a trace job writes of
# them) and the store's repair of rows older versions wrote: their dicts are read as they come.
FOREIGN = ("engine/export/", "engine/traces/", "engine/store/repair.py")
JSON_CALL = re.compile(r"json\.(dumps|loads|dump|load)\(")
GET_READ = re.compile(r"\.get\(\"[^\"]+\"")
FILE_CAP = 450        # lines a file may have
FUNCTION_CAP = 80     # lines a function may have


@dataclass
class HouseFigures:
    json_files: list[str] = field(default_factory=list)          # files that write or read JSON themselves
    get_reads: int = 0                                           # dict .get("...") reads, foreign formats not counted
    get_reads_foreign: int = 0                                   # ... in the foreign formats' readers
    engine_top_level: list[str] = field(default_factory=list)    # files at engine/'s top level
    long_functions: list[tuple[int, str]] = field(default_factory=list)   # (lines, "path:line name") over the cap
    functions_over_60: int = 0
    long_files: list[tuple[int, str]] = field(default_factory=list)       # (lines, path) over the cap
    largest_files: list[tuple[int, str]] = field(default_factory=list)    # the five longest
    window_controls: list[str] = field(default_factory=list)     # controllers reaching into window.controls
    engine_imports_splitscope: list[str] = field(default_factory=list)   # an arrow running back up


def python_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for folder in CODE for p in (root / folder).rglob("*.py") if "__pycache__" not in p.parts)


def measure(root: Path = ROOT) -> HouseFigures:
    figures = HouseFigures()
    sizes = []
    for path in python_files(root):
        name = path.relative_to(root).as_posix()
        text = path.read_text()
        foreign = name.startswith(FOREIGN)
        if JSON_CALL.search(text) and not name.startswith(FOREIGN[:2]):
            figures.json_files.append(name)
        reads = len(GET_READ.findall(text))
        if foreign:
            figures.get_reads_foreign += reads
        else:
            figures.get_reads += reads
        lines = text.count("\n") + (not text.endswith("\n") and bool(text))
        sizes.append((lines, name))
        if lines > FILE_CAP:
            figures.long_files.append((lines, name))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                figures.functions_over_60 += length > 60
                if length > FUNCTION_CAP:
                    figures.long_functions.append((length, f"{name}:{node.lineno} {node.name}"))
            if name.startswith("engine/") and isinstance(node, ast.Import | ast.ImportFrom):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(m == "splitscope" or m.startswith("splitscope.") for m in modules):
                    figures.engine_imports_splitscope.append(name)
        if name.startswith("app/controllers/") and "window.controls" in text:
            figures.window_controls.append(name)
    figures.engine_top_level = sorted(p.name for p in (root / "engine").glob("*.py"))
    figures.largest_files = sorted(sizes, reverse=True)[:5]
    return figures


def main() -> int:
    f = measure()
    print(f"files that write or read JSON themselves: {len(f.json_files)} ({', '.join(f.json_files)})")
    print(f'dict .get("...") reads: {f.get_reads} (and {f.get_reads_foreign} in the foreign formats\' readers)')
    print(f"files at engine/'s top level: {len(f.engine_top_level)}")
    print(f"functions over {FUNCTION_CAP} lines: {len(f.long_functions)}; over 60: {f.functions_over_60}")
    for length, where in f.long_functions:
        print(f"  {length} {where}")
    print(f"files over {FILE_CAP} lines: {len(f.long_files)}; the longest: "
          + ", ".join(f"{name} {lines}" for lines, name in f.largest_files))
    print(f"controllers touching window.controls: {len(f.window_controls)}; engine importing splitscope: "
          f"{len(f.engine_imports_splitscope)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
