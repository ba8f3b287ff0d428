"""`spd-lsp`'s subcommands: serve (the language server), complete, index, engine (and engine --ray), logs,
with command-line flags generated from the settings' schema (flags.py).

The top layer under `spd_lsp.cli`: it may import every layer below, and it is the only one that knows
both engines: `engine_setting.load_engine` injects the in-process or the shared one into the session.
"""
