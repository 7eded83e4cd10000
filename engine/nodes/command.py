"""``python main.py node``: the node agent's command line (engine.nodes.agent)."""
from __future__ import annotations

import signal
import sys

EXIT_OK, EXIT_INVALID = 0, 2


def cmd_node(args) -> int:
    from engine.nodes.address import AddressError, parse_address, parse_networks
    from engine.nodes.agent import NodeAgent
    from engine.nodes.token import TokenError, new_token, token_for
    if args.new_token:
        try:
            print(new_token(args.new_token))
        except OSError as exc:
            print(f"error: --new-token: cannot write {args.new_token}: {exc.strerror or exc} (an existing token is "
                  "never overwritten)", file=sys.stderr)
            return EXIT_INVALID
        return EXIT_OK
    problems = []
    listen = allow = token = None
    if not args.listen:
        problems.append("--listen: give ADDR:PORT, this machine's address on the network the nodes share")
    else:
        try:
            listen = parse_address(args.listen)
        except AddressError as exc:
            problems.append(f"--listen: {exc}")
    try:
        token = token_for(args.token_file)
    except TokenError as exc:
        problems.append(f"--token-file: {exc}")
    if args.allow:
        try:
            allow = parse_networks(args.allow)
        except AddressError as exc:
            problems.append(f"--allow: {exc}")
    agent = None
    if not problems:
        try:
            agent = NodeAgent(listen, token, allow, allow_scripts=args.allow_scripts)
            agent.bind()
        except ValueError as exc:
            problems.append(str(exc))
        except OSError as exc:
            problems.append(f"--listen: cannot listen on {listen}: {exc.strerror or exc}")
    if not problems:
        from engine.nodes.janitor import WorkFolder
        try:  # made before serving, so that a temporary folder it cannot write is said here, not as a traceback
            agent.workdir = WorkFolder()
        except OSError as exc:
            problems.append(f"cannot make the agent's working folder: {exc.strerror or exc} "
                            f"({getattr(exc, 'filename', None) or 'TMPDIR'})")
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_INVALID
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: agent.shutdown())
    agent.serve()
    return EXIT_OK
