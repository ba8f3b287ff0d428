"""`spd-lsp index`: build or refresh an n-gram store from the command line.

The same Indexer the server runs in the background, with a progress bar; safe to
run while the server has the store open (one writer at a time, readers go on).
"""

from __future__ import annotations

import argparse
import logging
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
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="spd-lsp index: %(message)s")
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

    from spd_lsp.model import ModelLoadError, encode_texts, load_tokenizer, tokenizer_identity

    try:
        tokenizer = load_tokenizer(args.model)
    except ModelLoadError as error:
        print(f"spd-lsp index: {error}", file=sys.stderr)
        return 2
    try:
        store = NgramStore.open(db, tokenizer_identity(tokenizer), rebuild="always" if args.rebuild else "no")
    except TokenizerMismatchError as error:
        print(f"spd-lsp index: {error} (or pass --rebuild)", file=sys.stderr)
        return 2
    except StoreError as error:
        print(f"spd-lsp index: {error}", file=sys.stderr)
        return 2
    with store:
        options = IndexOptions(max_file_bytes=args.max_file_bytes, exclude=exclude,
                               include_secrets=args.include_secrets, max_files=args.max_files,
                               max_total_bytes=args.max_total_bytes)
        indexer = Indexer(store, lambda text: encode_texts(tokenizer, [text])[0], roots, options,
                          encode_batch=lambda texts: encode_texts(tokenizer, texts))
        try:
            report = indexer.index(progress=not args.quiet)
            stats = store.stats()
            print(f"{db}: {report.files_indexed} files indexed, {report.files_skipped} unchanged or skipped, "
                  f"{report.files_removed} removed, {report.tokens} tokens in {report.seconds:.1f}s; "
                  f"store: {stats.files} files, {stats.tokens} tokens, {stats.contexts} contexts, "
                  f"{stats.bytes / 1e6:.1f} MB")
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
