"""Which lines of a text carry a secret (access keys, tokens, passwords, private keys,
high-entropy strings), found by detect-secrets' plugins and filters, as its file scan runs them.

Stores never count such a line (`ngram_db.indexer.read_source`, the one place every store
reads file text), and the language server never shows a draft that holds one.

detect-secrets costs ~250 us a line (~400 us on the lines that pass the gate); most code
lines cannot be a secret for any of its plugins, so a line is scanned only when a cheap gate,
run over the lowered text at once, passes: a word of detect-secrets' own keyword list
(password, secret, api_key, ...), a run of 20+ key characters holding a digit (an AWS key
is 20, a GitHub token 40; a base64 string needs ~23 for the 4.5-bit entropy limit), or a
`://user:pass@` URL; private-key blocks (BEGIN to END) go whole. On 54k lines of installed
packages the gate passes 0.6 % and misses none of the lines detect-secrets flags when it
scans them all (bench/bench_secret_filter.py --recall). What it lets through untested by
design: a quoted hex or base64 string under 20 characters, or one with no digit, with no
keyword on its line (colours, short hashes and ids nearly always).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Iterable

RUN = r"[a-z0-9+/=_\-]{20,}"  # a key, a token, a long base64 string (matched in the lowered text)
BASIC_AUTH = r"://[^\s/:@]+:[^\s/@]+@"
DIGIT = re.compile(r"\d")
PRIVATE_BEGIN = re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY")
PRIVATE_END = re.compile(r"-----END[A-Z ]*PRIVATE KEY")
PEM_BODY = re.compile(r"[A-Za-z0-9+/=]{32,}|^[\s\"']*(Proc-Type|DEK-Info):")
NOT_SECRETS = ("IPPublicDetector",)  # an address is not a credential
_lock = threading.Lock()
_configured = False
_gates: tuple[re.Pattern[str], ...] = ()


def gates() -> tuple[re.Pattern[str], ...]:
    """Where a secret can start: detect-secrets' own keyword list, a long run, a credentialed URL
    (three scans of the lowered text: one alternation of all, or IGNORECASE, is 5-10x slower)."""
    global _gates
    if not _gates:
        from detect_secrets.plugins.keyword import DENYLIST

        _gates = (re.compile("|".join(DENYLIST)), re.compile(RUN), re.compile(BASIC_AUTH))
    return _gates


def _configure() -> None:
    """Every detect-secrets plugin but NOT_SECRETS, with its default filters (once per process)."""
    global _configured
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.settings import cache_bust, configure_settings_from_baseline

    plugins = [{"name": kind.__name__} for kind in get_mapping_from_secret_type_to_class().values()
               if kind.__name__ not in NOT_SECRETS]
    cache_bust()
    configure_settings_from_baseline({"plugins_used": plugins})
    quiet = logging.getLogger("detect-secrets")  # its info lines quote the secret: never let them reach a log
    quiet.setLevel(logging.ERROR)
    quiet.propagate = False
    _configured = True


def secret_lines(text: str, filename: str = "source") -> list[int]:
    """1-based numbers of the lines (split at "\\n") that carry a secret, in order."""
    lines = text.split("\n")
    candidates = [(number, lines[number - 1]) for number in _gated(text)]
    found = set(_private_key_blocks(lines)) if "PRIVATE KEY" in text else set()
    if candidates:
        with _lock:  # its settings and plugin caches are process-global
            if not _configured:
                _configure()
            found.update(number for number, line in candidates if _scan(lines, number, line, filename))
    return sorted(found)


def _gated(text: str) -> list[int]:
    """The lines the gates pass, found over the whole text at once (most lines never reach Python)."""
    text = text.lower()  # its line ends unchanged (its length may not be: "İ")
    keywords, runs, urls = gates()
    starts = sorted([m.start() for m in keywords.finditer(text)] + [m.start() for m in urls.finditer(text)]
                    + [m.start() for m in runs.finditer(text) if _key_like(m.group())])
    numbers: list[int] = []
    line, at = 1, 0
    for start in starts:
        line += text.count("\n", at, start)
        at = start
        if not numbers or numbers[-1] != line:
            numbers.append(line)
    return numbers


def _key_like(run: str) -> bool:
    """A 20+ character run with a digit: a long snake_case name has none, nearly every key or token has one."""
    return DIGIT.search(run) is not None


def _scan(lines: list[str], number: int, line: str, filename: str) -> bool:
    """detect-secrets' verdict on one line, as its file scan (`_process_line_based_plugins`) reaches it."""
    from detect_secrets.core import scan
    from detect_secrets.util.code_snippet import get_code_snippet

    line = line.rstrip()
    context = get_code_snippet(lines=lines, line_number=number)
    if scan._is_filtered_out(required_filter_parameters=["line"], filename=filename, line=line, context=context):
        return False
    return any(not scan._is_filtered_out(required_filter_parameters=["context"], filename=secret.filename,
                                         secret=secret.secret_value, plugin=plugin, line=line, context=context)
               for plugin in scan.get_plugins()
               for secret in scan._scan_line(plugin=plugin, filename=filename, line=line, line_number=number,
                                             context=context))


def _private_key_blocks(lines: list[str]) -> Iterable[int]:
    """Every line from a private key's BEGIN marker to its END (the body is unquoted base64)."""
    inside = False
    for number, line in enumerate(lines, 1):
        if PRIVATE_BEGIN.search(line):
            inside = True
        elif inside and not (PRIVATE_END.search(line) or PEM_BODY.search(line)):
            inside = False  # not a key after all (a parser's marker string, say)
        if inside:
            yield number
            inside = not PRIVATE_END.search(line)


def contains_secret(text: str) -> bool:
    return bool(secret_lines(text))


def without_secret_lines(text: str, filename: str = "source") -> tuple[str, tuple[int, ...]]:
    """`text` with each secret line emptied (line numbers kept), and those lines' numbers."""
    found = secret_lines(text, filename)
    if not found:
        return text, ()
    lines = text.split("\n")
    for number in found:
        lines[number - 1] = ""
    return "\n".join(lines), tuple(found)
