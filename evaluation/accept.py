"""Is accepting a draft safe? Positions of three kinds in real sources, through the real server.

Positions come from Python files of packages the model was not tuned on (not
click/rich/attrs, the evaluation's tuning corpus) and that are not this
repository:

- inside call: cursor right after a call's `(`, its arguments removed, `)` kept
  (as auto-pairs leave it); the file without them still parses;
- mid-line: cursor at the start of a word with code after it on the line;
- line end: a line cut after one of its tokens, the rest of the line removed;

and, for multi-line drafts (`multiline: "auto"`), two more from the same sources:

- open block: the cursor at the end of a compound statement's header, its body removed;
- empty body: the cursor on an indented empty line where that body was.

Every returned item's edit is applied exactly as LSP says. An item *breaks* the
file when the document parsed (`ast`) before and not after; a multi-line item at
a block (whole code the user did not type) breaks it when the document with `pass`
for the body parses and the document with the item does not; it *glues* when the
text after the cursor is no longer the same tokens (Python's `tokenize`), a
name, number, string or closer now runs straight into the next name, number or
string, or an unclosed quote now swallows the rest of the line.
"""

from __future__ import annotations

import ast
import asyncio
import io
import random
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from importlib.util import find_spec
from itertools import zip_longest
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from lsprotocol import types as lsp

from evaluation.edits import block_edits
from spd_lsp.cursor import offset_of, units

KINDS = ("inside call", "mid-line", "line end")
BLOCK_KINDS = ("open block", "empty body")
PACKAGES = ("pathspec", "platformdirs", "tqdm", "watchdog")
SETTINGS = {"k": 3, "maxTokens": 8, "maxPrefixTokens": 256, "ngrams": {"enabled": False}}
AUTO = {**SETTINGS, "multiline": "auto", "multilineMaxTokens": 32}  # the block positions' server
WORDS = (tokenize.NAME, tokenize.NUMBER, tokenize.STRING)
LAYOUT = (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT)


@dataclass(frozen=True)
class Case:
    kind: str
    source: str  # where the position comes from, for failure messages
    text: str  # the document as the editor has it
    line: int
    character: int  # UTF-16 units
    reference: str | None = None  # a block's: the document with `pass` for its body

    @cached_property
    def parsed(self) -> bool:
        return parses(self.text)

    @cached_property
    def reference_parses(self) -> bool:
        return self.reference is not None and parses(self.reference)


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def package_files(packages: Sequence[str] = PACKAGES) -> list[Path]:
    """The Python sources of installed packages, in a stable order."""
    files: list[Path] = []
    for name in packages:
        spec = find_spec(name)
        if spec and spec.submodule_search_locations:
            files += sorted(p for root in spec.submodule_search_locations for p in Path(root).rglob("*.py"))
    return files


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    tokens = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            tokens.append(token)
    except (tokenize.TokenError, SyntaxError):
        pass  # an unclosed bracket or string: what came before it still counts
    return tokens


def _case(kind: str, source: str, lines: list[str], row: int, new_line: str, column: int) -> Case:
    text = "".join(lines[:row] + [new_line] + lines[row + 1 :])
    return Case(kind, f"{source}:{row + 1}", text, row, units(new_line[:column], "utf-16"))


def _file_cases(path: Path) -> Iterator[Case]:
    text = path.read_text(encoding="utf-8")
    if not parses(text):
        return
    lines = text.splitlines(keepends=True)
    tokens = [t for t in _tokens(text) if t.type not in LAYOUT]
    source = f"{path.parent.name}/{path.name}"
    for index, token in enumerate(tokens):
        row, line = token.start[0] - 1, token.line
        if token.start[0] != token.end[0] or not line.isascii() or row >= len(lines):
            continue
        after = tokens[index + 1] if index + 1 < len(tokens) else None
        if token.string == "(" and index and tokens[index - 1].type == tokenize.NAME:
            close = _closer(tokens, index)
            if close is not None and close.start[0] == token.start[0] and close.start != token.end:
                new_line = line[: token.end[1]] + line[close.start[1] :]
                yield _case("inside call", source, lines, row, new_line, token.end[1])
        before = tokens[index - 1] if index else None
        if token.type in WORDS and before is not None and before.start[0] == token.start[0]:
            if any(c.isalnum() for c in line[token.start[1] :]):
                yield _case("mid-line", source, lines, row, line, token.start[1])
        if after is not None and after.start[0] == token.start[0]:
            ending = "\r\n" if line.endswith("\r\n") else "\n"
            yield _case("line end", source, lines, row, line[: token.end[1]] + ending, token.end[1])


