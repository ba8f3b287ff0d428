"""The shared engine: one process holds the model for every editor (and a team).

protocol: the frames; batching: continuous batching of superposed requests;
server: the daemon (Unix socket / TCP / TLS); client: `RemoteEngine` for the front end;
daemon: finding or starting the per-user engine.
"""
