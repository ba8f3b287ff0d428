"""Store fault figures: kill -9 while indexing, broad roots, links out of the workspace, a full disk.

    nice -n 10 .venv/bin/python bench/bench_store_faults.py [--kills 20] [--work DIR]

Everything real: the bundled SmolLM2 tokenizer, LMDB, `spd-lsp index` in a
subprocess, a real tmpfs for the full disk (needs root; skipped otherwise).
Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from pathlib import Path

from ngram_db.errors import StoreError
from ngram_db.guarded import GuardedNgrams
from ngram_db.indexer import IndexOptions, Indexer
from ngram_db.store import NgramStore
from ngram_db.watcher import Watcher
from spd_lsp.engine.model import load_tokenizer
from spd_lsp.tokens import encode_texts, tokenizer_identity

BATCH_BYTES = 32_000  # small batches: many commit points to be killed between
CHILD = textwrap.dedent("""
    from pathlib import Path
    from ngram_db.indexer import IndexOptions, Indexer
    from ngram_db.store import NgramStore
    from spd_lsp.engine.model import load_tokenizer
    from spd_lsp.tokens import encode_texts, tokenizer_identity
    tokenizer = load_tokenizer(None)
    with NgramStore.open({store!r}, tokenizer_identity(tokenizer)) as store:
        print("open", flush=True)
        Indexer(store, None, [Path({root!r})], IndexOptions(batch_bytes={batch}),
                encode_batch=lambda texts: encode_texts(tokenizer, texts)).index(
            progress=lambda _: print("committed", flush=True))
    print("done", flush=True)
