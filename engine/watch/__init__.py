"""Watching a user's own training script, unmodified (``main.py watch -- SCRIPT.py``): its ranks started as
torchrun would, each timed from torch's public hooks (instruments.py) by a bootstrap that runs the script as
``__main__`` (bootstrap.py), the script's facts read
(script_facts.py), ``watch``'s command (command.py); the worker gathers their steps as any run's."""
