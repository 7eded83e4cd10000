"""The FLOP counter against the analytic count (issue 33): torch's formulas, credited to the device that ran
the work (engine/measure/flops.py)."""
from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

from engine.config import ExperimentConfig
from engine.measure.flops import DeviceFlops, carried
from engine.measure.timing import StepTimer
from engine.models.build import build

quick = pytest.mark.quick   # launches no training, opens no window: `make test-quick`


def analytic_mlp_flops(model: nn.Module, batch: int) -> int:
    """A step of Linear layers: forward 2*B*in*out each; backward the weights' gradient (2*B*in*out) and the
    input's (2*B*in*out), except the first layer's input, which needs none."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    return sum(2 * batch * m.in_features * m.out_features * (2 if i == 0 else 3) for i, m in enumerate(linears))


@quick
def test_the_counted_mlp_step_is_the_analytic_count():
    config = ExperimentConfig(model="mlp", width=256, depth=4, batch_size=64)
    spec = build(config)
    model = spec.whole()
    inputs, targets = next(spec.data.batches(64))
    flops = DeviceFlops("cpu:0")
    with flops.counting():
        spec.loss_fn(model(inputs), targets).backward()
    expected = analytic_mlp_flops(model, 64)
    assert abs(flops.by_device["cpu:0"] - expected) <= 0.01 * expected, (flops.by_device, expected)


@quick
def test_each_operation_is_credited_to_the_span_its_thread_times_and_threads_carry_the_counter():
    """Two CPU virtual devices' work on two threads (as data-parallel's device threads): each device gets its
    own multiply's FLOPs; work outside any span is the rank's own device's."""
    timer, flops = StepTimer(), DeviceFlops("cpu:0")
    a = torch.randn(32, 64)
    b = torch.randn(64, 16)

    def on_device(name: str, job):
        with timer.span(name, "forward"):
            job()

    with flops.counting():
        run_there = carried()

        def other_thread():
            with run_there():
                on_device("cpu:1", lambda: a @ b @ b.T)
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        on_device("cpu:0", lambda: a @ b)
        a @ b   # outside any span
    one = 2 * 32 * 64 * 16
    assert flops.by_device == {"cpu:1": one + 2 * 32 * 16 * 64, "cpu:0": 2 * one}
    a @ b   # after counting: not counted
    assert flops.by_device["cpu:0"] == 2 * one


@quick
def test_known_gpus_have_their_datasheet_figure_and_others_none():
    from engine.measure.peak import datasheet_peak
    h200 = datasheet_peak("NVIDIA H200", "bfloat16")
    assert h200.flops_per_s == 989.5e12 and "H200 SXM" in h200.source and "dense" in h200.source
    assert datasheet_peak("NVIDIA H200 NVL", "bfloat16").flops_per_s == 835.5e12
    assert datasheet_peak("NVIDIA H100 80GB HBM3", "float32").flops_per_s == 67e12
    assert datasheet_peak("NVIDIA H100 80GB HBM3", "float32", tf32=True).flops_per_s == 494.5e12
    assert datasheet_peak("NVIDIA L4", "bfloat16").flops_per_s == 121e12
    assert datasheet_peak("NVIDIA L40S", "bfloat16").flops_per_s == 366.5e12
    assert datasheet_peak("NVIDIA GeForce GTX 1080", "float32") is None


@quick
def test_a_cpu_devices_peak_is_measured_once_then_read_from_the_cache(tmp_path, monkeypatch):
    from engine.devices import Device
    from engine.measure import peak
    monkeypatch.setenv("SPLITSCOPE_CACHE_DIR", str(tmp_path))
    device = Device("cpu:0", "cpu", 0, core=None)
    first = peak.measured_peak(device, "float32")   # its time is make bench's (bench/efficiency_bench.py)
    assert first.flops_per_s > 1e8 and first.source.startswith("measured: ")
    assert (tmp_path / "peaks.json").exists()
    monkeypatch.setattr(peak, "_measure", lambda *a: (_ for _ in ()).throw(AssertionError("measured again")))
    assert peak.measured_peak(device, "float32") == first


