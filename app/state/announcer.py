"""Announcer: Qt-free state says that it changed, and whoever shows it listens (as napari's evented models do).

A controller changes the state (``RunProgress.apply``); the views that draw it follow
through their subscription, so the controller need not call each of them.
"""
from __future__ import annotations

from collections.abc import Callable


class Announcer:
    """Listeners called in the order they connected, on the thread that announces (the UI thread here)."""

    def __init__(self) -> None:
        self._listeners: list[Callable[..., None]] = []

    def connect(self, listener: Callable[..., None]) -> None:
        self._listeners.append(listener)

    def disconnect(self, listener: Callable[..., None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def announce(self, *args) -> None:
        for listener in list(self._listeners):
            listener(*args)
