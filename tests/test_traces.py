"""The trace reader (engine/traces, docs/traces.md): HTA 0.5.0's own figures for two ranks of a real GPU job
reproduced, a trace torch.profiler writes here read back, the straggler and waits of a job made to order, and each
bad input's one line, from the reader and from `main.py trace`."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from engine.cli import main
from engine.results import to_json
from engine.traces import TraceError, json_stream, read_job
from helpers import cli

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`

DATA = Path(__file__).resolve().parent / "data" / "traces"
FOLDER = DATA / "hta_trace_filter"
REFERENCE = json.loads((DATA / "hta_reference.json").read_text())["hta_trace_filter"]
TOLERANCE = 0.5     # percentage points


@pytest.fixture(scope="module")
def job():
    return read_job([FOLDER])


# ---- HTA's figures --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rank", [0, 1])
def test_temporal_breakdown_and_overlap_match_hta(job, rank):
    ours = next(r for r in job.ranks if r.rank == rank)
    hta = REFERENCE[str(rank)]
    for figure in ("idle_pct", "compute_pct", "non_compute_pct", "comm_comp_overlap_pct"):
        assert getattr(ours, figure) == pytest.approx(hta[figure], abs=TOLERANCE), figure
    assert ours.kernel_us == pytest.approx(hta["kernel_us"], rel=1e-3)   # the span both measure against
    assert ours.rank_from == "distributedInfo"


@pytest.mark.parametrize("rank", [0, 1])
def test_idle_by_stream_category_matches_hta(job, rank):
    """Each category as a share of its stream's idle time (HTA's idle_time_ratio), with the same categories."""
    ours = next(r for r in job.ranks if r.rank == rank).idle_by_stream_category_us
    hta = REFERENCE[str(rank)]["idle_by_stream_category_us"]
    assert set(ours) == set(hta)
    for stream, categories in hta.items():
        assert set(ours[stream]) == set(categories), stream
        hta_total, our_total = sum(categories.values()), sum(ours[stream].values())
        for category, us in categories.items():
            hta_share = 100 * us / hta_total if hta_total else 0.0
            our_share = 100 * ours[stream][category] / our_total if our_total else 0.0
            assert our_share == pytest.approx(hta_share, abs=TOLERANCE), (stream, category)


def test_kernel_types_over_the_job_match_hta(job):
    hta = REFERENCE["kernel_type_pct"]
    for kind, share in hta.items():
        assert job.kernel_type_pct.get(kind, 0.0) == pytest.approx(share, abs=TOLERANCE), kind
    assert sum(job.kernel_type_pct.values()) == pytest.approx(100)
    for rank in job.ranks:
        assert sum(rank.kernel_type_pct.values()) == pytest.approx(100)


def test_the_job_as_read(job):
    """HTA's default filter said, the missing 126 ranks said, the iterations and collectives found."""
    assert [r.rank for r in job.ranks] == [0, 1] and job.world_size == 128 and job.missing_ranks == 126
    assert any("2 of the job's 128 ranks read" in note for note in job.notes)
    assert any("#552" in note and "left out" in note for note in job.notes)
    assert [it.iteration for it in job.iterations] == [551]
    for rank in job.ranks:
        assert rank.profiler_steps == [551, 552] and rank.left_out_step == 552
        assert rank.collectives and rank.collectives[0].kernel.startswith("ncclKernel_SendRecv")
        assert rank.gpu_events < rank.gpu_events_read and rank.launches > 0 and rank.cpu_ops > 0
    iteration = job.iterations[0]
    assert 0 <= iteration.job_idle_pct <= min(r.idle_pct for r in iteration.ranks)
    assert {f.code for f in job.findings} >= {"gpu_idle", "ranks_missing"}


def test_small_chunks_read_the_same(monkeypatch, job):
    """Events, numbers and keys cut across the chunks the stream reads read as whole."""
    monkeypatch.setattr(json_stream, "CHUNK_BYTES", 61)
    again = read_job([FOLDER / "sampled_rank-1.json.gz"])
    assert to_json(again.ranks[0]) == to_json(job.ranks[1])


def test_iterations_chosen(job):
    one = read_job([FOLDER], iterations="551:551")
    assert [it.iteration for it in one.iterations] == [551] and one.iterations_chosen == "551:551"
    for ours, everything in zip(one.ranks, job.ranks, strict=True):
        assert 0 < ours.kernel_us <= everything.kernel_us
    with pytest.raises(TraceError, match="--iterations 600:700: no iteration"):
        read_job([FOLDER], iterations="600:700")
    with pytest.raises(TraceError, match="not A:B"):
        read_job([FOLDER], iterations="five")


