"""Content exclusion (`exclude`): an excluded document is never completed nor read, and the log says why once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from spd_lsp.session.exclusion import Exclusion
from spd_lsp.session.session import indexed
from spd_lsp.settings import Settings, parse_settings
from tests.session.test_server_session import FakeEngine, make_session

ROOT = Path("/work/project")
TEXT = "API_URL = 'https://example.org'\nvalue = ca"


@pytest.mark.parametrize(("path", "pattern"), [
    (".env", "*.env"), ("deploy/.env.production", ".env.*"), ("certs/server.pem", "*.pem"), ("keys/id_ed25519", "id_ed25519*"),
    ("config/credentials.json", "*credentials*.json"), (".aws/config", ".aws/"), ("settings/secrets.yaml", "*secret*"),
])
def test_the_default_is_the_indexers_secret_file_names(path: str, pattern: str) -> None:
    assert Exclusion(None, [ROOT]).pattern_for((ROOT / path).as_uri()) == pattern


def test_ordinary_files_untitled_buffers_and_a_users_own_patterns() -> None:
    default = Exclusion(None, [ROOT])
    for path in ("app.py", "src/environment.py", "docs/keys.md"):
        assert default.pattern_for((ROOT / path).as_uri()) is None, path
    assert default.pattern_for("untitled:Untitled-1") is None
    own = Exclusion(["generated/**", "*.log", "!keep.log"], [ROOT])
    assert own.pattern_for((ROOT / "generated/x/y.py").as_uri()) == "generated/**"
    assert own.pattern_for((ROOT / "logs/run.log").as_uri()) == "*.log"
    assert own.pattern_for((ROOT / "keep.log").as_uri()) is None
    assert own.pattern_for((ROOT / ".env").as_uri()) is None  # a list of its own replaces the default
    assert Exclusion(None, []).pattern_for(Path("/elsewhere/.env").as_uri()) == "*.env"  # outside every folder: by name
    assert Exclusion([], [ROOT]).pattern_for((ROOT / ".env").as_uri()) is None  # [] turns it off


def test_an_excluded_document_gets_no_drafts_is_not_read_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    engine = FakeEngine(["alpha()"])
    session, _ = make_session(engine)
    secret, ordinary = (ROOT / ".env").as_uri(), (ROOT / "app.py").as_uri()
    try:
        session.configure(session.settings, roots=[ROOT]).future.result(5)
        with caplog.at_level(logging.INFO, logger="spd_lsp.session.exclusion"):
            for _ in range(3):
                assert session.complete(secret, TEXT, 1, 10, "utf-16").future.result(5).edits == []
            session.warm_up(secret, TEXT).future.result(5)
        assert engine.prefixes == [] and engine.warmed == []  # never read
        said = [r.getMessage() for r in caplog.records if "exclude" in r.getMessage()]
        assert len(said) == 1 and ".env" in said[0] and "'*.env'" in said[0]
        # the excluded document's text never reaches another document's prompt either
        assert session.readable([(secret, "TOKEN=abc"), (ordinary, "x = 1")]) == [(ordinary, "x = 1")]
        assert session.complete(ordinary, TEXT, 1, 10, "utf-16").future.result(5).edits
        assert session.status()["excluded"] == 3
    finally:
        session.close()


def test_a_changed_setting_applies_at_once_and_the_store_leaves_excluded_files_out() -> None:
    engine = FakeEngine(["alpha()"])
    session, _ = make_session(engine)
    try:
        settings = parse_settings({"exclude": ["*.ipynb"], "ngrams": {"enabled": False}})[0]
        session.configure(settings, roots=[ROOT]).future.result(5)
        assert session.complete((ROOT / "a.ipynb").as_uri(), TEXT, 1, 10, "utf-16").future.result(5).edits == []
        assert session.complete((ROOT / ".env").as_uri(), TEXT, 1, 10, "utf-16").future.result(5).edits
    finally:
        session.close()
    assert indexed(settings).exclude == ("*.ipynb",)
    assert indexed(Settings()).exclude == ()  # the secret-file names: the indexer leaves them out anyway
    both = parse_settings({"exclude": ["gen/"], "ngrams": {"exclude": ["vendor/"]}})[0]
    assert indexed(both).exclude == ("vendor/", "gen/")
