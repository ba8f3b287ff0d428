"""Drafts stop where they start reproducing the text after the cursor.

A fill-in-the-middle model sees the suffix and often writes the middle and then
the suffix's first words again (`a, b)` before `, b)`). `postprocess.Fit` already
cuts at the closers the rest of the line closes and at glued words; this cuts the
longer echoes Fit cannot see: several characters, or a following line, of the suffix.
"""

from __future__ import annotations

MIN_ECHO = 4  # non-blank characters: shorter echoes (")", "])") are Fit's to judge


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def cut_echo(draft: str, suffix: str) -> str:
    """`draft` up to the first point from which the rest of it begins the suffix (blanks aside).

    The rest must hold at least MIN_ECHO non-blank characters and start between words.
    """
    head = suffix.lstrip()
    for start in range(len(draft)):
        tail = draft[start:].lstrip()
        if len(tail.rstrip()) < MIN_ECHO:
            break
        if start and _word(draft[start - 1]) and _word(draft[start]):
            continue
        if head.startswith(tail):
            return draft[:start]
    return draft