@quick
def test_energy_per_step_and_samples_per_joule_come_from_the_counters_power_over_the_measured_steps():
    """A GPU's energy counter (DeviceSample.energy_j) read over the measured steps: its mean power times the mean
    step is the energy a step, and the samples a step over it the samples per joule; a device without a counter
    has none, said once."""
    from engine.record.efficiency import with_energy
    from engine.results.efficiency import DeviceEfficiency, Efficiency, Peak
    from engine.telemetry.sample import DeviceSample
    from engine.telemetry.summary import TelemetryTotals
    totals = TelemetryTotals(["cuda:0", "cpu:0"], warmup=1, rate_hz=10)
    # 300 W during the measured steps (t 1..3 s); the warm-up step's samples (t < 1) are not counted
    totals.add_samples([DeviceSample(t=t / 10, device="cuda:0", energy_j=(50.0 if t < 10 else 300.0 * t / 10))
                        for t in range(31)] + [DeviceSample(t=1.5, device="cpu:0", util=50.0)])
    totals.add_step(0, 0.0, 1.0)
    totals.add_step(1, 1.0, 2.0)
    totals.add_step(2, 2.0, 3.0)
    totals.finish()
    telemetry = totals.summary()
    assert telemetry.power_w[0] == pytest.approx(300.0) and telemetry.power_w[1] is None
    peak = Peak(1e12, "measured: test")
    efficiency = Efficiency([DeviceEfficiency("cuda:0", 1e11, 0.5, 0.4, measured_peak=peak),
                             DeviceEfficiency("cpu:0", 1e9, 0.5, 0.4, measured_peak=peak)], samples_per_step=600)
    gpu, cpu = with_energy(efficiency, ["cuda:0", "cpu:0"], telemetry).devices
    assert gpu.energy_j_per_step == pytest.approx(150.0) and cpu.energy_j_per_step is None
    (note,) = with_energy(efficiency, ["cuda:0", "cpu:0"], telemetry).notes
    assert note.startswith("energy: not measured on cpu:0 (a CPU core has no energy counter of its own")
    both = with_energy(Efficiency([efficiency.devices[0]], samples_per_step=600), ["cuda:0"], telemetry)
    assert both.samples_per_joule == pytest.approx(600 / 150.0) and both.notes == []
    assert both.mfu == pytest.approx(1e11 / 0.5 / 1e12)


@quick
def test_the_split_views_blocks_carry_their_flops_per_sample():
    """The planner's block profile counts each block's forward+backward FLOPs per sample (the split view's
    FLOPs column): the analytic count of its Linear layers, the first block's input needing no gradient."""
    from engine.planner.planning import block_costs
    spec = build(ExperimentConfig(model="mlp", width=128, depth=4, batch_size=32))
    blocks = block_costs(spec, 32)
    for i, ((_, module), info) in enumerate(zip(spec.blocks, blocks, strict=True)):
        linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
        expected = sum(2 * m.in_features * m.out_features * (2 if i == 0 else 3) for m in linears)
        assert info.flops == expected, (info.name, info.flops, expected)


@quick
def test_measuring_the_peak_leaves_the_runs_random_numbers_as_they_were(tmp_path, monkeypatch):
    """A machine's first run measures the peak after the model is built and seeded: the run's random draws
    (dropout, data) must be those of every later run, which reads the peak from the cache."""
    from engine.devices import Device
    from engine.measure import peak
    monkeypatch.setenv("SPLITSCOPE_CACHE_DIR", str(tmp_path))
    torch.manual_seed(7)
    expected = torch.randn(4)
    torch.manual_seed(7)
    peak.measured_peak(Device("cpu:0", "cpu", 0), "float32")
    assert torch.equal(torch.randn(4), expected)


