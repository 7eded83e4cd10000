"""What a run leaves: its steps merged over ranks, the summary built from them, and the rows a store keeps
(docs/architecture.md)."""
