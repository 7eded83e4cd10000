"""The one door to NVML: lazy start-up, every call wrapped, lost GPUs remembered.

Every NVML call in Splitscope goes through ``query``/``call`` (system-wide) or
``device_query``/``device_call`` (one GPU), like nvitop's ``nvmlQuery``; the
structures some calls take come from ``structure``:

- any ``NVMLError`` becomes "not available" (``None``, or the default asked for);
- ``NVML_ERROR_GPU_IS_LOST`` or ``NVML_ERROR_UNKNOWN`` from a GPU marks that GPU
  lost: later calls on it return "not available" without touching the driver,
  and ``lost_devices()`` lets the sampler warn once;
- no ``pynvml`` package, no ``libnvidia-ml.so`` or a failing ``nvmlInit`` means
  zero GPUs, not an error.

Nothing here raises. pynvml is imported on first use, never at import time, so
importing this module stays cheap for the app's start-up. NVML itself is
thread-safe; the lock here only guards our own start-up and caches.
"""
from __future__ import annotations

import threading
from typing import Any

# NVML return codes (nvml.h), spelled out so this module needs no pynvml to load.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
NO_LIBRARY = -1
"""Our own code: NVML could not be loaded or started, so nothing was called."""

# Errors after which a GPU is gone for the rest of the process (a fallen-off-the-bus
# GPU needs a reset; NVML answers UNKNOWN for some of those states).
LOST_ERRORS = frozenset({NVML_ERROR_GPU_IS_LOST, NVML_ERROR_UNKNOWN})

# Errors that say "this GPU or this driver will never give that field": a probe
# that gets one marks the field unsupported, so the sampler stops asking.
UNSUPPORTED_ERRORS = frozenset({NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND,
                                NVML_ERROR_NO_PERMISSION})

_lock = threading.RLock()
_started = False           # nvmlInit has been tried (whatever the outcome)
_library: Any = None       # the pynvml module once nvmlInit succeeded
_start_error: str | None = None
_count: int | None = None
_handles: dict[int, Any] = {}
_lost: dict[int, str] = {}  # GPU index -> why it is considered lost


def _nvml() -> Any:
    """The started pynvml module, or None when this machine has no usable NVML.

    Started once per process (or per ``reset()``); a failure is remembered so a
    GPU-less laptop does not retry the library load ten times a second.
    """
    global _started, _library, _start_error
    if _started:
        return _library
    with _lock:
        if _started:
            return _library
        try:
            import pynvml  # nvidia-ml-py; the import itself loads no shared library
            pynvml.nvmlInit()  # loads libnvidia-ml.so.1; NVMLError_LibraryNotFound without a driver
        except Exception as exc:  # ImportError, NVMLError, OSError: all mean "no GPUs"
            _library, _start_error = None, f"{type(exc).__name__}: {exc}"
        else:
            _library, _start_error = pynvml, None
        _started = True
        return _library


def started() -> bool:
    """True once nvmlInit was tried in this process (engine.forkserver forks only before)."""
    return _started


def available() -> bool:
    """True when NVML started on this machine."""
    return _nvml() is not None


def start_error() -> str | None:
    """Why NVML is not available (for ``main.py devices``), or None."""
    _nvml()
    return _start_error


def call(func: str, *args: Any) -> tuple[Any, int | None]:
    """Call ``pynvml.<func>(*args)``: (value, None), or (None, NVML error code).

    The single place an NVML function is invoked. ``func`` is a name, not a
    function, so an older nvidia-ml-py without it is "function not found"
    instead of an AttributeError.
    """
    lib = _nvml()
    if lib is None:
        return None, NO_LIBRARY
    fn = getattr(lib, func, None)
    if fn is None:
        return None, NVML_ERROR_FUNCTION_NOT_FOUND
    try:
        return fn(*args), None
    except lib.NVMLError as exc:
        return None, getattr(exc, "value", NVML_ERROR_UNKNOWN)


def structure(type_name: str) -> tuple[Any, int | None]:
    """A new, zeroed ``pynvml.<type_name>()``: (structure, None), or (None, NVML error code).

    For the calls that take a ctypes structure the caller fills in (GPM's
    ``c_nvmlGpmMetricsGet_t``). A name, as in ``call``: an nvidia-ml-py too
    old to have the type is "function not found", like its functions.
    """
    lib = _nvml()
    if lib is None:
        return None, NO_LIBRARY
    kind = getattr(lib, type_name, None)
    if kind is None:
        return None, NVML_ERROR_FUNCTION_NOT_FOUND
    return kind(), None


def query(func: str, *args: Any, default: Any = None) -> Any:
    """``call`` that returns ``default`` for any error (nvitop's nvmlQuery)."""
    value, error = call(func, *args)
    return default if error is not None else value


def _handle(index: int) -> tuple[Any, int | None]:
    handle = _handles.get(index)
    if handle is not None:
        return handle, None
    handle, error = call("nvmlDeviceGetHandleByIndex", index)
    if error is None:
        with _lock:
            _handles[index] = handle
    return handle, error


def device_call(index: int, func: str, *args: Any) -> tuple[Any, int | None]:
    """Call ``pynvml.<func>(handle_of(index), *args)``: (value, None) or (None, code).

    A lost GPU is not called again: it answers NVML_ERROR_GPU_IS_LOST at once,
    because a driver talking to a dead GPU can block for seconds.
    """
    if index in _lost:
        return None, NVML_ERROR_GPU_IS_LOST
    handle, error = _handle(index)
    if error is None:
        value, error = call(func, handle, *args)
        if error is None:
            return value, None
    if error in LOST_ERRORS:
        _mark_lost(index, error)
    return None, error


def device_query(index: int, func: str, *args: Any, default: Any = None) -> Any:
    """``device_call`` that returns ``default`` for any error."""
    value, error = device_call(index, func, *args)
    return default if error is not None else value


def _mark_lost(index: int, error: int) -> None:
    why = "GPU is lost" if error == NVML_ERROR_GPU_IS_LOST else "unknown NVML error"
    with _lock:
        _lost.setdefault(index, f"{why} (NVML error {error})")


def is_lost(index: int) -> bool:
    """True once an NVML call on GPU ``index`` answered GPU_IS_LOST or UNKNOWN."""
    return index in _lost


def lost_devices() -> dict[int, str]:
    """Lost GPU indices and why; the sampler turns a new entry into one warning."""
    with _lock:
        return dict(_lost)


def device_count() -> int:
    """GPUs NVML sees; 0 without a driver or library. Never raises.

    nvidia-smi equivalent: ``nvidia-smi --query-gpu=count --format=csv``.
    """
    global _count
    if _count is not None:
        return _count
    try:
        count = int(query("nvmlDeviceGetCount", default=0) or 0)
    except Exception:  # a broken binding must not stop the app from starting
        return 0
    if available():
        _count = count  # GPUs do not come and go while we run; ask the driver once
    return count


def text(value: Any) -> str | None:
    """NVML strings come back as bytes from older nvidia-ml-py releases."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def driver_version() -> str | None:
    """nvidia-smi equivalent: ``--query-gpu=driver_version``."""
    return text(query("nvmlSystemGetDriverVersion"))


def reset() -> None:
    """Shut NVML down and forget this module's caches (``gpu_inventory.reset`` forgets the field probes too)."""
    global _started, _library, _start_error, _count
    with _lock:
        if _library is not None:
            try:
                _library.nvmlShutdown()
            except Exception:
                pass  # shutting down a broken library must not fail the caller
        _started, _library, _start_error, _count = False, None, None, None
        _handles.clear()
        _lost.clear()
