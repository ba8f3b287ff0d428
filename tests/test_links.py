"""Every repository path and `module.function` that the docs and the code's comments name exists.

Read: README.md, docs/*.md, bench/README.md, tests/README.md, and the comments and docstrings of the
Python files (and the comments of the C++ files) of spd_lsp, ngram_db, evaluation, bench, tests and examples.
Checked:

- a path (`spd_lsp/engine/loading.py`, `docs/performance.md#cold-start`, `evaluation/results/`, `tests/remote/test_*.py`):
  it exists relative to the repository, to the file naming it, or as the tail of a repository path
  (`decoding/verify.py`); a glob matches something;
- a module attribute in backticks: `engine/loading.load_local`, `spd_lsp.api.METHOD`, `lsp.handlers.build_server`
  (the longest dotted or slashed head that is a module of the repository, then its names, a class's too), and
  `Class.attribute` for a class of the repository (`Settings.model_key`);
- in docs/architecture.md, strictly: every dotted name in backticks resolves in the repository or starts with an
  installed library's module (`asyncio.run`), so its walk names only what the code holds.

What is not in the repository on purpose (a model's `config.json`, the paper, another project's file) goes in
tests/external_references.txt, one per line with why (tests/README.md).
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import io
import re
import subprocess
import tokenize
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED_FILE = ROOT / "tests" / "external_references.txt"
DOCS = ["README.md", "docs/*.md", "bench/README.md", "tests/README.md"]
CODE = ("spd_lsp/", "ngram_db/", "evaluation/", "bench/", "tests/", "examples/")
SKIP = ("tests/editors/vendor/",)
STRICT = ("docs/architecture.md",)
EXTENSIONS = "py|md|cpp|h|sh|lua|ts|js|toml|json|jsonl|png|txt|yml|yaml|cfg|csv|vsix|log|safetensors|gguf|mdb|whl"
URL = re.compile(r"\b[a-z][a-z+.-]*://\S+|\bwww\.\S+")
PATH = re.compile(rf"(?<![\w/.~*$-])((?:[\w.*-]+/)*[\w*-][\w.*-]*\.(?:{EXTENSIONS})(?:#[\w-]*)?|(?:[\w.-]+/)+)(?![\w/-])")
TICKED = re.compile(r"`([^`\n]+)`")
NAME = re.compile(r"^([A-Za-z_][\w]*(?:[./][A-Za-z_]\w*)+)(?:\(\))?$")
PACKAGES = {"spd_lsp", "ngram_db", "evaluation", "bench", "tests"}


@dataclass(frozen=True)
class Reference:
    where: str  # file:line
    text: str
    kind: str  # "path" or "name"

    def __str__(self) -> str:
        return f"{self.where}: {self.kind} `{self.text}`"


@cache
def files() -> tuple[str, ...]:
    """The repository's files: tracked, and new ones git does not ignore."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.split("\n")
    return tuple(sorted({f for f in listed if f and (ROOT / f).exists()}))


