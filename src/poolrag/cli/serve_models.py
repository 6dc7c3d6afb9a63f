"""Which models ``poolrag serve`` runs, and under which names and limits: from ``MODEL [MODEL ...]``
and from a ``--models-file`` (TOML).

A models file lists one ``[[model]]`` table per model::

    [[model]]
    model = "sentence-transformers/all-MiniLM-L6-v2"
    served_model_name = ["minilm", "embedder"]  # optional; the first is reported
    max_queue = 64                               # optional per-model limits
    calibration = "minilm-ranges.json"           # optional int8/uint8 ranges (relative: to this file)
    dtype = "float32"                            # any other key: an EngineArgs field

Engine flags given on the command line apply to every model; a file's keys override them for its
model. A file cannot turn on ``trust_remote_code``: data never decides to run code, so that stays
the command line's ``--trust-remote-code``.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poolrag.engine_args import ENGINE_OPTIONS, EngineArgs
from poolrag.server.settings import ServerSettings, default_served_name

#: Server limits a model may set for itself (each defaults to the command line's).
MODEL_LIMITS = (
    "max_queue",
    "max_inputs",
    "max_request_tokens",
    "max_request_chars",
    "max_inflight_tokens",
    "max_answer_values",
)
_NAMES_KEY = "served_model_name"
_CALIBRATION_KEY = "calibration"


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One model to serve: its engine's options and its own server settings."""

    engine_args: EngineArgs
    settings: ServerSettings


def from_command_line(
    models: Sequence[str], names: Sequence[str] | None, base: EngineArgs, settings: ServerSettings
) -> list[ServedModel]:
    """``MODEL [MODEL ...]``: one model takes every ``--served-model-name`` as its aliases; several
    take one name each, in order."""
    if names and len(models) > 1 and len(names) != len(models):
        raise ValueError(f"--served-model-name: {len(models)} models need one name each, got {len(names)}")
    if not names:
        _check_defaults_differ(models)
    served = []
    for i, model in enumerate(models):
        if not names:
            aliases: tuple[str, ...] = (default_served_name(model),)
        else:
            aliases = tuple(names) if len(models) == 1 else (names[i],)
        served.append(
            ServedModel(base.replace(model=model), dataclasses.replace(settings, served_model_names=aliases))
        )
    return served


def _check_defaults_differ(models: Sequence[str]) -> None:
    """Refuse two models whose default names are one (``/srv/embed/model /srv/rerank/model``): the
    user gave no name, so "a name given to two models" would not say what to do."""
    first: dict[str, str] = {}
    for model in models:
        name = default_served_name(model)
        if name in first:
            why = " (a folder by its last path component)" if Path(model).expanduser().is_dir() else ""
            raise ValueError(
                f"{first[name]} and {model} are both served as {name!r} by default{why}; name each with "
                "--served-model-name, one name per model"
            )
        first[name] = model


def read_models_file(path: Path, base: EngineArgs, settings: ServerSettings) -> list[ServedModel]:
    """Every ``[[model]]`` of a TOML file, validated; a bad one raises ``ValueError`` naming the
    file, the model's place and the key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"models file {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"models file {path}: not valid TOML: {exc}") from None
    unknown_top = sorted(set(data) - {"model"})
    if unknown_top:
        raise ValueError(
            f"models file {path}: unknown key {unknown_top[0]!r}; list models as [[model]] tables"
        )
    tables = data.get("model")
    if not isinstance(tables, list) or not tables:
        raise ValueError(f"models file {path}: no [[model]] table")
    return [
        _entry(table, f"models file {path}: model {i + 1}", base, settings, path.parent)
        for i, table in enumerate(tables)
    ]


def _entry(
    table: Mapping[str, Any], where: str, base: EngineArgs, settings: ServerSettings, folder: Path
) -> ServedModel:
    options = dict(table)
    model = options.pop("model", None)
    if not isinstance(model, str) or not model:
        raise ValueError(f"{where}: 'model' must name a hub id or a model folder")
    names = options.pop(_NAMES_KEY, None)
    if names is None:
        names = [default_served_name(model)]
    elif isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"{where}: {_NAMES_KEY!r} must be a name or a list of names")
    limits = {key: options.pop(key) for key in MODEL_LIMITS if key in options}
    calibration = options.pop(_CALIBRATION_KEY, settings.calibration)
    if _CALIBRATION_KEY in table:
        if not isinstance(calibration, str) or not calibration:
            raise ValueError(f"{where}: {_CALIBRATION_KEY!r} must name a quantization ranges file")
        calibration = str(folder / Path(calibration).expanduser())
    unknown = sorted(set(options) - set(ENGINE_OPTIONS))
    if unknown:
        known = ", ".join(["model", _NAMES_KEY, _CALIBRATION_KEY, *MODEL_LIMITS, *ENGINE_OPTIONS])
        raise ValueError(f"{where}: unknown key {unknown[0]!r} (known: {known})")
    if options.get("trust_remote_code"):
        raise ValueError(f"{where}: trust_remote_code cannot be set in a file; pass --trust-remote-code")
    for key, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: {key} must be a whole number, not {value!r}")
    try:
        engine_args = base.replace(model=model, **options)
        model_settings = dataclasses.replace(
            settings, served_model_names=tuple(names), calibration=calibration, **limits
        )
    except (ValueError, TypeError) as exc:  # InvalidInputError is a ValueError
        raise ValueError(f"{where}: {' '.join(str(exc).split())}") from None
    return ServedModel(engine_args, model_settings)