""")


def corpus(work: Path) -> Path:
    """A real code tree (~3 MB of the standard library) copied where links and modes can be played with."""
    root = work / "corpus"
    if not root.exists():
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        for name in ("json", "email", "http", "logging"):
            shutil.copytree(stdlib / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "test*"))
    return root


def contents(store: NgramStore) -> tuple[dict, dict]:
    return ({p: i.content_hash for p, i in store.files().items()}, dict(store.iter_counts()))


def index_here(store: NgramStore, tokenizer, roots: list[Path], progress=False, **options) -> object:
    return Indexer(store, None, roots, IndexOptions(**options),
                   encode_batch=lambda texts: encode_texts(tokenizer, texts)).index(progress=progress)


def kills(work: Path, tokenizer, count: int) -> list[str]:
    root, identity = corpus(work), tokenizer_identity(tokenizer)
    with NgramStore.open(work / "fresh", identity, rebuild="always") as fresh:
        batches: list[object] = []
        index_here(fresh, tokenizer, [root], progress=batches.append, batch_bytes=BATCH_BYTES)
        reference = contents(fresh)
    rng, store_path = random.Random(10), work / "killed"
    code = CHILD.format(store=str(store_path), root=str(root), batch=BATCH_BYTES)
    partial = consistent = equal = 0
    for _ in range(count):
        NgramStore.open(store_path, identity, rebuild="always").close()
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                 env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
        assert child.stdout.readline().strip() == "open"
        for _ in range(rng.randrange(1, len(batches))):  # after 1 .. all-but-one committed batches
            child.stdout.readline()
        time.sleep(rng.uniform(0.0, 0.05))
        child.kill()
        child.wait()
        child.stdout.close()
        with NgramStore.open(store_path, identity) as store:
            files = store.stats().files
            partial += 0 < files < len(reference[0])
            consistent += store.verify() == []
            index_here(store, tokenizer, [root], batch_bytes=BATCH_BYTES)  # resume
            equal += contents(store) == reference
    return [f"| kill -9 of an indexing process, x{count} (random moment, {len(reference[0])} files, "
            f"{len(batches)} batches, {sum(reference[1].values()) // 1000}k n-grams) | {partial} killed mid-index; {consistent}/{count} "
            f"consistent right after the kill; {equal}/{count} equal to a fresh rebuild after resuming |"]


def cli(*args: str, env: dict) -> tuple[int, str, float]:
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "spd_lsp.cli", "index", *args, "--quiet"], capture_output=True,
                         text=True, env=env, timeout=1800)
    message = (run.stderr.strip().splitlines() or [""])[-1]
    return run.returncode, message, time.perf_counter() - started


def broad_roots(work: Path) -> list[str]:
    env = dict(os.environ, SPD_LSP_CACHE=str(work / "cache"), PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    rows = []
    for label, args in [("workspace `/`", ["/"]), ("workspace `$HOME`", [str(Path.home())]),
                        ("`/` with --allow-broad-root (default caps: 50,000 files, 500 MB)",
                         ["/", "--allow-broad-root", "--db", str(work / "root-store")])]:
        code, message, seconds = cli(*args, env=env)
        rows.append(f"| {label} | exit {code} after {seconds:.1f} s: \"{message[:160]}\" |")
    return rows


def links(work: Path, tokenizer) -> list[str]:
    root, outside = work / "links" / "ws", work / "links" / "outside"
    shutil.rmtree(work / "links", ignore_errors=True)
    (root / "app").mkdir(parents=True)
    outside.mkdir(parents=True)
    (outside / "private.py").write_text("OUTSIDE_SECRET = 'never indexed'\n")
    (root / "app" / "main.py").write_text("print('inside')\n")
    (root / ".env").write_text("TOKEN=abc\n")
    (root / "app" / "passwd_link.py").symlink_to("/etc/passwd")
    (root / "app" / "private_link.py").symlink_to(outside / "private.py")
    (root / "outside_dir").symlink_to(outside)
    (root / "env_link.py").symlink_to(root / ".env")
    identity = tokenizer_identity(tokenizer)
    with NgramStore.open(work / "links" / "store", identity, rebuild="always") as store:
        indexer = Indexer(store, None, [root], encode_batch=lambda texts: encode_texts(tokenizer, texts))
        indexer.index()
        walked = sorted(str(Path(p).relative_to(root)) for p in store.files())
        watcher = Watcher(indexer, debounce_s=0.05)
        watcher.start()
        try:
            (root / "app" / "new_link.py").symlink_to(outside / "private.py")
            (root / "app" / "new.py").write_text("x = 1\n")
            deadline = time.monotonic() + 10
            while str(root / "app" / "new.py") not in store.files() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)
            indexer.index()  # and the next rescan
        finally:
            watcher.stop()
        watched = sorted(str(Path(p).relative_to(root)) for p in store.files())
    return [f"| links out of the workspace (/etc/passwd, a file and a directory outside, a link to .env) | "
            f"walk indexed {walked}; after a new outside link under the watcher and a rescan: {watched} |"]


def full_disk(work: Path, tokenizer) -> list[str]:
    mount = work / "small-disk"
    mount.mkdir(exist_ok=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                                           capture_output=True).returncode:
        return ["| full disk | not measured: mounting a small tmpfs needs root |"]
    try:
        identity = tokenizer_identity(tokenizer)
        store = NgramStore.open(mount / "store", identity)
        guarded = GuardedNgrams(store)
        context = tokenizer.encode("import json\nimport", add_special_tokens=False)
        candidate = tokenizer.encode(" os", add_special_tokens=False)
        try:
            index_here(store, tokenizer, [corpus(work)], batch_bytes=BATCH_BYTES)
            message = "no error (the corpus fitted)"
        except StoreError as error:
            message = str(error).split(";")[0]
        files, problems = store.stats().files, store.verify()
        for _ in range(100):
            guarded.p_ngram([context], [candidate], {2: 0.5, 3: 0.5})  # a failure would read as unseen
        store.close()
        with NgramStore.open(mount / "store", identity) as reopened:
            kept = reopened.stats().files == files and reopened.verify() == []
        return [f"| full disk (4 MB tmpfs, {corpus_size(work) // 1000} kB corpus) | \"{message}\"; {files} files "
                f"committed, {'consistent' if not problems else f'{len(problems)} problems'}, "
                f"{'all kept after reopening' if kept else 'LOST after reopening'}; {100 - guarded.failures}/100 "
                f"lookups read from the store after it |"]
    finally:
        subprocess.run(["umount", "-l", str(mount)])


def corpus_size(work: Path) -> int:
    return sum(p.stat().st_size for p in corpus(work).rglob("*.py"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="spd-store-faults-"))
    tokenizer = load_tokenizer(None)
    rows = ["| fault | result |", "|---|---|"]
    for section in (lambda: kills(work, tokenizer, args.kills), lambda: broad_roots(work),
                    lambda: links(work, tokenizer), lambda: full_disk(work, tokenizer)):
        rows += section()
        print(rows[-1], file=sys.stderr, flush=True)
    print("\n".join(rows))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
