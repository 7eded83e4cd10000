"""A run's processes: the session that launches it, the worker that supervises it, the ranks that train
(one loop for every strategy), the validation child that checks a config first, and the protocol they
speak (docs/architecture.md)."""
