"""Fuzzing (issue 6): config JSON, CLI options and protocol lines give a result or a clear error, never a traceback."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from engine import cli
from engine.cli import run_command
from engine.config import ConfigError, ExperimentConfig
from engine.events import NAMES
from engine.rules import problems
from engine.wire import worker as protocol

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10)
fields = st.sampled_from(["strategy", "model", "model_file", "width", "depth", "devices", "split", "micro_batches",
                          "split_size", "schedule", "batch_size", "steps", "warmup", "seed", "lr", "bogus"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(fields, json_values, max_size=6))
def test_config_json_gives_a_config_or_a_clear_error(data):
    try:
        config = ExperimentConfig.from_json(json.dumps(data))
    except ConfigError as exc:
        assert exc.problems and all(p.option and p.message for p in exc.problems)
        return
    for problem in problems(config):   # checks on the parsed config never raise either
        assert str(problem).startswith("--")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_protocol_reader_never_raises(line):
    events = list(protocol.read_events([line]))
    assert all(type(e) in NAMES for e in events)


option_values = st.one_of(st.sampled_from(["0", "-1", "2", "abc", "", "1,0", "cpu:0", "cuda:9", "mlp", "1e9",
                                           "pipeline", "nan", "3,2"]), st.text(max_size=8))
options = st.sampled_from(["--strategy", "--model", "--width", "--depth", "--devices", "--split", "--micro-batches",
                           "--split-size", "--schedule", "--batch-size", "--steps", "--warmup", "--seed", "--lr",
                           "--telemetry-hz", "--hang-timeout", "--nonsense"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(options, option_values), min_size=1, max_size=4))
def test_cli_options_give_a_run_or_a_clear_error(monkeypatch, capsys, pairs):
    # Launching is replaced by a marker: what is fuzzed is parsing and validation.
    launched = []
    monkeypatch.setattr(run_command, "cmd_run_validated", lambda config, args: launched.append(config) or 0)
    argv = ["run"] + [x for pair in pairs for x in pair]
    code = cli.main(argv)
    err = capsys.readouterr().err
    if code == 2:
        lines = err.strip().split("\n")  # not splitlines(): a fuzzed value may hold other line breaks
        assert err.strip() and all(line.startswith(("error:", "warning:")) for line in lines)
    else:
        assert code == 0 and len(launched) == 1
