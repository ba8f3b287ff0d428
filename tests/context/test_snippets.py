"""Cross-file snippets: ranking by identifier overlap and BM25, de-duplication, the token budget, the suffix echo."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from spd_lsp.engine.prompt.echo import cut_echo
from spd_lsp.context.retrieval import ChunkIndex, WorkspaceChunks, terms, workspace_files
from spd_lsp.context.snippets import Chunk, RecentEdits, merge, rank_by_overlap, select, windows

PARSER = "def parse_header(line):\n    key, value = line.split(':', 1)\n    return key.strip(), value.strip()\n"
RENDER = "def render_page(template, context):\n    return template.format(**context)\n"
MATH = "def mean(values):\n    return sum(values) / len(values)\n"


def words(text: str) -> int:
    return len(text.split())


def test_chunks_are_ranked_by_identifier_overlap_with_the_query() -> None:
    chunks = [Chunk("render.py", 0, RENDER, "open"), Chunk("parse.py", 0, PARSER, "open"), Chunk("m.py", 0, MATH, "open")]
    ranked = rank_by_overlap("for line in lines:\n    key, value = parse_header(line)\n", chunks)
    assert [c.path for c in ranked][0] == "parse.py"
    assert "m.py" not in [c.path for c in ranked]  # nothing in common: below the floor


def test_a_chunk_repeating_the_text_around_the_cursor_is_dropped() -> None:
    """The model would copy it back, and the prompt holds it already."""
    ranked = [Chunk("copy.py", 0, PARSER, "open", 1.0), Chunk("render.py", 0, RENDER, "open", 0.5)]
    # a whole screen around the cursor: many names besides the copied ones
    screen = "".join(f"value_{i} = compute_{i}(item_{i}, limit_{i})\n" for i in range(25))
    chosen = select(ranked, near_cursor=screen + PARSER + screen, budget=1000, count_tokens=words)
    assert [c.path for c in chosen] == ["render.py"]


def test_overlapping_windows_of_one_file_and_identical_texts_are_kept_once() -> None:
    ranked = [Chunk("a.py", 0, PARSER, "open", 1.0), Chunk("a.py", 2, PARSER[10:], "open", 0.9),
              Chunk("b.py", 0, PARSER, "workspace", 0.8), Chunk("c.py", 0, RENDER, "workspace", 0.7)]
    assert [(c.path, c.start_line) for c in select(ranked, "", 1000, words)] == [("a.py", 0), ("c.py", 0)]


def test_the_budget_holds_and_a_smaller_later_chunk_may_still_fit() -> None:
    ranked = [Chunk("a.py", 0, PARSER, "open", 1.0), Chunk("b.py", 0, RENDER * 3, "open", 0.9),
              Chunk("m.py", 0, MATH, "open", 0.8)]
    budget = words(PARSER) + words(MATH)
    chosen = select(ranked, "", budget, words)
    assert [c.path for c in chosen] == ["a.py", "m.py"]
    assert sum(words(c.text) for c in chosen) <= budget


def test_windows_overlap_and_skip_blank_stretches() -> None:
    text = "".join(f"line{i}\n" for i in range(20)) + "\n" * 30
    chunks = windows("f.py", text, "open", lines=8, stride=4)
    assert chunks[0].start_line == 0 and chunks[1].start_line == 4
    assert all(c.text.strip() for c in chunks)


def test_sources_merge_by_their_own_best_score() -> None:
    jaccard = [Chunk("a.py", 0, "a", "open", 0.5), Chunk("b.py", 0, "b", "open", 0.25)]
    bm25 = [Chunk("c.py", 0, "c", "workspace", 12.0)]
    assert [(c.path, c.score) for c in merge(jaccard, bm25)] == [("a.py", 1.0), ("c.py", 1.0), ("b.py", 0.5)]


def test_recent_edits_keep_the_region_left_behind() -> None:
    text = "".join(f"row{i} = {i}\n" for i in range(100))
    recent = RecentEdits(size=2, region_lines=10)
    recent.visit("a.py", 50, text)
    recent.visit("a.py", 52, text)  # the same region: nothing kept yet
    assert not recent.chunks
    recent.visit("a.py", 5, text)
    assert [c.start_line for c in recent.chunks] == [47] and "row50 = 50" in recent.chunks[0].text


def test_bm25_finds_the_chunk_that_defines_what_the_cursor_uses(tmp_path) -> None:
    (tmp_path / "parse.py").write_text(PARSER)
    (tmp_path / "render.py").write_text(RENDER)
    (tmp_path / "notes.bin").write_bytes(b"\x00parse_header")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.py").write_text(PARSER)
    files = workspace_files([tmp_path])
    assert sorted(path for path, _ in files) == ["parse.py", "render.py"]
    found = ChunkIndex.of_files(files).search("headers = parseHeader(raw)")
    assert found and found[0].path == "parse.py" and found[0].source == "workspace"
    assert ChunkIndex.of_files(files).search("nothing_like_it") == []
    assert {"parse", "header", "parseheader"} <= set(terms("parseHeader"))


def test_a_draft_stops_where_it_starts_reproducing_the_suffix() -> None:
    assert cut_echo("a, b)", ", b)") == "a"
    assert cut_echo("total = 0\n    return total", "\n    return total\n") == "total = 0"
    assert cut_echo("x)", ")") == "x)"  # a closer alone is Fit's to judge
    assert cut_echo("myitems", "items = []") == "myitems"  # never inside a word
    assert cut_echo("self.items", "items = []") == "self."
    assert cut_echo("value", "") == "value"


def test_a_chunk_sharing_names_but_not_lines_with_the_cursor_region_is_kept() -> None:
    """The definition the cursor's code calls shares its identifiers: that is what makes it relevant."""
    near = "for line in lines:\n    key, value = parse_header(line)\n    headers[key] = value\n"
    ranked = [Chunk("parse.py", 0, PARSER, "workspace", 1.0)]
    assert [c.path for c in select(ranked, near, 1000, words)] == ["parse.py"]


