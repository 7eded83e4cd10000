"""pipeline and model-parallel: the strategy classes (strategy.py), torch's schedules (schedules.py, torch-free) and
their action lists (schedule_actions.py), the checks on split points and stages (staged.py), and the executors
their ranks build: stages in processes of their own (scheduled_stages.py, with the probes it runs after the last
step: split_backward_probe.py, exchange_probe.py) or in one process (in_process_stages.py,
in_process_traced_stages.py)."""
