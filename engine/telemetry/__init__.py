"""Live telemetry: per-device samples from NVML (GPUs) and the OS (CPU virtual devices).

Sampled outside the worker, in the process that shows them, as nvidia-smi or
nvitop would see the machine. No torch and no Qt here: the app imports this
package at start-up.

    sampler = TelemetrySampler(targets_for(devices), rate_hz=10)
    sampler.start(); ...; sampler.set_pid("cpu:0", rank0_pid); ...
    samples = sampler.drain(); sampler.stop()
    telemetry = summarize(samples, names, t_first_step, t_last_step, 10)   # a TelemetrySummary
"""
from engine.telemetry.cpu_target import CpuTarget
from engine.telemetry.gpu_target import GpuTarget
from engine.telemetry.sample import FIELD_NAMES, DeviceSample
from engine.telemetry.sampler import DEFAULT_RATE_HZ, MAX_RATE_HZ, TelemetrySampler, check_rate
from engine.telemetry.smooth import SMOOTH_S, trailing_mean
from engine.telemetry.summary import disagreements, summarize
from engine.telemetry.targets import Target, all_targets, physical_name, targets_for

__all__ = [
    "DeviceSample", "FIELD_NAMES", "TelemetrySampler", "CpuTarget", "GpuTarget", "Target",
    "targets_for", "all_targets", "physical_name", "trailing_mean", "SMOOTH_S", "summarize", "disagreements", "check_rate", "DEFAULT_RATE_HZ", "MAX_RATE_HZ",
]