def _closer(tokens: Sequence[tokenize.TokenInfo], opener: int) -> tokenize.TokenInfo | None:
    depth = 0
    for token in tokens[opener:]:
        depth += (token.string in "([{") - (token.string in ")]}") if token.type == tokenize.OP else 0
        if depth == 0:
            return token
    return None


def _block_cases(path: Path) -> Iterator[Case]:
    """A compound statement's body removed: the cursor at the end of its header, or on an empty line in it."""
    source = f"{path.parent.name}/{path.name}"
    text = path.read_text(encoding="utf-8")
    for edit in block_edits(path, text):
        line = edit.before.count("\n")
        column = units(edit.before[edit.before.rfind("\n") + 1 :], "utf-16")
        indent = edit.before[edit.before.rfind("\n") + 1 :]
        if edit.kind == "open_block":
            body = edit.target.split("\n")[1]
            pass_line = "\n" + body[: len(body) - len(body.lstrip(" \t"))] + "pass"
            yield Case("open block", f"{source}:{line + 1}", edit.before + edit.after, line, column,
                       edit.before + pass_line + edit.after)
        else:
            yield Case("empty body", f"{source}:{line + 1}", edit.before + edit.after, line, column,
                       edit.before + "pass" + edit.after if indent.strip() == "" else None)


def block_cases(files: Iterable[Path], per_kind: int, seed: int = 0) -> list[Case]:
    """`per_kind` positions of each block kind, drawn at random (seeded), the kinds interleaved."""
    pools: dict[str, list[Case]] = {kind: [] for kind in BLOCK_KINDS}
    for path in files:
        for case in _block_cases(path):
            if case.reference_parses:
                pools[case.kind].append(case)
    rng = random.Random(seed)
    drawn = [rng.sample(pools[kind], min(per_kind, len(pools[kind]))) for kind in BLOCK_KINDS]
    return [case for turn in zip_longest(*drawn) for case in turn if case is not None]


def cases(files: Iterable[Path], per_kind: int, seed: int = 0) -> list[Case]:
    """`per_kind` positions of each kind, drawn at random (seeded) from `files`, the kinds interleaved
    (a run cut short still measures every kind)."""
    pools: dict[str, list[Case]] = {kind: [] for kind in KINDS}
    for path in files:
        for case in _file_cases(path):
            pools[case.kind].append(case)
    rng = random.Random(seed)
    rng.shuffle(pools["inside call"])  # removing arguments rarely breaks a file; skip those that do
    pools["inside call"] = [case for case in pools["inside call"][: 2 * per_kind] if case.parsed]
    drawn = [rng.sample(pools[kind], min(per_kind, len(pools[kind]))) for kind in KINDS]
    return [case for turn in zip_longest(*drawn) for case in turn if case is not None]  # kinds take turns


@dataclass(frozen=True)
class Verdict:
    broken: bool
    glued: bool


def _line_tokens(line: str) -> list[tokenize.TokenInfo]:
    return [t for t in _tokens(line) if t.start[0] == 1 and t.type not in LAYOUT]


