"""`spd-lsp` entry point: dispatch to one sub-command module each.

`spd-lsp complete ...` prints drafts, `spd-lsp index ...` builds the n-gram store,
`spd-lsp engine ...` serves the shared engine (spd_lsp/remote),
anything else (including no arguments or `--stdio`) serves LSP.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv else ""
    if command == "complete":
        from spd_lsp.commands.complete import main as run
        return run(argv[1:])
    if command == "engine" and "--ray" in argv[1:]:  # the optional `ray` extra's team engine
        from spd_lsp.commands.engine_ray import main as run
        return run(argv[1:])
    if command == "index":
        from spd_lsp.commands.index import main as run
        return run(argv[1:])
    if command == "engine":
        from spd_lsp.commands.engine import main as run
        return run(argv[1:])
    from spd_lsp.commands.serve import main as run
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
