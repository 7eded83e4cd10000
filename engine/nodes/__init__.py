"""Runs over several machines: a node agent on each, the worker as their coordinator (docs/nodes.md).

``python main.py node --listen ADDR:PORT --token-file F`` starts an agent
(``agent.py``); ``run --nodes ADDR:PORT,...`` makes the worker connect to the
agents (``coordinator.py``), which start their node's ranks through torchrun
(``torchrun.py``) and stream the ranks' events and the node's telemetry back,
on a connection that proves the shared token (``connection.py``), with the clocks
of the machines put on one (``clock.py``). Torch-free, but for ``torchrun.py``.
"""
