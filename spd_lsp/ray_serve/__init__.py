"""The shared engine as a Ray Serve deployment: N replicas, one model each (`spd-lsp[ray]`).

Importing this package needs the optional `ray` extra; nothing else in spd_lsp imports ray
at top level. One job per module:

- `replica`: the deployment's class, one model + `Engine` per replica, one decoding thread.
- `deployment`: the settings and the application (replicas or autoscaling, GPUs, the
  prefix-affinity router, health checks), deployed on a running Ray cluster.
- `client`: calls the deployment with a document key (same key, same replica: its prompt
  cache), cancels, and retries a request whose replica died on another one.
- `ingress`: the engine's authenticated TCP front, forwarding to the deployment.
"""
