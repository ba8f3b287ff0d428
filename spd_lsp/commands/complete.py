"""`spd-lsp complete`: print k drafts for a prefix, with scores and phase timings."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from spd_lsp.api import METHODS, DecodeOptions, DecodeResult


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spd-lsp complete", description=__doc__)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--prefix", help="text before the cursor (default: read stdin)")
    source.add_argument("--file", type=Path, help="take the prefix from this file, up to --line/--character")
    parser.add_argument("--line", type=int, help="0-based line of the cursor in --file (default: end of file)")
    parser.add_argument("--character", type=int, default=0, help="0-based character of the cursor in that line")
    parser.add_argument("--method", choices=METHODS, default="superposed")
    parser.add_argument("-k", type=int, default=3, help="number of drafts")
    parser.add_argument("--max-tokens", type=int, default=10)
    parser.add_argument("--multiline", action="store_true", help="do not stop drafts at the end of the line")
    parser.add_argument("--no-heal", action="store_true", help="disable token healing at the prefix boundary")
    parser.add_argument("--temperature", type=float, default=DecodeOptions.temperature)
    parser.add_argument("--model", help="bundled default, a .gguf file, or a local Hugging Face directory")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--int8", action="store_true", help="dynamic int8 linear layers (CPU; transformers' forward)")
    parser.add_argument("--int4", action="store_true",
                        help="int4 decode weights quantised from float ones (the fast path; a Q4_1 GGUF uses its own)")
    parser.add_argument("--no-fast-path", dest="fast_path", action="store_false",
                        help="transformers' forward instead of the fast path (our own forward, a compiled step)")
    parser.add_argument("--ngram-db", type=Path, help="an n-gram store built by `spd-lsp index` to rescore drafts")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def read_prefix(args: argparse.Namespace) -> str:
    if args.prefix is not None:
        return args.prefix
    if args.file is None:
        return sys.stdin.read()
    lines = args.file.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    if args.line is None:
        return "".join(lines)
    if not 0 <= args.line <= len(lines):
        raise SystemExit(f"--line {args.line} is outside {args.file} ({len(lines)} lines)")
    current = lines[args.line] if args.line < len(lines) else ""
    return "".join(lines[: args.line]) + current[: args.character]


def print_result(result: DecodeResult, load_s: float, as_json: bool) -> None:
    t = result.timings
    if as_json:
        payload = {"method": result.method, "drafts": [asdict(d) for d in result.drafts], "timings": asdict(t), "load_s": load_s}
        print(json.dumps(payload, ensure_ascii=False))
        return
    for rank, draft in enumerate(result.drafts, 1):
        print(f"{rank}. [{draft.score:+.3f}] {draft.text!r}")
    print(
        f"-- {result.method}: total {t.total_s * 1000:.0f} ms = prefill {t.prefill_s * 1000:.0f} ms "
        f"({t.prefill_tokens} new tokens, {t.reused_tokens} reused) + {t.steps} steps x {t.per_step_ms:.1f} ms "
        f"+ n-gram {t.ngram_s * 1000:.1f} ms; model load {load_s:.2f} s",
        file=sys.stderr,
    )


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from spd_lsp.engine.local import LocalEngine
    from spd_lsp.engine.model import ModelLoadError, load_model

    prefix = read_prefix(args)
    try:
        quantize = "int8" if args.int8 else "int4" if args.int4 else None
        # one request: the fast path's step eager (its compile pays off over a server's many requests)
        loaded = load_model(args.model, args.device, args.dtype, quantize, fast=args.fast_path, compile=False)
    except ModelLoadError as exc:
        print(f"spd-lsp: {exc}", file=sys.stderr)
        return 2
    engine = LocalEngine(loaded, open_ngrams(args.ngram_db, loaded.tokenizer) if args.ngram_db else None)
    options = DecodeOptions(
        method=args.method,
        k=args.k,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        stop_at_newline=not args.multiline,
        heal=not args.no_heal,
        seed=args.seed,
    )
    print_result(engine.complete(prefix, options), loaded.load_s, args.json)
    return 0


def open_ngrams(path: Path, tokenizer):
    """A read-only view of an existing store, refused clearly when it belongs to another tokenizer."""
    from ngram_db.store import NgramStore
    from spd_lsp.engine.model import tokenizer_identity

    return NgramStore.open(path, tokenizer_identity(tokenizer), readonly=True)
