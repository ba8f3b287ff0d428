"""Secrets inside ordinary source files never reach a store (workspace, watcher, base, shards)
nor a draft: issue 24, item 2. Real LMDB stores, real files, detect-secrets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ngram_db.indexer import IndexOptions, Indexer
from ngram_db.secrets import contains_secret, secret_lines, without_secret_lines
from spd_lsp.fit.edits import finalize
from tests.ngram_support import encode, store  # noqa: F401

AWS_KEY = "AKIAQ3EGVMZ5EXAMPLEX"
TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
SETTINGS_PY = f'DEBUG = False\nAWS_ACCESS_KEY_ID = "{AWS_KEY}"\nTIME_ZONE = "UTC"\n'
PROD_ENV = f"PORT=8080\nGITHUB_TOKEN={TOKEN}\nLOG_LEVEL=info\n"


def _workspace(root: Path) -> Path:
    (root / "app").mkdir(parents=True)
    (root / "config").mkdir()
    (root / "app" / "settings.py").write_text(SETTINGS_PY)
    (root / "config" / "prod.env.example").write_text(PROD_ENV)
    return root


def _counted(store, text: str) -> bool:
    """Whether any 6 bytes of `text` are counted in the byte-token store."""
    ids = encode(text)
    return any(store.count(ids[i : i + 6]) for i in range(len(ids) - 5))


def test_secrets_in_source_files_are_never_counted(tmp_path, store):
    root = _workspace(tmp_path / "ws")
    report = Indexer(store, encode, [root], IndexOptions()).index()
    assert report.files_indexed == 2
    assert not _counted(store, AWS_KEY) and not _counted(store, TOKEN)  # before the filter: both were
    assert _counted(store, 'TIME_ZONE = "UTC"') and _counted(store, "LOG_LEVEL=info")  # the rest is
    assert dict(report.secret_lines) == {str(root / "app" / "settings.py"): (2,),
                                         str(root / "config" / "prod.env.example"): (2,)}


def test_the_off_switch_counts_them_and_switching_back_reads_every_file_again(tmp_path, store):
    root = _workspace(tmp_path / "ws")
    Indexer(store, encode, [root], IndexOptions(secret_filter=False)).index()
    assert _counted(store, AWS_KEY) and _counted(store, TOKEN)
    report = Indexer(store, encode, [root], IndexOptions()).index()  # same files, same mtimes
    assert report.files_indexed == 2 and not _counted(store, AWS_KEY) and not _counted(store, TOKEN)


def test_the_watcher_path_filters_too(tmp_path, store):
    root = _workspace(tmp_path / "ws")
    indexer = Indexer(store, encode, [root], IndexOptions())
    indexer.index()
    changed = root / "app" / "settings.py"
    changed.write_text(SETTINGS_PY + 'DB_PASSWORD = "s3cr3t-Pa55word!"\n')
    assert indexer.update_path(changed)
    assert not _counted(store, "s3cr3t-Pa55word") and _counted(store, "TIME_ZONE")


def test_the_distributed_build_reads_through_the_same_filter(tmp_path):
    import numpy as np

    from ngram_db.distributed import _read_sources

    root = _workspace(tmp_path / "ws")
    cache = tmp_path / "cache"
    cache.mkdir()
    paths = [str(root / "app" / "settings.py"), str(root / "config" / "prod.env.example")]
    rows = _read_sources({"paths": [paths]}, cache=str(cache), max_file_bytes=10**6,
                         make_encoder=lambda: lambda texts: [encode(t) for t in texts], fault_once=None)
    texts = [bytes(np.fromfile(cache / f"{h}.u32", dtype="<u4").astype(np.uint8)).decode() for h in rows["hash"]]
    assert all(AWS_KEY not in t and TOKEN not in t for t in texts) and "TIME_ZONE" in texts[0]
    assert list(rows["secret_lines"]) == ["2", "2"]


def test_detector_kinds_and_line_numbers():
    text = "\n".join([
        "import os",
        f'key = "{AWS_KEY}"',
        'password = "hunter2-but-longer"',
        "SLACK = 'xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx'",
        'url = "https://admin:pa55w0rdXyz@db.example.com/app"',
        "-----BEGIN RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF0qJv3jYzYvZ1v9l7b0DzGvKq3Qw",
        "-----END RSA PRIVATE KEY-----",
        "def structure_inline_completion_request(value): return value",  # a long name is no secret
        'PRIVATE_KEY_MARKER = "-----BEGIN RSA PRIVATE KEY-----"',
        "    return parse(data)",  # a marker string in a parser: the block ends at a non-key line
    ])
    assert secret_lines(text) == [2, 3, 4, 5, 6, 7, 8, 10]
    cleaned, found = without_secret_lines(text)
    assert found == (2, 3, 4, 5, 6, 7, 8, 10) and cleaned.count("\n") == text.count("\n")
    assert AWS_KEY not in cleaned and "import os" in cleaned and "return parse(data)" in cleaned


def test_drafts_that_carry_a_secret_are_dropped():
    drafts = [f' "{AWS_KEY}"', ' "us-east-1"', f" {TOKEN}", " os.environ['KEY']"]
    assert finalize(drafts, lambda text: text, 3) == [' "us-east-1"', " os.environ['KEY']"]
    assert contains_secret(f'aws_secret = "{AWS_KEY}"') and not contains_secret("return a + b")


def test_index_command_reports_where_and_never_what(tmp_path):
    root = _workspace(tmp_path / "ws")
    env = dict(os.environ, SPD_LSP_CACHE=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-m", "spd_lsp.cli", "index", str(root), "--quiet"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "left out 2 line(s) that carry a secret, in 2 file(s)" in run.stdout
    assert f"{root / 'app' / 'settings.py'}: line 2" in run.stdout
    assert f"{root / 'config' / 'prod.env.example'}: line 2" in run.stdout
    assert AWS_KEY not in run.stdout + run.stderr and TOKEN not in run.stdout + run.stderr
    off = subprocess.run([sys.executable, "-m", "spd_lsp.cli", "index", str(root), "--quiet", "--no-secret-filter",
                          "--db", str(tmp_path / "off")], capture_output=True, text=True, env=env, timeout=300)
    assert off.returncode == 0 and "WARNING: --no-secret-filter" in off.stderr and "left out" not in off.stdout
