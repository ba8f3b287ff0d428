"""The real bundled model: loading (from the GGUF's blocks, its tokenizer kept in the model's cache), and
`spd-lsp complete`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spd_lsp.engine.model import ModelLoadError, ModelSource, _cache_dir, load_model, resolve_source

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SPD = [sys.executable, "-m", "spd_lsp.cli"]


def complete(*args: str, env: dict[str, str] | None = None) -> dict:
    out = subprocess.run(
        [*SPD, "complete", "--json", *args], capture_output=True, text=True, check=True, timeout=300, env=env, cwd=ROOT
    )
    return json.loads(out.stdout)


def test_complete_returns_k_distinct_drafts_for_code() -> None:
    result = complete("--file", "examples/demo_prefix.py", "-k", "3")
    texts = [d["text"] for d in result["drafts"]]
    assert len(texts) == 3 and len(set(texts)) == 3 and all(t.strip() for t in texts)
    assert all("\n" not in t for t in texts)
    timings = result["timings"]
    assert timings["prefill_s"] > 0 and timings["steps"] >= 1


def test_complete_prints_each_draft_its_own_score_with_the_server_settings(tmp_path: Path) -> None:
    """Issue 22: the demo printed one score for all three drafts (the verified ranking's rank-order
    scores). The CLI takes the server's settings (--verify, --prompt-format, the context) and the
    suffix after the cursor, and each draft shows its own mean log-probability."""
    verified = complete("--file", "examples/demo_prefix.py", "-k", "3", "--max-tokens", "10")
    scores = [d["score"] for d in verified["drafts"]]
    assert len(scores) == 3 and len(set(scores)) == 3
    for draft in verified["drafts"]:  # the draft's own score: its tokens' mean log p, not its rank's
        assert -20 < draft["score"] < 0
    source = tmp_path / "walk.py"
    source.write_text("def total(values):\n    result = \n    return result\n")
    plain = complete("--file", str(source), "--line", "1", "--character", "13", "--verify", "off",
                     "--prompt-format", "prefix", "--context-suffix-tokens", "32", "--decoding", "greedy", "-k", "1")
    assert plain["method"] == "greedy" and plain["prompt"]["format"] == "prefix"
    assert plain["drafts"] and "return result" not in plain["drafts"][0]["text"]


def test_complete_reads_the_prefix_at_a_file_position() -> None:
    # Cursor after "    result = " on line 5: drafts continue that line.
    result = complete("--file", "examples/demo_prefix.py", "--line", "5", "--character", "13", "--decoding", "greedy")
    assert result["drafts"] and result["drafts"][0]["text"].strip()


def test_the_gguf_is_the_model_no_dequantised_copy_and_a_second_start_reads_the_kept_tokenizer(tmp_path: Path
                                                                                                   ) -> None:
    env = {**os.environ, "SPD_LSP_MODEL_CACHE": str(tmp_path)}
    first = complete("--prefix", "def add(a, b):\n    return", "--decoding", "greedy", env=env)
    assert not list(tmp_path.glob("models/*/*.safetensors"))  # no weights written
    assert len(list(tmp_path.glob("models/*/tokenizer/tokenizer.json"))) == 1
    second = complete("--prefix", "def add(a, b):\n    return", "--decoding", "greedy", env=env)
    assert second["drafts"][0]["text"] == first["drafts"][0]["text"]


def test_a_dequantised_directory_loads_as_a_hugging_face_model() -> None:
    from spd_lsp.engine.model import local_directory

    loaded = load_model(None)
    hf_dir = local_directory(resolve_source(None))  # transformers' dequantisation of the GGUF: a plain HF directory
    assert hf_dir.is_dir()
    again = load_model(str(hf_dir))
    assert again.model.config.vocab_size == loaded.model.config.vocab_size
    assert resolve_source(str(hf_dir)).gguf_file is None


def test_missing_model_is_one_clear_error() -> None:
    with pytest.raises(ModelLoadError, match="not found.*gguf.*Hugging Face"):
        load_model("/nonexistent/model.gguf")
    out = subprocess.run([*SPD, "complete", "--model", "/nonexistent", "--prefix", "x"], capture_output=True, text=True)
    assert out.returncode == 2 and "not found" in out.stderr and "Traceback" not in out.stderr


def test_a_model_reached_through_a_link_shares_its_dequantised_cache(tmp_path: Path) -> None:
    """A symlinked virtual environment (a git worktree's, say) must not dequantise the model again."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "model.gguf").write_bytes(b"GGUF")
    (tmp_path / "linked").symlink_to(real)
    assert _cache_dir(ModelSource(tmp_path / "linked", "model.gguf")) == _cache_dir(ModelSource(real, "model.gguf"))
