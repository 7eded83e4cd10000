"""The store's tables (docs/store.md), the columns added since stores were first made, and the SQL that
aggregates telemetry samples into buckets."""
from __future__ import annotations

STATUSES = ("running", "finished", "failed", "stopped", "interrupted")
# A run copied back from a damaged store with some of its rows lost, or possibly lost (engine/store/repair.py):
# its error says what came back and what it was before. Not a status a run ends with.
RECOVERED_PARTIAL = "recovered (partial)"

SCHEMA = """
CREATE TABLE IF NOT EXISTS experiments (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created REAL NOT NULL,
    params TEXT NOT NULL,          -- JSON: the preset's options
    result TEXT                    -- JSON: the experiment summary, when done
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    started REAL NOT NULL,         -- unix time
    ended REAL,
    status TEXT NOT NULL,
    config TEXT NOT NULL,          -- JSON: ExperimentConfig.to_dict()
    summary TEXT,                  -- JSON: the run summary (docs/summary.md)
    error TEXT,
    traceback TEXT,
    experiment_id TEXT REFERENCES experiments(id),
    label TEXT,                    -- the point's label within an experiment
    owner_pid INTEGER,             -- the process that records the run
    owner_host TEXT
);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    t REAL,                        -- seconds since the run started, at the step's end
    time_s REAL, samples INTEGER, throughput REAL, loss REAL,
    batch_split TEXT,              -- JSON list, DP/DDP only
    busy TEXT,                     -- JSON {device: busy share of the step}
    tensor_mem TEXT,               -- JSON {device: {kind: bytes}}, on the steps where it changed
    PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS timeline (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    device TEXT NOT NULL,
    kind TEXT NOT NULL,            -- engine.measure.timing.KINDS
    t0 REAL NOT NULL, t1 REAL NOT NULL  -- seconds since the run started
);                                 -- every step's, or a sample of them (engine.record.timeline_keeper)
CREATE INDEX IF NOT EXISTS timeline_run ON timeline(run_id, step);
CREATE TABLE IF NOT EXISTS samples (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    t REAL NOT NULL,               -- seconds since the run started (negative: before it)
    device TEXT NOT NULL,
    util REAL, wait_util REAL, core_util REAL, mem_util REAL, mem_used INTEGER, mem_total INTEGER, power_w REAL,
    sm_clock_mhz REAL, temp_c REAL, pcie_rx_bps REAL, pcie_tx_bps REAL,
    energy_j REAL,                 -- joules since the sampler's first reading of the GPU: cumulative
    sm_active REAL, sm_occupancy REAL, tensor_active REAL, dram_bw_util REAL,  -- GPM percentages
    span_s REAL                    -- NULL: one sample; else the seconds an aggregate row covers (its means,
);                                 -- memory its maxima), older telemetry thinned as a time-series store does
CREATE INDEX IF NOT EXISTS samples_run ON samples(run_id, t);
CREATE TABLE IF NOT EXISTS profiles (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    rank INTEGER NOT NULL,
    device TEXT NOT NULL,
    t0 REAL NOT NULL,              -- seconds since the run started, when its first profiled step began
    trace BLOB NOT NULL            -- torch.profiler's Chrome trace, gzip-compressed JSON (engine.measure.profiling)
);
"""

# The samples table's measurement columns: engine.telemetry.sample.FIELD_NAMES after t and device.
SAMPLE_FIELDS = ("util", "wait_util", "core_util", "mem_util", "mem_used", "mem_total", "power_w",
                 "sm_clock_mhz", "temp_c", "pcie_rx_bps", "pcie_tx_bps",
                 "energy_j", "sm_active", "sm_occupancy", "tensor_active", "dram_bw_util")

# Kept by their maximum when rows aggregate: memory's peak, and energy, a running total whose bucket ends at
# its largest value (a mean would put it half a bucket back).
AGGREGATED_BY_MAX = ("mem_used", "mem_total", "energy_j")

# How rows of samples aggregate: means of the measurements, the maxima of the ones above.
AGGREGATES = ", ".join(f"MAX({f}) AS {f}" if f in AGGREGATED_BY_MAX else f"AVG({f}) AS {f}"
                       for f in SAMPLE_FIELDS)


def bucket_start(bucket_s: float) -> str:
    """SQL for the start of the ``bucket_s``-second bucket of a row's t (t may be negative: before the run)."""
    return f"(CAST((t + 1e9) / {bucket_s!r} AS INTEGER) * {bucket_s!r} - 1e9)"


def migrate(db) -> None:
    """Columns added after a store was created: added to one created before them."""
    for table, column, kind in (("runs", "traceback", "TEXT"), ("steps", "busy", "TEXT"),
                                ("samples", "span_s", "REAL"), ("steps", "tensor_mem", "TEXT"),
                                ("samples", "core_util", "REAL"), ("samples", "wait_util", "REAL"),
                                ("samples", "energy_j", "REAL"), ("samples", "sm_active", "REAL"),
                                ("samples", "sm_occupancy", "REAL"), ("samples", "tensor_active", "REAL"),
                                ("samples", "dram_bw_util", "REAL")):
        columns = {r["name"] for r in db.execute(f"PRAGMA table_info({table})")}
        if column not in columns:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

