"""Command-line options for every server setting, generated from the settings' schema (`settings.SCHEMA`):
a flag per dataclass field, its type and choices from the field, checked by the setting's own parser.

`maxTokens` is `--max-tokens`, `ngrams.alpha` is `--ngrams-alpha`, `context.suffixTokens` is
`--context-suffix-tokens`; booleans take `--x`/`--no-x`; lists take several values; an optional
value takes `none`.
"""

from __future__ import annotations

import argparse
import types
from dataclasses import fields
from typing import Any, Callable, Collection, Union, get_args, get_origin, get_type_hints

from spd_lsp.settings import SCHEMA, Settings, parse_settings

PREFIX = "setting:"  # the argparse destination of a setting: "setting:<section.>camelKey"


def add_settings(parser: argparse.ArgumentParser, *, only: Collection[str] | None = None,
                 title: str = "settings") -> None:
    """A flag per setting (`only`: these settings, by client name: `model`, `ngrams.alpha`)."""
    group = parser.add_argument_group(title, "the language server's settings (initializationOptions), by name")
    for section, keys, cls in SCHEMA:
        hints, defaults = get_type_hints(cls), cls()
        attributes = {f.name for f in fields(cls)}
        for key, (attribute, check) in keys.items():
            assert attribute in attributes, attribute
            name = f"{section}_{attribute}" if section else attribute
            flag = ("-" if len(name) == 1 else "--") + name.replace("_", "-")
            setting = f"{section}.{key}" if section else key
            if only is not None and setting not in only:
                continue
            options: dict[str, Any] = {"dest": PREFIX + setting, "default": argparse.SUPPRESS,
                                       "help": f"{setting} (default: {_shown(getattr(defaults, attribute))})"}
            options.update(_kind(hints[attribute], check))
            if "type" in options and "choices" not in options:
                options["metavar"] = key.split(".")[-1].upper()
            group.add_argument(flag, **options)


def settings_of(args: argparse.Namespace) -> tuple[Settings, list[str]]:
    """The settings the parsed flags give (the others keep their defaults), and the setting parser's warnings."""
    raw: dict[str, Any] = {}
    for destination, value in vars(args).items():
        if destination.startswith(PREFIX):
            *sections, key = destination.removeprefix(PREFIX).split(".")
            target = raw
            for section in sections:
                target = target.setdefault(section, {})
            target[key] = value
    return parse_settings(raw)


def _kind(hint: Any, check: Callable[[Any], Any]) -> dict[str, Any]:
    """argparse's action, type, nargs and choices for a field of type `hint`."""
    if hint is bool:
        return {"action": argparse.BooleanOptionalAction}
    if set(get_args(hint)) == {bool, str}:  # `multiline`: true, false or a word ("auto")
        return {"type": _switch, "choices": getattr(check, "choices"), "metavar": "{true,false," + ",".join(
            c for c in getattr(check, "choices") if isinstance(c, str)) + "}"}
    base, optional = _without_none(hint)
    kind: dict[str, Any] = {}
    if get_origin(base) in (tuple, list):
        base, kind["nargs"] = get_args(base)[0], "+"
    elif get_origin(base) is dict:  # n-gram weights: one per order, in order
        base, kind["nargs"] = get_args(base)[1], "+"
    kind["type"] = _scalar(base, optional=optional)
    choices = getattr(check, "choices", None)
    if choices is not None:
        kind["choices"] = choices
    return kind


def _switch(text: str) -> bool | str:
    return {"true": True, "false": False}.get(text.lower(), text)


def _without_none(hint: Any) -> tuple[Any, bool]:
    if get_origin(hint) in (Union, types.UnionType):
        rest = [a for a in get_args(hint) if a is not type(None)]
        return rest[0], len(rest) < len(get_args(hint))
    return hint, False


def _scalar(kind: Any, *, optional: bool) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        if optional and text.lower() == "none":
            return None
        return kind(text)

    convert.__name__ = kind.__name__  # argparse names the type in its errors
    return convert


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(str(v) for v in value.values())
    if isinstance(value, tuple):
        return " ".join(map(str, value)) or "none"
    return "none" if value is None else str(value)
