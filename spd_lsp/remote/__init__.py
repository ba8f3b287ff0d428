"""The shared engine: one process holds the model for every editor (and a team).

protocol: the frames and their compatibility rule; server: the engine daemon (Unix socket / TCP /
TLS) over the engine's batcher; client: `RemoteEngine` for the front end; connect: the front end's
loader for the `engine` setting; daemon: finding or starting the per-user engine; standby: its spare;
peers: per-address handshake limits; tokenizer: the engine's tokenizer on the wire; ray/: the engine
as a Ray Serve deployment.

Above the settings (it checks requests with their bounds) and the engine: it may import settings,
engine, api, the bottom modules and ngram_db; the front end's modules (client, connect, protocol,
daemon) never import torch or transformers.
"""
