"""Splitscope as installed (``pip install .``): the ``splitscope`` command (splitscope/command.py, the same as
``python main.py``) and what a user's own training script may import, ``from splitscope import watch``
(splitscope/watch.py: neither torch nor Qt). The app and the engine are the app/ and engine/ packages.
"""
