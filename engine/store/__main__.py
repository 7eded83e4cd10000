"""``python -m engine.store``: the store process (engine/store/server.py)."""
import sys

from engine.store.server import main

if __name__ == "__main__":  # and not when a test imports every engine module
    sys.exit(main())
