# Two commands do all the set-up: `make run` and `make test`.
# Both create or reuse .venv/ at the repo root and install the pinned requirements
# (re-installed only when a requirements file changes).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run lint test test-quick bench soak gpu-check clean

# Python writes each module's bytecode once (__pycache__, git-ignored), even where the environment says not to:
# the app, the CLI and each of the suite's hundreds of processes otherwise compile every module they import
# again (a quarter of a CLI-heavy test file's CPU; about 1.5 s of a loaded machine's app start-up).
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

run: $(STAMP)
	$(PY) main.py

# ruff (pyproject.toml [tool.ruff]) and the import contracts (.importlinter); `make test` runs both first.
lint: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports

# Two phases: the tests that compare figures load moves (marked solo) run alone, after the rest has run on three
# workers (pytest-xdist, a test file to a worker so that its shared runs are made once; the longest files first,
# tests/conftest.py LONGEST_FIRST). Three on two cores: many tests wait (on a process's start, a rendezvous, a
# hang timeout), and a third worker fills those waits (tests/README.md). Both phases always run.
test: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder -m "not soak and not solo" --durations=15; \
	rest=$$?; echo "--- the solo tests, one at a time"; \
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -m "solo and not soak" --durations=5; \
	solo=$$?; exit $$(( rest ? rest : solo ))

# Between edits: the unit and Qt-free tests that launch no training (tests marked quick), under 2 minutes.
test-quick: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -m quick --durations=5

bench: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m bench

soak: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -m soak tests/soak

# On a machine with an NVIDIA GPU: the system python3 (torch, torchvision, nvidia-ml-py, psutil and
# pytest; no venv, no Qt). Figures go to gpu-check.json; see tools/gpu_check.py.
gpu-check:
	$(PYTHON) tools/gpu_check.py --out gpu-check.json

clean:
	rm -rf $(VENV) .pytest_cache
