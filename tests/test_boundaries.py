"""The architecture's rules: the import contracts, the CLI runs without Qt, no leftover processes."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import procs
from procs import ROOT


def test_the_import_contracts_hold():
    """.importlinter: no Qt, pyqtgraph or app in engine/; NVML's wrapper lowest in telemetry; no import
    circles among the engine's or the app's modules (type-checking imports counted); the config imports no registry."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_no_strategy_name_is_compared_outside_the_strategies():
    """Behaviour hangs on a strategy's capabilities (engine/strategies/strategy.py), not on its name."""
    from engine.strategies import STRATEGIES
    names = "|".join(re.escape(n) for n in STRATEGIES)
    compared = re.compile(rf"""(==|!=|\bin\s*[(\[{{]|\bin)\s*["']({names})["']|["']({names})["']\s*(==|!=)""")
    offenders = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
                 for folder in ("engine", "app") for path in (ROOT / folder).rglob("*.py")
                 if "strategies" not in path.parts
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if compared.search(line) and not re.search(r"\bfor\b", line)]  # a preset's list is no branch
    assert offenders == []


def test_every_strategy_is_one_registered_class_with_its_description():
    from engine.strategies import STRATEGIES, Strategy
    from engine.strategies.pipeline.strategy import ModelParallel, Pipeline
    for name, strategy in STRATEGIES.items():
        assert isinstance(strategy, Strategy) and strategy.name == name and len(strategy.description) > 20
    assert isinstance(STRATEGIES["model-parallel"], Pipeline) and type(STRATEGIES["model-parallel"]) is ModelParallel
    assert [n for n, s in STRATEGIES.items() if s.uses_split] == ["model-parallel", "pipeline"]


def test_leftover_process_detector_sees_a_leaked_process():
    # The autouse fixture relies on this: a tagged child is found, even after the test forgets it.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert child.pid in [p.pid for p in procs.tagged_processes()]
    finally:
        child.kill()
        child.wait()
    assert child.pid not in [p.pid for p in procs.tagged_processes()]
