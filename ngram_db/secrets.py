"""Which lines of a text carry a secret (access keys, tokens, passwords, private keys,
high-entropy strings), found by detect-secrets' plugins and filters, as its file scan runs them.

Stores never count such a line (`ngram_db.indexer.read_source`, the one place every store
reads file text), and the language server never shows a draft that holds one.

detect-secrets costs ~240 us a line; most code lines cannot be a secret for any of its
plugins, so a line is scanned only when a cheap gate passes: a secret-ish word (the
keyword detector needs one), a run of 20+ key characters (an AWS key is 20, a GitHub
token 40; a base64 string needs ~23 for the 4.5-bit entropy limit), a `://user:pass@`
URL or a private-key marker. What the gate lets through untested: a quoted hex string of
9 to 19 characters with no secret-ish word on its line (detect-secrets' hex detector
would flag it; these are nearly always colours, short hashes or ids).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Iterable

RUN = r"[A-Za-z0-9+/=_\-]{20,}"  # a key, a token, a long base64 string
BASIC_AUTH = r"://[^\s/:@]+:[^\s/@]+@"
DIGIT = re.compile(r"\d")
PRIVATE_BEGIN = re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY")
PRIVATE_END = re.compile(r"-----END[A-Z ]*PRIVATE KEY")
PEM_BODY = re.compile(r"[A-Za-z0-9+/=]{32,}|^[\s\"']*(Proc-Type|DEK-Info):")
NOT_SECRETS = ("IPPublicDetector",)  # an address is not a credential
_lock = threading.Lock()
_configured = False
_gate: re.Pattern[str] | None = None


def gate() -> re.Pattern[str]:
    """Where a secret can start: detect-secrets' own keyword list, a long run, a credentialed URL."""
    global _gate
    if _gate is None:
        from detect_secrets.plugins.keyword import DENYLIST

        _gate = re.compile("|".join([*DENYLIST, RUN, BASIC_AUTH]), re.IGNORECASE)
    return _gate


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
    """The lines the gate passes, found over the whole text at once (most lines never reach Python)."""
    numbers: list[int] = []
    line, at = 1, 0
    for match in gate().finditer(text):
        line += text.count("\n", at, match.start())
        at = match.start()
        if numbers and numbers[-1] == line:
            continue
        value = match.group()
        if len(value) >= 20 and "://" not in value and not DIGIT.search(value):
            if not any(word in value.lower() for word in ("key", "pass", "pwd", "secret", "contras")):
                continue  # a long name (snake_case), no digit: no key or token looks like that
        numbers.append(line)
    return numbers


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
