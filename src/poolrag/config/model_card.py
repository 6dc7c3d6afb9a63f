"""The languages a model folder's model card declares (``language:`` in README.md's front matter).

The hybrid default raises BM25's share when the dense model was not trained on the collection's
language (:mod:`poolrag.stores.language_prior`), so it needs the model's languages as data. Model
cards on the Hub and sentence-transformers folders carry them as YAML front matter (``language: en``
or a list). A card is documentation, not configuration: anything but ISO 639 codes (``multilingual``,
a missing or unreadable card) means "unknown", and unknown keeps the default fusion.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import yaml

logger = logging.getLogger(__name__)

_CODE = re.compile(r"[a-z]{2,3}")
_FRONT_MATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---\s*(?:\r?\n|\Z)", re.DOTALL)


def declared_languages(folder: str | Path) -> tuple[str, ...]:
    """The ISO 639 codes ``folder``'s README.md declares, sorted; ``()`` when it declares none, or
    anything that is not a code (then nothing can be said about what the model covers)."""
    card = Path(folder) / "README.md"
    try:
        text = card.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    match = _FRONT_MATTER.match(text)
    if match is None:
        return ()
    try:
        front = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        logger.debug("model card %s: front matter unreadable (%s); languages unknown", card, exc)
        return ()
    declared = front.get("language") if isinstance(front, dict) else None
    values = [declared] if isinstance(declared, str) else declared
    if not isinstance(values, list) or not values:
        return ()
    codes = [v.strip().lower() for v in values if isinstance(v, str)]
    if len(codes) != len(values) or not all(_CODE.fullmatch(c) for c in codes):
        return ()
    return tuple(sorted(set(codes)))