# ---- a trace torch.profiler writes ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory):
    """Five steps of a tiny model, profiled on the CPU: steps 1 to 3 recorded (wait 1, warmup 1, active 3)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    folder = tmp_path_factory.mktemp("cpu_trace")
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randint(0, 2, (8,))
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(folder))) as profiler:
        for _ in range(6):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            profiler.step()
    (written,) = folder.glob("*.json")
    return written


def test_a_torch_profiler_trace_read_back(cpu_trace):
    job = read_job([cpu_trace])
    (rank,) = job.ranks
    assert rank.rank == 0 and rank.rank_from == "order given"
    assert rank.profiler_steps == [2, 3, 4]       # the active steps, numbered by prof.step()
    assert rank.gpu_events_read == 0 and rank.kernel_us == 0 and rank.cpu_ops > 0
    names = {op.name for op in rank.top_cpu_ops}
    assert names & {"aten::linear", "aten::addmm", "Optimizer.step#SGD.step"}, names
    assert any("no GPU kernels: CPU ops only" in note for note in job.notes)
    assert [f.code for f in job.findings] == ["cpu_only"]
    assert job.straggler is None and job.iterations == []


def test_rank_from_the_file_name(cpu_trace, tmp_path):
    named = tmp_path / "job_rank-3.json"
    shutil.copy(cpu_trace, named)
    (rank,) = read_job([named]).ranks
    assert (rank.rank, rank.rank_from) == (3, "file name")


def test_cli_table_and_cpu_only(cpu_trace, capsys):
    """The table (`main.py trace`'s main in this process: the command itself runs in test_cli_json_shape)."""
    assert main(["trace", str(FOLDER)]) == 0
    table = capsys.readouterr().out
    assert "2 of 128 ranks read" in table and "host wait 75 %" in table and "straggler: rank 1" in table
    assert main(["trace", str(cpu_trace)]) == 0
    assert "no GPU kernels: CPU ops only" in capsys.readouterr().out


def test_cli_json_shape(job):
    """As the reader's, read here by two worker processes (as a folder of 64 MB or more is): the same figures."""
    proc, out = cli("trace", str(FOLDER), "--json", "--workers", "2", check_json=True)
    assert out == json.loads(json.dumps(to_json(job)))
    assert set(out) >= {"ranks", "kernel_type_pct", "iterations", "straggler", "findings"}
    rank = out["ranks"][0]
    assert set(rank) >= {"rank", "idle_pct", "compute_pct", "non_compute_pct", "comm_comp_overlap_pct",
                         "idle_by_stream_category_us", "kernel_type_pct", "wait_at_collectives_us"}
    assert rank["idle_by_stream_category_us"]["7"]["host_wait"] == REFERENCE["0"]["idle_by_stream_category_us"][
        "7"]["host_wait"]
    for finding in out["findings"]:
        assert set(finding) >= {"code", "severity", "text", "devices"}
    assert set(out["iterations"][0]) >= {"iteration", "ranks", "job_idle_pct", "straggler"}


# ---- across ranks: a job made to order ---------------------------------------------------------------------------
def _kineto(rank: int, world: int, kernels: list[tuple[str, int, float, float]], steps=((1, 0, 1000), (2, 1000, 1000)),
            ) -> dict:
    """A small Kineto-style trace: ProfilerSteps, and per kernel (name, stream, start, duration) its launch."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": ts,
               "dur": dur} for n, ts, dur in steps]
    for correlation, (name, stream, ts, dur) in enumerate(kernels, start=1):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": ts - 5, "dur": 2, "args": {"correlation": correlation}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                       "args": {"stream": stream, "correlation": correlation, "device": 0}})
    return {"distributedInfo": {"rank": rank, "world_size": world}, "traceEvents": events}


def _write(path: Path, trace) -> Path:
    text = json.dumps(trace)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_straggler_waits_and_the_job_idle(tmp_path):
    """Three ranks compute, then all-reduce; rank 2 computes longest, so ranks 0 and 1 wait for it at the
    all-reduce (their kernels start earlier and end with its)."""
    allreduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"
    compute_end = {0: 300, 1: 400, 2: 600}
    for rank, end in compute_end.items():
        _write(tmp_path / f"rank{rank}.json", _kineto(rank, 3, [("gemm_kernel", 7, 100, end - 100),
                                                                (allreduce, 20, end + 10, 700 - end - 10 + 100)]))
    job = read_job([tmp_path])
    waits = {r.rank: r.wait_at_collectives_us for r in job.ranks}
    assert waits == {0: pytest.approx(300), 1: pytest.approx(200), 2: pytest.approx(0)}
    assert job.straggler.rank == 2 and job.straggler.wait_set_us == pytest.approx(500)
    assert job.straggler.compute_us > job.straggler.median_compute_us and "computes longer" in job.straggler.text
    (iteration,) = job.iterations
    assert iteration.iteration == 1 and iteration.straggler == 2
    assert iteration.job_idle_pct == pytest.approx(0)      # some rank's kernel runs all along
    assert job.collectives_matched == 1 and "straggler" in {f.code for f in job.findings}


def test_a_bare_array_trace(tmp_path):
    """Chrome's JSON Array Format: the events alone."""
    trace = _kineto(0, 1, [("gemm_kernel", 7, 100, 50), ("gemm_kernel", 7, 200, 50)])["traceEvents"]
    (rank,) = read_job([_write(tmp_path / "t.json", trace)]).ranks
    assert rank.kernel_us == 150 and rank.idle_us == 50 and rank.compute_pct == pytest.approx(100 * 100 / 150)


def test_ns_times_rounded_as_hta_rounds_them(tmp_path):
    """Fractional (ns-resolution) times: starts up to the next µs, ends down (HTA's round_down_time_stamps)."""
    trace = _kineto(0, 1, [("gemm_kernel", 7, 100.4, 10.2), ("gemm_kernel", 7, 120.7, 5.5)],
                    steps=((1, 0.5, 1000), (2, 1000.5, 1000)))
    (rank,) = read_job([_write(tmp_path / "t.json", trace)]).ranks
    assert (rank.kernel_us, rank.idle_us) == (126 - 101, 25 - (110 - 101) - (126 - 121))
    assert rank.idle_by_stream_category_us == {"7": {"other": 0.0, "host_wait": 11.0}}   # launched at 116 > 110


# ---- bad input: one line naming the file ------------------------------------------------------------------------
def _bad_inputs(tmp_path: Path) -> dict[str, tuple[list[Path], str]]:
    not_json = tmp_path / "notes.json"
    not_json.write_text("hello, this is not a trace")
    no_events = _write(tmp_path / "object.json", {"schemaVersion": 1})
    data = (FOLDER / "sampled_rank-0.json.gz").read_bytes()
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes(data[: len(data) // 2])
    plain = gzip.decompress(data)
    cut_plain = tmp_path / "cut.json"
    cut_plain.write_bytes(plain[: len(plain) // 2])
    twice = tmp_path / "twice"
    twice.mkdir()
    shutil.copy(FOLDER / "sampled_rank-0.json.gz", twice / "a.json.gz")
    shutil.copy(FOLDER / "sampled_rank-0.json.gz", twice / "b.json.gz")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(FOLDER / "sampled_rank-0.json.gz", mixed / "rank0.json.gz")
    other = json.loads(gzip.decompress((FOLDER / "sampled_rank-1.json.gz").read_bytes()))
    other["distributedInfo"]["world_size"] = 64
    _write(mixed / "rank1.json.gz", other)
    return {"not JSON": ([not_json], f"{not_json}: not a trace"),
            "no traceEvents": ([no_events], f"{no_events}: not a trace"),
            "truncated gzip": ([truncated], f"{truncated}: truncated"),
            "truncated JSON": ([cut_plain], f"{cut_plain}: truncated"),
            "a rank twice": ([twice], "rank 0 twice"),
            "mixed world sizes": ([mixed], "world size 64, but"),
            "no such file": ([tmp_path / "missing.json"], "no such file")}


def test_bad_input_from_the_reader(tmp_path):
    for what, (paths, said) in _bad_inputs(tmp_path).items():
        with pytest.raises(TraceError) as caught:
            read_job(paths)
        assert said in str(caught.value) and "\n" not in str(caught.value), what


def test_bad_input_from_the_cli(tmp_path, capsys):
    """Each in `main.py trace`'s main (in this process: a second apiece saved), one as a command of its own."""
    bad = _bad_inputs(tmp_path)
    for what, (paths, said) in bad.items():
        assert main(["trace", *map(str, paths)]) == 2, what
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, (what, err)
        assert err.startswith("error: ") and said in err, (what, err)
    paths, said = bad["truncated gzip"]
    proc = cli("trace", *map(str, paths))
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("error: ") and said in proc.stderr, proc.stderr