def judge(case: Case, edit: lsp.Range, insert: str) -> Verdict:
    """Apply one item's edit as LSP says and check the document and the text after the cursor."""
    start = offset_of(case.text, edit.start.line, edit.start.character, "utf-16")
    end = offset_of(case.text, edit.end.line, edit.end.character, "utf-16")
    assert start is not None and end is not None, f"{case.source}: an edit outside the document"
    new = case.text[:start] + insert + case.text[end:]
    old_line_start = case.text.rfind("\n", 0, end) + 1
    new_line_start, boundary = new.rfind("\n", 0, start + len(insert)) + 1, start + len(insert)
    old_line = case.text[old_line_start : case.text.find("\n", end) + 1 or None]
    new_line = new[new_line_start : new.find("\n", boundary) + 1 or None]
    old_column, new_column = end - old_line_start, boundary - new_line_start
    old_tokens = [(t.type, t.string) for t in _line_tokens(old_line) if t.start[1] >= old_column]
    new_all = _line_tokens(new_line)
    new_tokens = [(t.type, t.string) for t in new_all if t.start[1] >= new_column]
    straddles = any(t.start[1] < new_column < t.end[1] for t in new_all)
    last = [t for t in new_all if t.end[1] == new_column]
    first = [t for t in new_all if t.start[1] == new_column]
    runs_on = bool(last and first) and first[0].type in WORDS and (
        last[-1].type in WORDS or last[-1].string in (")", "]", "}")
    )
    # an unclosed quote swallows the rest of the line (at a line end there is none: the user types on)
    opens = bool(old_tokens) and _error_tokens(new_all) > _error_tokens(_line_tokens(old_line))
    glued = old_tokens != new_tokens or straddles or runs_on or opens
    whole_code = case.reference is not None and "\n" in insert  # a multi-line item at a block
    broken = (case.parsed or (whole_code and case.reference_parses)) and not parses(new)
    return Verdict(broken=broken, glued=glued)


def _error_tokens(tokens: Sequence[tokenize.TokenInfo]) -> int:
    return sum(t.type == tokenize.ERRORTOKEN and not t.string.isspace() for t in tokens)


@dataclass
class Tally:
    positions: Counter[str] = field(default_factory=Counter)
    offered: Counter[str] = field(default_factory=Counter)
    items: Counter[str] = field(default_factory=Counter)
    broken: Counter[str] = field(default_factory=Counter)
    glued: Counter[str] = field(default_factory=Counter)
    lines: Counter[str] = field(default_factory=Counter)  # items of several lines
    failures: list[str] = field(default_factory=list)

    def add(self, case: Case, items: Sequence[lsp.InlineCompletionItem]) -> None:
        self.positions[case.kind] += 1
        self.offered[case.kind] += bool(items)
        for item in items:
            assert item.range is not None, f"{case.source}: an item without a range"
            verdict = judge(case, item.range, str(item.insert_text))
            self.items[case.kind] += 1
            self.lines[case.kind] += "\n" in str(item.insert_text)
            self.broken[case.kind] += verdict.broken
            self.glued[case.kind] += verdict.glued
            if verdict.broken or verdict.glued:
                line = case.text.splitlines()[case.line]
                self.failures.append(
                    f"{case.kind} {case.source} {'broken' if verdict.broken else 'glued'}: "
                    f"{line[: case.character]!r} + {item.insert_text!r} before {line[case.character :]!r}"
                )

    def table(self) -> str:
        rows = [
            "| position | n | offered | items | multi-line | broken | glued |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for kind in (*KINDS, *BLOCK_KINDS):
            if not self.positions[kind]:
                continue
            n = self.positions[kind]
            rate = f"{100 * self.offered[kind] / n:.0f} %" if n else "-"
            rows.append(f"| {kind} | {n} | {rate} | {self.items[kind]} | {self.lines[kind]} | {self.broken[kind]} | "
                        f"{self.glued[kind]} |")
        return "\n".join(rows)


async def model_ready(client: Any, timeout_s: float = 600) -> None:
    """Wait until the server has loaded its model (it answers `initialize` before that)."""
    async with asyncio.timeout(timeout_s):
        while (await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="spd.status"))).get(
            "model"
        ) is None:
            await asyncio.sleep(0.2)


async def run(client: Any, positions: Sequence[Case], *, progress: Callable[[Tally], None] | None = None) -> Tally:
    """Ask the server at every position (one document each) and judge every item it offers."""
    tally = Tally()
    for index, case in enumerate(positions):
        uri = f"file:///spd-accept/{index}.py"
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=case.text))
        )
        answer = await client.text_document_inline_completion_async(
            lsp.InlineCompletionParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                position=lsp.Position(line=case.line, character=case.character),
                context=lsp.InlineCompletionContext(trigger_kind=lsp.InlineCompletionTriggerKind.Invoked),
            )
        )
        client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri)))
        tally.add(case, answer.items if isinstance(answer, lsp.InlineCompletionList) else answer or [])
        if progress is not None:
            progress(tally)
    return tally
