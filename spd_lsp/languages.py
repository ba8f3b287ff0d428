"""Language facts every layer shares: a document's language from its file extension, and its line comment.

Plain values, no grammar loaded: the syntax check (fit/syntax.py), the prompt layout
(engine/prompt/layout.py) and the context gatherer (context/) read them here.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

GRAMMARS = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "javascript", ".ts": "typescript", ".tsx": "tsx", ".rs": "rust", ".go": "go", ".lua": "lua",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".java": "java",
    ".sh": "bash", ".bash": "bash", ".rb": "ruby", ".php": "php", ".cs": "csharp", ".kt": "kotlin",
    ".swift": "swift", ".scala": "scala", ".json": "json", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml",
}  # fmt: skip
LINE_COMMENTS = {
    "python": "#", "bash": "#", "ruby": "#", "toml": "#", "yaml": "#", "lua": "--",
    "javascript": "//", "typescript": "//", "tsx": "//", "rust": "//", "go": "//", "c": "//", "cpp": "//",
    "java": "//", "php": "//", "csharp": "//", "kotlin": "//", "swift": "//", "scala": "//",
}  # fmt: skip


def language_of(uri: str) -> str | None:
    """The grammar name for a document URI (or path), from its extension."""
    path = unquote(urlparse(uri).path) if "://" in uri else uri
    return GRAMMARS.get(PurePosixPath(path).suffix.lower())


def comment_marker(language: str | None) -> str | None:
    return LINE_COMMENTS.get(language or "")
