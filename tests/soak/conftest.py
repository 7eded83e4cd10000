"""The app's fixtures (a private store and settings, the real window), for the long soak."""
from tests.app.conftest import no_leftover_children, private_state, qapp_configured, window  # noqa: F401
