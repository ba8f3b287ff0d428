"""`spd-lsp complete`: print k drafts for a prefix, with their scores and phase timings.

Takes every setting of the language server (`commands/flags.py`) and builds the request as the
server does (`session.decode_request`): the prompt window, the suffix after the cursor in --file,
the language and path, the prompt format; in process, or through the engine `--engine` names (the server's
default, "auto", is for many requests: one request here loads the model itself unless asked).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

from spd_lsp.api import DecodeRequest, DecodeResult
from spd_lsp.address import IN_PROCESS
from spd_lsp.commands.flags import PREFIX, add_settings, settings_of
from spd_lsp.cursor import Cursor, fit_window
from spd_lsp.settings import Settings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spd-lsp complete", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--prefix", help="text before the cursor (default: read stdin)")
    source.add_argument("--file", type=Path, help="the document: the prefix up to --line/--character, the suffix after")
    parser.add_argument("--line", type=int, help="0-based line of the cursor in --file (default: end of file)")
    parser.add_argument("--character", type=int, default=0, help="0-based character of the cursor in that line")
    parser.add_argument("--no-heal", action="store_true", help="disable token healing at the prefix boundary")
    parser.add_argument("--seed", type=int, help="the sampling seed (nucleus)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_settings(parser)
    return parser


def read_document(args: argparse.Namespace) -> tuple[str, str, int]:
    """The document's URI, its text and the cursor's offset in it."""
    if args.prefix is not None or args.file is None:
        text = args.prefix if args.prefix is not None else sys.stdin.read()
        return "untitled:prefix", text, len(text)
    text = args.file.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    if args.line is None:
        return args.file.resolve().as_uri(), text, len(text)
    if not 0 <= args.line <= len(lines):
        raise SystemExit(f"--line {args.line} is outside {args.file} ({len(lines)} lines)")
    current = lines[args.line] if args.line < len(lines) else ""
    offset = sum(map(len, lines[: args.line])) + min(args.character, len(current.rstrip("\r\n")))
    return args.file.resolve().as_uri(), text, offset


def request_at(uri: str, text: str, offset: int, settings: Settings, tokenizer, device_type: str) -> DecodeRequest | None:
    from spd_lsp.context.gather import ContextGatherer
    from spd_lsp.session.session import decode_request, token_ids, token_spans

    cursor = Cursor(text, offset)
    window = fit_window(cursor.prefix, token_ids(tokenizer), token_spans(tokenizer), settings.prefix_budget(device_type))
    return decode_request(uri, cursor, window, settings, tokenizer, ContextGatherer(), [Path.cwd()])


def print_result(result: DecodeResult, load_s: float, as_json: bool) -> None:
    t = result.timings
    if as_json:
        payload = {"method": result.method, "drafts": [asdict(d) for d in result.drafts], "timings": asdict(t),
                   "prompt": result.prompt, "load_s": load_s}
        print(json.dumps(payload, ensure_ascii=False))
        return
    for rank, draft in enumerate(result.drafts, 1):
        print(f"{rank}. [{draft.score:+.3f}] {draft.text!r}")
    print(
        f"-- {result.method}: total {t.total_s * 1000:.0f} ms = prefill {t.prefill_s * 1000:.0f} ms "
        f"({t.prefill_tokens} new tokens, {t.reused_tokens} reused) + {t.steps} steps x {t.per_step_ms:.1f} ms "
        f"+ n-gram {t.ngram_s * 1000:.1f} ms + verify {t.verify_s * 1000:.0f} ms; model load {load_s:.2f} s "
        "(score: mean log-probability per token)",
        file=sys.stderr,
    )


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings, warnings = settings_of(args)
    if warnings:
        parser.error("; ".join(warnings))
    if f"{PREFIX}engine" not in vars(args):  # one request: in process, unless --engine names an engine (or "auto")
        settings = replace(settings, engine=IN_PROCESS)
    uri, text, offset = read_document(args)
    from spd_lsp.commands.engine_setting import load_engine
    from spd_lsp.engine.model import ModelLoadError

    try:
        # One request repays neither the step's compile nor a standby (an "auto" engine it starts has no spare).
        loaded = load_engine(replace(settings, engine_standby=False), compile=False)
    except (ModelLoadError, OSError, ConnectionError) as exc:
        print(f"spd-lsp: {exc}", file=sys.stderr)
        return 2
    engine = loaded.engine
    try:
        if settings.ngrams.enabled and settings.ngrams.db:
            engine.set_ngrams(open_ngrams(Path(settings.ngrams.db), engine.tokenizer))
        request = request_at(uri, text, offset, settings, engine.tokenizer, loaded.device_type)
        if request is None:
            print("spd-lsp: nothing but blanks before the cursor", file=sys.stderr)
            return 1
        options = request.options.but(heal=not args.no_heal, seed=args.seed)
        print_result(engine.complete(replace(request, options=options)), loaded.info.get("loadSeconds", 0.0), args.json)
    finally:
        engine.close()
    return 0


def open_ngrams(path: Path, tokenizer):
    """A read-only view of an existing store (built by `spd-lsp index`), refused clearly when it belongs to another tokenizer."""
    from ngram_db.store import NgramStore
    from spd_lsp.tokens import tokenizer_identity

    return NgramStore.open(path, tokenizer_identity(tokenizer), readonly=True)