@cache
def anchors(page: str) -> frozenset[str]:
    """GitHub's anchors of a Markdown page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+\s+(.*?)\s*$", (ROOT / page).read_text(encoding="utf-8"), re.MULTILINE)
    return frozenset(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings)


@cache
def directories() -> frozenset[str]:
    return frozenset(str(parent) for f in files() for parent in PurePosixPath(f).parents if str(parent) != ".")


def allowed() -> set[str]:
    lines = ALLOWED_FILE.read_text(encoding="utf-8").splitlines()
    return {line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()}


def checked_path(text: str) -> bool:
    """Whether a path-like token is read as a repository path: a file, a glob with a folder, a folder two deep."""
    target = text.split("#", 1)[0]
    if target.endswith("/"):
        return target.count("/") >= 2  # `builds/`, `.ssh/`: a word, not a place
    return "/" in target or "*" not in target


def path_exists(text: str, source: str) -> bool:
    target, _, anchor = text.partition("#")
    target = target.rstrip("/")
    if not target:
        return True
    if anchor and target.endswith(".md"):  # a heading of that page (GitHub's anchors)
        page = _normal(PurePosixPath(source).parent / target)
        page = page if (ROOT / page).is_file() else target
        return (ROOT / page).is_file() and anchor in anchors(page)
    here = PurePosixPath(source).parent
    candidates = {str(PurePosixPath(target)), _normal(here / target)}
    if "*" in target:
        return any(fnmatch.fnmatch(f, pattern) or fnmatch.fnmatch(f, f"*/{pattern}")
                   for f in files() for pattern in candidates)
    known = set(files()) | directories()
    if candidates & known:
        return True
    tail = "/" + target.lstrip("./")
    return any(f.endswith(tail) for f in known)


def _normal(path: PurePosixPath) -> str:
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)


@cache
def modules() -> dict[str, list[str]]:
    """Module tails to files: "engine/loading" -> ["spd_lsp/engine/loading.py"], "remote" -> its __init__.py."""
    found: dict[str, list[str]] = defaultdict(list)
    for f in files():
        if not f.endswith(".py") or f.startswith(SKIP):
            continue
        parts = PurePosixPath(f).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for start in range(len(parts)):
            found["/".join(parts[start:])].append(f)
    return found


@cache
def names_in(path: str) -> dict[str, set[str] | None]:
    """A module's top-level names; a class's value is its own names (None: a base outside the repository)."""
    names: dict[str, set[str] | None] = {}
    for node in parsed(path).body:
        for name in _bound(node):
            names.setdefault(name, set())
        if isinstance(node, ast.ClassDef):
            names[node.name] = _members(node)
    if path.endswith("__init__.py"):  # a package's submodules are its names too
        package = str(PurePosixPath(path).parent)
        names.update({str(PurePosixPath(f).relative_to(package).with_suffix("")).split("/")[0]: set()
                      for f in files() if f.startswith(package + "/") and f.endswith(".py")})
    return names


def _bound(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AnnAssign, ast.AugAssign)) else []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _members(node: ast.ClassDef, seen: frozenset[int] = frozenset()) -> set[str] | None:
    """A class's names, its bases' in the repository included; None where a base is outside it (unknown names)."""
    members = {name for child in node.body for name in _bound(child)}
    for child in ast.walk(node):  # self.x = ... in its methods
        if isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name) and child.value.id == "self" \
                and isinstance(child.ctx, ast.Store):
            members.add(child.attr)
    for base in node.bases:
        name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
        if name in ("object", "Exception", "ValueError", "RuntimeError", "Protocol"):
            continue
        inherited = [_members(other, seen | {id(node)}) for other in classes().get(name, []) if id(other) not in seen
                     and other is not node]
        if not inherited or any(m is None for m in inherited):
            return None
        for other in inherited:
            members |= other or set()
    return members


@cache
def parsed(path: str) -> ast.Module:
    try:
        return ast.parse((ROOT / path).read_text(encoding="utf-8"))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def definitions(node: ast.AST) -> list[ast.AST]:
    """The module, classes and functions inside `node`, by their statement bodies only (quicker than `ast.walk`)."""
    found = [node]
    for child in getattr(node, "body", []):
        if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found += definitions(child)
        else:
            for block in ("body", "orelse", "finalbody", "handlers"):
                for inner in getattr(child, block, []):
                    if isinstance(inner, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                        found += definitions(inner)
    return found


@cache
def classes() -> dict[str, list]:
    found: dict[str, list] = defaultdict(list)
    for f in files():
        if f.endswith(".py") and not f.startswith(SKIP):
            for node in definitions(parsed(f)):
                if isinstance(node, ast.ClassDef):
                    found[node.name].append(node)
    return found


def name_exists(text: str, *, strict: bool) -> bool | None:
    """True or False for a name of the repository; None where it names nothing of the repository (not checked)."""
    match = NAME.match(text)
    if not match or re.search(rf"\.(?:{EXTENSIONS})$", text):  # a file: read as a path
        return None
    parts = re.split(r"[./]", match.group(1))
    slashed = "/" in match.group(1)
    if text in setting_names():
        return True
    if slashed and path_exists(text, "."):  # `doc/tags`
        return True
    if slashed and parts[0] not in {PurePosixPath(d).name for d in directories()}:
        return None  # `textDocument/inlineCompletion`: no place of the repository
    if any(re.match(r"^[a-z]+[A-Z]", part) for part in parts[1:]):
        return None  # `model.compileReason`: a key of the JSON the server speaks, not a Python name
    for cut in range(len(parts) - 1, 0, -1):  # the longest head that is a module
        paths = modules().get("/".join(parts[:cut]))
        if paths:
            return any(_has(names_in(path), parts[cut:]) for path in paths)
    if parts[0][:1].isupper() and parts[0] in classes():
        members = [_members(node) for node in classes()[parts[0]]]
        return any(m is None or parts[1] in m for m in members)
    if strict and parts[0][:1].isupper():
        return False  # a class the repository does not have
    if slashed or parts[0] in PACKAGES or parts[0] in _subpackages():
        return False
    if strict:
        return _installed(parts[0])
    return None


def _has(names: dict[str, set[str] | None], attrs: list[str]) -> bool:
    if attrs[0] not in names:
        return False
    inner = names[attrs[0]]
    return len(attrs) == 1 or inner is None or not inner or attrs[1] in inner


@cache
def setting_names() -> frozenset[str]:
    """The settings' client names (`maxTokens`, `context.suffixTokens`), which read like dotted names."""
    from spd_lsp.settings import SCHEMA

    return frozenset(f"{section}.{key}" if section else key for section, keys, _ in SCHEMA for key in keys)


