"""The instruments inside a rank: step timing, tensor memory, collectives, the torch profiler
(docs/architecture.md). Strategies use them; they import no strategy."""
