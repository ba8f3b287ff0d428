"""The documentation stays true: every `Settings` field is documented in docs/settings.md
under the name clients send, and README and docs/performance.md keep their length budgets (paths and names the
docs mention: test_links.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from spd_lsp.settings import Settings, parse_settings

ROOT = Path(__file__).resolve().parent.parent


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def client_names(cls: type = Settings, section: str = "") -> list[str]:
    """`maxTokens`, `ngrams.alpha`, `context.suffixTokens`, …: one per leaf field of `Settings`."""
    names = []
    for field in dataclasses.fields(cls):
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        name = f"{section}{camel(field.name)}"
        if dataclasses.is_dataclass(default):
            names += client_names(type(default), f"{name}.")
        else:
            names.append(name)
    return names


def raw_setting(name: str, value: object) -> dict:
    *sections, leaf = name.split(".")
    raw: dict = {leaf: value}
    for section in reversed(sections):
        raw = {section: raw}
    return raw


def default_of(name: str) -> object:
    value: object = Settings()
    for part in name.split("."):
        value = getattr(value, re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), part))
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return {str(key): weight for key, weight in value.items()}
    return value


@pytest.mark.parametrize("name", client_names())
def test_each_setting_is_documented_under_its_client_name(name: str) -> None:
    # The derived name is the one the parser takes: sending the default back gives no warning.
    settings, warnings = parse_settings(raw_setting(name, default_of(name)))
    assert warnings == [], f"{name} is not the client name of a Settings field: {warnings}"
    assert settings == Settings()
    assert f"`{name}`" in (ROOT / "docs" / "settings.md").read_text(encoding="utf-8"), (
        f"docs/settings.md does not document the setting `{name}`"
    )


def test_the_walk_finds_nested_settings() -> None:
    names = client_names()
    assert {"k", "maxPrefixTokens", "ngrams.alpha", "context.suffixTokens"} <= set(names)
    assert "ngrams" not in names and "context" not in names


def test_readme_stays_short() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 350


def test_the_performance_page_stays_a_reference() -> None:
    """Its latest tables, not the history of rounds (CHANGELOG.md keeps that)."""
    assert len((ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines()) <= 400
