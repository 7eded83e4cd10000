"""Splitscope's importable side for a user's own script: ``from splitscope import watch`` (splitscope/watch.py).

The app and the command line live in app/ and engine/ (``python main.py``); this package holds only what a
training script may import, and imports neither Qt nor torch.
"""
