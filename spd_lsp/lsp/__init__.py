"""The Language Server Protocol side: pygls handlers (handlers.py: LSP params in, plain values to the
session, LSP items out), the JSON-RPC framing checks (framing.py) and stdio/TCP transports (transport.py).

Above the session: it may import the session, fit, settings, api and the bottom modules; never the
engine, remote, torch or transformers (the session is given its engine).
"""
