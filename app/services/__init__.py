"""The app's links to other processes and threads: the run and experiment clients (RunSession and
ExperimentRunner on background threads, marshalled to the UI thread), the planner process."""
