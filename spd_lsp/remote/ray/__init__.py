"""The shared engine as a Ray Serve deployment: N replicas, one model each (`spd-lsp[ray]`).

Importing this package needs the optional `ray` extra; nothing else in spd_lsp imports ray
at top level (`spd-lsp engine --ray` is commands/engine_ray.py). One job per module:

- `replica`: the deployment's class: one model per replica (`ReplicaSettings`), decoded by the engine
  daemon's batching scheduler, frames read as the daemon reads them.
- `deployment`: the settings and the application (replicas or autoscaling on queue length,
  GPUs, the consistent-hash router for prefix affinity), deployed on a running Ray cluster.
- `client`: calls the deployment with each request's affinity key (same key, same replica: its
  prompt cache), cancels, and retries a request whose replica died on another one.
- `ingress`: the engine daemon's authenticated TCP/TLS front, forwarding to the deployment.

Part of the remote layer: it may import what remote may.
"""
