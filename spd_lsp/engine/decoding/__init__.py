"""The decoding methods on a model runner: superposed decoding (superposed.py) with its n-gram mix
(interpolate.py), token healing, verification (verify.py) and its repairs, the baselines (greedy,
nucleus, beam), and the step loop they share (stepping.py); methods.py starts a request's method.

Inside the engine: it may import api, ngram_db, torch and transformers; not the engine's prompt,
local engine, batcher or loader (they import it).
"""