@quick
def test_a_gpu_slice_or_another_gpus_name_gets_no_datasheet_figure():
    from engine.measure.peak import datasheet_peak
    assert datasheet_peak("NVIDIA RTX A1000", "float32") is None          # not an A100
    assert datasheet_peak("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "bfloat16") is None   # a seventh of one
    assert "GH200" in datasheet_peak("NVIDIA GH200 480GB", "bfloat16").source


@quick
def test_attention_on_a_cpu_is_counted_and_a_formula_that_fails_counts_nothing_without_failing_the_step(monkeypatch):
    from torch.nn.functional import scaled_dot_product_attention

    from engine.measure import flops as flops_module
    q = torch.randn(2, 4, 16, 8, requires_grad=True)
    counted = DeviceFlops("cpu:0")
    with counted.counting():
        scaled_dot_product_attention(q, q, q).sum().backward()
    # torch's formulas for the CUDA kernels: forward QK^T and AV (2 * 2 * b * h * s * s * d), backward 2.5 times that
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count
    shape = tuple(q.shape)
    expected = sdpa_flop_count(shape, shape, shape) + sdpa_backward_flop_count(shape, shape, shape, shape)
    assert counted.by_device["cpu:0"] == expected == 2 * 2 * 2 * 4 * 16 * 16 * 8 * 3.5, counted.by_device
    # a formula that cannot take its arguments: the step runs on, the operation is named, its count is 0
    def broken(*args, **kwargs):
        raise AssertionError("shapes a formula cannot take")
    monkeypatch.setitem(flops_module.FORMULAS, torch.ops.aten.mm, broken)
    counted = DeviceFlops("cpu:0")
    with counted.counting():
        out = torch.randn(3, 4) @ torch.randn(4, 5)
    assert out.shape == (3, 5) and counted.by_device == {} and "aten.mm" in counted.uncounted


def analytic_rnn_flops(gates: int, input_size: int, hidden: int, layers: int, tokens: int) -> int:
    """A step of a stacked RNN (LSTM 4 gates, GRU 3, RNN 1), one direction: forward 2 x gates x hidden x
    (input + hidden) a token each layer; backward twice that (the weights' gradients and the data's), less the
    first layer's input gradient, which its input (data) needs none of. Biases and gate non-linearities: none."""
    total = 0
    for layer in range(layers):
        inputs = input_size if layer == 0 else hidden
        forward = 2 * tokens * gates * hidden * (inputs + hidden)
        total += 3 * forward - (2 * tokens * gates * hidden * inputs if layer == 0 else 0)
    return total


def counted_step(module: nn.Module, inputs: torch.Tensor) -> DeviceFlops:
    flops = DeviceFlops("cpu:0")
    with flops.counting():
        output = module(inputs)
        (output[0] if isinstance(output, tuple) else output).sum().backward()
    return flops


@quick
@pytest.mark.parametrize("kind, gates", [("LSTM", 4), ("GRU", 3)])
@pytest.mark.parametrize("batch_first", [False, True])
def test_a_recurrent_step_is_the_analytic_count(kind, gates, batch_first):
    """A CPU's float32 LSTM runs as oneDNN kernels (mkldnn_rnn_layer and its backward), which torch has no
    formula for (engine/measure/flop_formulas.py has); a GRU as matmuls, which it has."""
    seq, batch, size, hidden = 16, 8, 32, 64
    torch.manual_seed(0)
    module = getattr(nn, kind)(size, hidden, num_layers=2, batch_first=batch_first)
    inputs = torch.randn((batch, seq, size) if batch_first else (seq, batch, size))
    flops = counted_step(module, inputs)
    expected = analytic_rnn_flops(gates, size, hidden, 2, seq * batch)
    assert abs(flops.by_device["cpu:0"] - expected) <= 0.05 * expected, (flops.by_device, expected)
    assert flops.unformulated == {} and flops.uncounted == {}, (flops.unformulated, flops.uncounted)


def _cudnn_lstm_arguments(size, hidden, proj, layers, seq, batch):
    """``aten._cudnn_rnn``'s arguments as torch's LSTM passes them (its flat weights), on the meta device: no
    GPU needed, and the op's meta kernel runs it."""
    module = nn.LSTM(size, hidden, num_layers=layers, bidirectional=True, proj_size=proj, device="meta")
    weights = list(module._flat_weights)
    inputs = torch.empty(seq, batch, size, device="meta")
    hx = torch.empty(2 * layers, batch, proj, device="meta")
    cx = torch.empty(2 * layers, batch, hidden, device="meta")
    return module, weights, inputs, hx, cx


@quick
def test_cudnns_rnn_kernels_are_counted_from_their_weights_and_the_gradients_asked_for():
    """CUDA's LSTM/GRU/RNN (``_cudnn_rnn`` and its backward), checked here without a GPU: a bidirectional
    LSTM with a projection, its forward through the counter on meta tensors, its backward's formula on
    fabricated arguments (the backward has no meta kernel), against the analytic count."""
    from engine.measure.flops import FORMULAS
    aten = torch.ops.aten
    size, hidden, proj, layers, seq, batch = 24, 32, 16, 2, 5, 3
    module, weights, inputs, hx, cx = _cudnn_lstm_arguments(size, hidden, proj, layers, seq, batch)
    tokens = seq * batch
    per_direction = [4 * hidden * (size if layer == 0 else 2 * proj) + 4 * hidden * proj + proj * hidden
                     for layer in range(layers)]
    forward = 2 * tokens * 2 * sum(per_direction)
    flops = DeviceFlops("cpu:0")
    with flops.counting():
        output, *_ = aten._cudnn_rnn.default(inputs, weights, 5, None, hx, cx, 2, hidden, proj, layers, False, 0.0,
                                             True, True, [], None)
    assert output.shape == (seq, batch, 2 * proj) and flops.by_device == {"cpu:0": forward}, flops.by_device

    def backward(mask):
        return FORMULAS[aten._cudnn_rnn_backward](
            inputs, weights, 5, None, hx, cx, output, output, None, None, 2, hidden, proj, layers, False, 0.0,
            True, True, [], None, torch.empty(0, device="meta"), mask, out_val=None)
    first_layers_input = 2 * tokens * 2 * 4 * hidden * size
    assert backward([True, True, True, True]) == 2 * forward
    assert backward([False, True, True, True]) == 2 * forward - first_layers_input
    assert backward([False, True, True, False]) == forward - first_layers_input   # frozen weights
    assert backward([False, False, False, False]) == 0
    # a packed GRU: its tokens are the packed rows, whatever the layout
    gru = nn.GRU(size, hidden, device="meta")
    packed = torch.empty(7, size, device="meta")   # batch sizes 3, 2, 2
    count = FORMULAS[aten._cudnn_rnn](packed, list(gru._flat_weights), 4, None, torch.empty(1, 3, hidden), None, 3,
                                     hidden, 0, 1, False, 0.0, True, False, [3, 2, 2], None, out_val=None)
    assert count == 2 * 7 * 3 * hidden * (size + hidden)


@quick
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("groups", [32, 4])   # depthwise (one group a channel), grouped
def test_a_grouped_convolutions_backward_is_twice_its_forward(groups, transposed):
    """The input's gradient and the weight's, each as large as the forward: torch's own formula counts the
    weight's ``groups`` times over (a depthwise convolution's by its channels)."""
    channels = 32
    conv = (nn.ConvTranspose2d if transposed else nn.Conv2d)(channels, channels, 3, padding=1, groups=groups)
    inputs = torch.randn(4, channels, 16, 16, requires_grad=True)
    forward, backward = DeviceFlops("cpu:0"), DeviceFlops("cpu:0")
    with forward.counting():
        output = conv(inputs)
    with backward.counting():
        output.sum().backward()
    expected = 2 * forward.by_device["cpu:0"]
    assert abs(backward.by_device["cpu:0"] - expected) <= 0.01 * expected, (backward.by_device, expected)


@quick
def test_an_op_that_took_time_without_a_formula_is_named_and_element_wise_ones_never_are(monkeypatch):
    """An FFT has FLOPs (5 n log n) but no formula: its host time and calls are recorded, beside the time of all
    the operations seen; element-wise work, a LSTM (its kernels have formulas now) are not."""
    from engine.measure import flops as flops_module
    flops = DeviceFlops("cpu:0")
    signal, x = torch.randn(64, 8192), torch.randn(512, 512)
    with flops.counting():
        torch.fft.rfft(signal)
        (x.exp() * x + 1).relu().sigmoid()
        nn.functional.hardswish(x)
        nn.LSTM(16, 16)(torch.randn(4, 2, 16))[0].sum().backward()
    assert set(flops.unformulated) == {"aten._fft_r2c"}, flops.unformulated
    assert flops.unformulated_calls == {"aten._fft_r2c": 1}
    assert 0 < flops.unformulated["aten._fft_r2c"] < flops.counted_seconds
    # had the LSTM's kernel no formula, it would be named
    if torch.backends.mkldnn.is_available():
        monkeypatch.delitem(flops_module.FORMULAS, torch.ops.aten.mkldnn_rnn_layer)
        flops = counted_step(nn.LSTM(16, 16), torch.randn(4, 2, 16))
        assert set(flops.unformulated) == {"aten.mkldnn_rnn_layer"}, flops.unformulated


def test_a_torchvision_mobilenets_mfu_is_at_most_one():
    """A depthwise network (mobilenet_v3_small) trained through the CLI: its FLOPs (the depthwise
    convolutions' backward counted right) over the measured step and the CPU's measured peak is a possible
    MFU, not over 100 %."""
    from engine.results.efficiency import Peak, mfu
    from helpers import cli
    _, summary = cli("run", "--model", "torchvision:mobilenet_v3_small", "--image-size", "32", "--batch-size", "8",
                     "--steps", "3", "--warmup", "1", "--devices", "cpu:1", "--json", check_json=True)
    (device,) = summary["efficiency"]["devices"]
    assert device["flops_per_step"] > 0 and device["measured_peak"] is not None, device
    found = mfu(device["flops_per_step"], device["step_s"], Peak(**device["measured_peak"]))
    assert found is not None and 0 < found <= 1, (found, device)