@cache
def _subpackages() -> frozenset[str]:
    return frozenset(PurePosixPath(f).parent.name for f in files() if f.startswith("spd_lsp/") and f.endswith("__init__.py"))


@cache
def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def doc_texts() -> list[tuple[str, int, str]]:
    """(file, line, text) of every prose line to read."""
    out = []
    for pattern in DOCS:
        for path in sorted(ROOT.glob(pattern)):
            name = str(path.relative_to(ROOT))
            out += [(name, i, line) for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)]
    for name in files():
        if name.endswith(".py") and name.startswith(CODE) and not name.startswith(SKIP):
            out += comments(name)
        elif name.endswith((".cpp", ".h")) and name.startswith(CODE):
            out += c_comments(name)
    return out


def c_comments(name: str) -> list[tuple[str, int, str]]:
    """A C++ file's `//` comments and `/* */` blocks, line by line."""
    out = []
    for i, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if "//" in line:
            out.append((name, i, line.split("//", 1)[1]))
        elif stripped.startswith(("/*", "*")):
            out.append((name, i, stripped))
    return out


def comments(name: str) -> list[tuple[str, int, str]]:
    """A Python file's comments and docstrings, line by line (none of a file that does not parse: a demo's prefix)."""
    source = (ROOT / name).read_text(encoding="utf-8")
    tree = parsed(name)
    if not tree.body:
        return []
    out = [(name, token.start[0], token.string) for token in tokenize.generate_tokens(io.StringIO(source).readline)
           if token.type == tokenize.COMMENT]
    for node in definitions(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out += [(name, first.lineno + i, line) for i, line in enumerate(first.value.value.splitlines())]
    return out


@cache
def references() -> tuple[tuple[Reference, bool], ...]:
    """Every reference read, and whether it exists."""
    found = []
    for name, line, text in doc_texts():
        where, text = f"{name}:{line}", URL.sub(" ", text)
        strict = name in STRICT
        for ticked in TICKED.findall(text):
            exists = name_exists(ticked.strip(), strict=strict)
            if exists is not None:
                found.append((Reference(where, ticked.strip(), "name"), exists))
        for path in PATH.findall(text):
            if checked_path(path):
                found.append((Reference(where, path, "path"), path_exists(path, name)))
    return tuple(found)


def test_every_named_path_and_module_attribute_exists() -> None:
    exceptions = allowed()
    missing = sorted({str(ref) for ref, exists in references() if not exists and ref.text not in exceptions})
    assert not missing, "named but not in the repository (fix the reference, or add an external one to " \
        f"{ALLOWED_FILE.relative_to(ROOT)}):\n" + "\n".join(missing)


def test_the_allow_list_holds_nothing_the_repository_has_or_nobody_names() -> None:
    named = {ref.text for ref, exists in references() if not exists}
    stale = sorted(allowed() - named)
    assert not stale, f"{ALLOWED_FILE.relative_to(ROOT)}: no longer needed: {', '.join(stale)}"


@pytest.mark.parametrize("reference, exists", [
    ("spd_lsp/engine/loading.py", True), ("decoding/verify.py", True), ("engine.md#the-local-engine-spd_lspenginelocalpy", True),
    ("tests/remote/test_*.py", True), ("engine/fast/step.py", False), ("SPD_SPEC.md", False), ("model_config.py", False),
    ("performance.md#cold-start", True), ("performance.md#what-a-typist-waits-for", False),
    ("docs/readme/quality.md", False), ("evaluation/results/", True), ("docs/study/", False),
])
def test_paths_resolve_as_documented(reference: str, exists: bool) -> None:
    assert path_exists(reference, "docs/architecture.md") is exists


@pytest.mark.parametrize("reference, exists", [
    ("engine/loading.load_local", True), ("spd_lsp.api.METHOD", True), ("lsp.handlers.build_server", True),
    ("Settings.model_key", True), ("Session._prompt", False), ("lsp.server.build_server", False),
    ("commands/loading.load_engine", False), ("decoding.placement.model_step", False), ("options.k", None),
])
def test_names_resolve_as_documented(reference: str, exists: bool | None) -> None:
    assert name_exists(reference, strict=False) is exists
