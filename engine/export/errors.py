"""The one error an export raises for anything the user can fix: a wrong id, a file in the way, a format."""
from __future__ import annotations


class ExportError(ValueError):
    """Shown to the user as is (the CLI prints it and exits 2)."""
