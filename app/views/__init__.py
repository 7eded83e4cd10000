"""Widgets: they draw state and emit what the user asks for; they import no controller or service."""
