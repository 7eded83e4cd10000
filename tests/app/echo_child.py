"""``python -m echo_child [EXIT]``: each stdin line back upper-cased, "bye" on stderr at EOF, then exit EXIT (0);
for tests/app/test_child_process.py. ``hang`` as a line: stop reading (a child that ignores its EOF)."""
import sys
import time

for line in sys.stdin:
    if line.strip() == "hang":
        time.sleep(600)
    sys.stdout.write(line.upper())
    sys.stdout.flush()
sys.stderr.write("bye\n")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
