"""`spd-lsp index`: build or refresh an n-gram store from the command line.

The same Indexer the server runs in the background, with a progress bar; safe to
run while the server has the store open (one writer at a time, readers go on).
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from ngram_db.errors import StoreError, TokenizerMismatchError
from ngram_db.indexer import IndexOptions, Indexer
from ngram_db.paths import base_store_path, broad_root, default_store_path
from ngram_db.store import NgramStore


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spd-lsp index",
        description="Count the n-grams of a workspace (or, with --base, of any code you want as a base layer).")
    parser.add_argument("roots", nargs="*", type=Path, metavar="ROOT",
                        help="directories to index (default: the current directory; "
                             "with --base: the Python standard library)")
    parser.add_argument("--db", type=Path, help="store directory (default: the user cache, one store per workspace root)")
    parser.add_argument("--base", action="store_true",
                        help="build the shared read-only base store that every workspace is mixed with")
    parser.add_argument("--watch", action="store_true", help="keep the store up to date until interrupted")
    parser.add_argument("--model", help="model whose tokenizer to count with (default: the bundled model)")
    parser.add_argument("--max-file-bytes", type=int, default=IndexOptions.max_file_bytes,
                        help="skip files larger than this (default: %(default)s)")
    parser.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                        help="extra gitignore-style pattern to skip (repeatable)")
    parser.add_argument("--include-secrets", action="store_true",
                        help="also index files that look like secrets (.env, *.pem, id_rsa, ...); off by default")
    parser.add_argument("--no-secret-filter", dest="secret_filter", action="store_false",
                        help="also count lines that carry a secret (keys, tokens, passwords: detect-secrets); "
                             "by default they are left out and listed (path and line, never the secret)")
    parser.add_argument("--max-files", type=int, default=IndexOptions.max_files,
                        help="refuse a tree with more indexable files than this (default: %(default)s)")
    parser.add_argument("--max-total-bytes", type=int, default=IndexOptions.max_total_bytes,
                        help="refuse a tree with more bytes of indexable files than this (default: %(default)s)")
    parser.add_argument("--allow-broad-root", action="store_true",
                        help="index even the filesystem root or a home directory (refused otherwise)")
    parser.add_argument("--rebuild", action="store_true",
                        help="empty the store first and count everything again (needed after changing the "
                             "model's tokenizer); safe while a server has it open")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--engine", choices=["local", "ray"], default="local",
                        help="with --base: count in this process (local, the default) or on a Ray cluster "
                             "(ray: needs the `ray` extra; writes an exact sharded store)")
    parser.add_argument("--shards", type=int, default=4, help="with --engine ray: number of shards (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="with --engine ray: parallel tasks, and CPUs of the local cluster started when "
                             "none is running (default: %(default)s)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="spd-lsp index: %(message)s")
    if args.engine == "ray" and (not args.base or args.watch):
        print("spd-lsp index: --engine ray builds a base store: pass --base (and not --watch)", file=sys.stderr)
        return 2
    roots = [r.resolve() for r in args.roots] or [Path(sysconfig.get_paths()["stdlib"]) if args.base else Path.cwd()]
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        print(f"spd-lsp index: not a directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    broad = [reason for root in roots if (reason := broad_root(root))]
    if broad and not args.allow_broad_root:
        print(f"spd-lsp index: {'; '.join(broad)}: not indexing it (pass a project folder, "
              f"or --allow-broad-root if you mean it)", file=sys.stderr)
        return 2
    db = args.db or (base_store_path() if args.base else default_store_path(roots[0]))
    exclude = list(args.exclude)
    if args.base and not args.roots:  # the standard library alone, not what pip installed under it
        exclude += ["site-packages/", "dist-packages/"]

    from spd_lsp.engine.model import ModelLoadError, load_tokenizer
    from spd_lsp.tokens import encode_texts, tokenizer_identity

    try:
        tokenizer = load_tokenizer(args.model)
    except ModelLoadError as error:
        print(f"spd-lsp index: {error}", file=sys.stderr)
        return 2
    if args.engine == "ray":
        return _build_on_ray(args, db, roots, exclude, tokenizer_identity(tokenizer))
    try:
        store = NgramStore.open(db, tokenizer_identity(tokenizer), rebuild="always" if args.rebuild else "no")
    except TokenizerMismatchError as error:
        print(f"spd-lsp index: {error} (or pass --rebuild)", file=sys.stderr)
        return 2
    except StoreError as error:
        print(f"spd-lsp index: {error}", file=sys.stderr)
        return 2
    with store:
        options = _options(args, exclude)
        indexer = Indexer(store, lambda text: encode_texts(tokenizer, [text])[0], roots, options,
                          encode_batch=lambda texts: encode_texts(tokenizer, texts))
        try:
            report = indexer.index(progress=not args.quiet)
            stats = store.stats()
            print(f"{db}: {report.files_indexed} files indexed, {report.files_skipped} unchanged or skipped, "
                  f"{report.files_removed} removed, {report.tokens} tokens in {report.seconds:.1f}s; "
                  f"store: {stats.files} files, {stats.tokens} tokens, {stats.contexts} contexts, "
                  f"{stats.bytes / 1e6:.1f} MB")
            _report_secrets(report.secret_lines)
            if args.watch:
                return _watch(indexer)
        except StoreError as error:
            print(f"spd-lsp index: {error}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("spd-lsp index: interrupted; the committed batches are kept, run again to finish",
                  file=sys.stderr)
            return 130
    return 0


def _options(args: argparse.Namespace, exclude: list[str]) -> IndexOptions:
    if not args.secret_filter:
        print("spd-lsp index: WARNING: --no-secret-filter: lines that carry keys, tokens or passwords are counted "
              "into the store and can come back as completions (to you, or to a team served from a base store)",
              file=sys.stderr)
    return IndexOptions(max_file_bytes=args.max_file_bytes, exclude=exclude, include_secrets=args.include_secrets,
                        max_files=args.max_files, max_total_bytes=args.max_total_bytes,
                        secret_filter=args.secret_filter)


def _report_secrets(found: tuple[tuple[str, tuple[int, ...]], ...], shown: int = 50) -> None:
    """How many lines were left out as secrets, and where (never what they hold)."""
    if not found:
        return
    total = sum(len(lines) for _, lines in found)
    print(f"left out {total} line(s) that carry a secret, in {len(found)} file(s):")
    for path, lines in found[:shown]:
        print(f"  {path}: line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}")
    if len(found) > shown:
        print(f"  ... and {len(found) - shown} more file(s)")


def _watch(indexer: Indexer) -> int:
    from ngram_db.watcher import Watcher

    watcher = Watcher(indexer)
    watcher.start()
    print("watching for changes; Ctrl-C to stop", file=sys.stderr)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        watcher.stop()


@functools.lru_cache(maxsize=4)
def _encoder_for(spec: str | None):  # type: ignore[no-untyped-def]
    """The batch encoder of a model's tokenizer, loaded once per (Ray worker) process."""
    from spd_lsp.engine.model import load_tokenizer
    from spd_lsp.tokens import encode_texts

    tokenizer = load_tokenizer(spec)
    return lambda texts: encode_texts(tokenizer, texts)


