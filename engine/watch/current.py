"""The instruments timing this process's steps, where it is a watched rank (engine/watch/bootstrap.py sets them
before the script's first line); None elsewhere.

What a script says of its steps (splitscope/watch.py: ``watch.step``, ``watch.phase``) reaches them here. That
module finds this one in ``sys.modules`` and imports nothing of the engine: a script that is not watched loads
no more of ours than splitscope/watch.py itself, and the engine never imports the user's side.
"""
from __future__ import annotations

instruments = None