def wait_for_search(chunks: Any, query: str, *, found: bool, timeout: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        index, _ = chunks.current()
        paths = [c.path for c in index.search(query)] if index is not None else []
        if bool(paths) == found or time.monotonic() > deadline:
            return paths
        time.sleep(0.05)


def test_the_workspace_index_follows_changed_files(tmp_path: Path) -> None:
    """Issue 13: the BM25 index was built once; a file saved with a new identifier never became a snippet."""
    (tmp_path / "a.py").write_text("def parse(text):\n    return text.split()\n")
    chunks = WorkspaceChunks(debounce_s=0.05)
    try:
        chunks.ensure([tmp_path])
        assert wait_for_search(chunks, "parse(text)", found=True) == ["a.py"]
        assert wait_for_search(chunks, "frobnicate_widget", found=False, timeout=0) == []
        (tmp_path / "b.py").write_text("def frobnicate_widget(w):\n    return w\n")  # the watcher sees it
        assert wait_for_search(chunks, "frobnicate_widget", found=True) == ["b.py"]
        (tmp_path / "b.py").unlink()
        assert wait_for_search(chunks, "frobnicate_widget", found=False) == []
    finally:
        chunks.close()


def test_the_index_never_holds_what_the_store_would_not(tmp_path: Path) -> None:
    """Secrets, and links to files outside the workspace, stay out however they arrive (walk, save)."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "private.py").write_text("secret_token_value = 'hunter2'\n")
    (root / "linked.py").symlink_to(outside / "private.py")
    (root / "secrets.py").write_text("secret_token_value = 'hunter3'\n")
    (root / "main.py").write_text("def main():\n    pass\n")
    assert [path for path, _ in workspace_files([root])] == ["main.py"]
    chunks = WorkspaceChunks(debounce_s=0.05)
    try:
        chunks.ensure([root])
        assert wait_for_search(chunks, "main", found=True) == ["main.py"]
        for name in ("linked.py", "secrets.py"):
            chunks.saved(root / name)
        chunks.saved(outside / "private.py")
        (root / "later.py").write_text("def later():\n    pass\n")
        chunks.saved(root / "later.py")  # queued after the others: once it is found, they were judged
        assert wait_for_search(chunks, "later", found=True) == ["later.py"]
        assert wait_for_search(chunks, "secret_token_value", found=False, timeout=0) == []
    finally:
        chunks.close()


def test_a_save_that_changes_nothing_keeps_the_index(tmp_path: Path) -> None:
    """No rebuild (and so no re-chosen snippets, no re-warm) for a file saved unchanged or not admitted."""
    (tmp_path / "a.py").write_text("def parse(text):\n    return text.split()\n")
    (tmp_path / ".env").write_text("API_KEY=1\n")
    chunks = WorkspaceChunks(debounce_s=0.05)
    try:
        chunks.ensure([tmp_path])
        wait_for_search(chunks, "parse", found=True)
        index, generation = chunks.current()
        for name in ("a.py", ".env"):
            chunks.saved(tmp_path / name)
        chunks._worker.submit("probe", lambda cancelled: None).future.result(30)  # after the saves' work
        assert chunks.current() == (index, generation)
    finally:
        chunks.close()