def _build_on_ray(args: argparse.Namespace, db: Path, roots: list[Path], exclude: list[str], identity: Any) -> int:
    """`--base --engine ray`: an exact sharded base store built with Ray Data."""
    from ngram_db.shards import is_sharded

    if (db / "data.mdb").exists() and not is_sharded(db):
        print(f"spd-lsp index: {db} holds an unsharded store; delete it or pass another --db for the sharded one",
              file=sys.stderr)
        return 2
    try:
        from ngram_db.distributed import build_with_ray
    except ImportError as error:
        print(f"spd-lsp index: --engine ray needs the ray extra (pip install 'spd-lsp[ray]'): {error}",
              file=sys.stderr)
        return 2
    options = _options(args, exclude)
    if args.quiet:
        logging.getLogger("ray").setLevel(logging.WARNING)
    say = (lambda line: None) if args.quiet else (lambda line: print(f"spd-lsp index: {line}", file=sys.stderr))
    try:
        report = build_with_ray(db, roots, functools.partial(_encoder_for, args.model), identity,
                                shards=args.shards, workers=args.workers, options=options, say=say,
                                progress_bars=not args.quiet, rebuild=args.rebuild)
    except (StoreError, ValueError) as error:
        print(f"spd-lsp index: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("spd-lsp index: interrupted; tokenized sources are cached, run again to finish", file=sys.stderr)
        return 130
    state = "unchanged" if report.build is None else f"published {report.build.name}"
    print(f"{db}: {state}; {report.files} files, {report.tokenized} tokenized, {report.tokens} tokens, "
          f"{args.shards} shards, {report.shard_bytes / 1e6:.1f} MB in {report.seconds:.1f}s")
    return 0
