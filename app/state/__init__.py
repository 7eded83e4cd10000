"""What the app knows, without Qt: the run's progress (live_data.RunProgress), a stored run (stored_run.RunData), bounded series buffers, the rules that block Run,
numbers as the app writes them. Unit-tested without a window."""
