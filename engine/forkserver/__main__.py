"""``python -m engine.forkserver``: engine/forkserver/server.py."""
import sys

from engine.forkserver.server import main

if __name__ == "__main__":  # and not when a test imports every engine module
    sys.exit(main())
