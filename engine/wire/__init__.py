"""What processes say to each other: one codec (codec.py) and one module per channel (docs/protocol.md).

worker.py: the worker and its session; rank.py: a rank and its worker; nodes.py: the worker and the node agents;
forkserver.py: the fork server and who asks it; planner.py: the app and its planner process; children.py: the
children a launcher reads one answer from (validation, advise's ranking, what-if, traces, the model lists).
Nothing here imports the app, torch or a process's code: each end reads these, the app's process too.
"""
