"""Before and beside a run: a model's blocks timed and the balanced split, the models to choose from, and
what-if predictions from a stored run (docs/architecture.md)."""
