"""Splitscope's engine: everything but the display.

No Qt here (a test keeps it so), and torch only where training or model
building needs it, so the app can import the engine's catalogues at start-up.
"""
