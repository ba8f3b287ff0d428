"""What the team split costs in quality: a remote engine cannot read the workspace store.

Local decoding mixes the workspace store into every step. A remote engine instead gets
the prompt's own tokens as document n-grams (plus the team's base store when it has
one; none here: the worst case), and the front end re-ranks its k drafts with the local
workspace store (`spd_lsp.remote.client.rerank`). Measured on held-out positions of
this repository (files split by path hash: 70 % indexed into the workspace store, the
rest held out), with the bundled model, k = 3, 10 tokens, the default settings.

    nice .venv/bin/python -m bench.bench_engine_split [--positions 40]
"""

from __future__ import annotations

from spd_lsp.api import DecodeRequest
import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ngram_db.guarded import GuardedNgrams
from spd_lsp.settings import Settings
from spd_lsp.engine.local import LocalEngine
from spd_lsp.remote.client import DOCUMENT_WEIGHT, rerank
from spd_lsp.remote.server import Stores
from evaluation.metrics import score_request, summarise
from evaluation.positions import sample_positions
from evaluation.stores import workspace_store
from spd_lsp.engine.model import load_model
from spd_lsp.tokens import tokenizer_identity

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("spd_lsp", "ngram_db", "tests", "bench")
CONFIGS = ("local", "remote + re-rank", "remote, no re-rank", "no n-grams")


def split() -> tuple[list[Path], list[Path]]:
    files = sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))
    bucket = [int.from_bytes(hashlib.sha256(str(p.relative_to(REPO)).encode()).digest()[:8], "big") / 2**64
              for p in files]
    return [p for p, u in zip(files, bucket) if u < 0.7], [p for p, u in zip(files, bucket) if u >= 0.7]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", type=int, default=40)
    parser.add_argument("--prefix-chars", type=int, default=1500)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
    indexed, held_out = split()
    loaded = load_model(None, "auto", "auto", None)
    engine = LocalEngine(loaded)
    scratch = Path(tempfile.mkdtemp(prefix="spd-split-"))
    store = workspace_store(scratch / "ws", engine.tokenizer, REPO, indexed)
    local = GuardedNgrams(store)
    remote = Stores(tokenizer_identity(engine.tokenizer), None)
    options = Settings().decode_options()
    positions = sample_positions(held_out, args.positions, seed=1, prefix_chars=args.prefix_chars,
                                 kinds=("line_start", "mid_line"))
    scores: dict[str, list] = {name: [] for name in CONFIGS}
    started = time.perf_counter()
    for position in positions:
        ids = engine.encode(position.prefix)
        document = remote.source({"stores": [], "document": {"sequences": [ids], "weight": DOCUMENT_WEIGHT}},
                                 local=False)
        for name, source in (("local", local), ("remote, no re-rank", document), ("no n-grams", None)):
            engine.set_ngrams(source)
            result = engine.complete(DecodeRequest(position.prefix, options, ids=ids))
            scores[name].append(score_request([d.text for d in result.drafts], position.target, 0.0, 0.0))
            if name == "remote, no re-rank":
                reranked = rerank(result.drafts, local, ids, options)
                scores["remote + re-rank"].append(
                    score_request([d.text for d in reranked], position.target, 0.0, 0.0))
    print(f"{len(positions)} held-out positions ({len(held_out)} files; {len(indexed)} indexed), "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    print("| configuration | exact@1 | exact@3 | chars accepted (top draft) | chars (best of 3) |\n|---|---|---|---|---|")
    for name in CONFIGS:
        s = summarise(scores[name])
        print(f"| {name} | {s['P@1']:.3f} | {s['P@k']:.3f} | {s['chars_top']:.2f} | {s['chars_best']:.2f} |")
    print(f"load average after: {os.getloadavg()}", flush=True)
    store.close()
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
