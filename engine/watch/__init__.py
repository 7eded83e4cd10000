"""Watching a user's own training script, unmodified (``main.py watch -- SCRIPT.py``): its ranks started as
torchrun would, each timed from torch's public hooks (instruments.py) by a bootstrap that runs the script as
``__main__`` (bootstrap.py), their steps gathered and summarized by kind per device (launcher.py)."""
