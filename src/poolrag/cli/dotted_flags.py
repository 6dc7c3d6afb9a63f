"""vLLM's dotted spelling of a JSON-object flag: ``--pooler-config.task token_embed`` is
``--pooler-config '{"task": "token_embed"}'``, as ``vllm serve`` takes it, so a deployment's
command line carries over whichever spelling it uses."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

#: the flags whose value is a JSON object (dashed spelling; vLLM's ``--a_b`` is read as ``--a-b``)
JSON_OBJECT_FLAGS = ("--pooler-config", "--hf-overrides")


def _flag_name(arg: str) -> str:
    """``--pooler_config.task=x`` -> ``--pooler-config``: the name before a dot or ``=``, dashed."""
    return "--" + arg[2:].split("=", 1)[0].split(".", 1)[0].replace("_", "-")


def _value(text: str) -> Any:
    """A dotted flag's value: JSON where it parses (``true``, ``3``, ``[1, 2]``), a boolean however
    it is capitalised (``False``, as a Python user writes it), else the text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def expand_dotted_flags(argv: Sequence[str], error: Callable[[str], NoReturn]) -> list[str]:
    """``argv`` with each ``--flag.key value`` (or ``--flag.key=value``; keys nest, ``--flag.a.b``)
    of a :data:`JSON_OBJECT_FLAGS` flag joined into one ``--flag JSON``, merged over the line's own
    ``--flag JSON`` where it gives one (a dotted key wins). ``error`` reports a dotted flag with no
    value, as argparse reports a usage mistake."""
    args = list(argv)
    stop = args.index("--") if "--" in args else len(args)
    dotted: dict[str, dict[str, Any]] = {}
    kept: list[str | None] = []  # None: where a flag's first dotted key stood
    slot: dict[str, int] = {}
    i = 0
    while i < stop:
        arg = args[i]
        key = arg.split("=", 1)[0]
        name = _flag_name(arg) if arg.startswith("--") else ""
        i += 1
        if name not in JSON_OBJECT_FLAGS or "." not in key:
            kept.append(arg)
            continue
        if "=" in arg:
            text = arg.split("=", 1)[1]
        elif i < stop:
            text, i = args[i], i + 1
        else:
            error(f"argument {key}: expected one argument")
        *parents, leaf = key.split(".")[1:]
        if not leaf or not all(parents):
            error(f"argument {key}: a dotted flag names a key after each dot")
        if name not in slot:
            slot[name] = len(kept)
            kept.append(None)
        node = dotted.setdefault(name, {})
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[leaf] = _value(text)
    alone = {slot[name]: name for name in dotted if not _merged_into_own(kept, name, dotted[name])}
    out: list[str] = []
    for at, arg in enumerate(kept):
        if arg is not None:
            out.append(arg)
        elif at in alone:
            out += [alone[at], json.dumps(dotted[alone[at]])]
    return out + args[stop:]


def _merged_into_own(args: list[str | None], name: str, values: dict[str, Any]) -> bool:
    """Merge ``values`` into the line's own ``name JSON`` (in place) where it gives one as a JSON
    object; ``False`` where it gives none or a malformed one (left for the parser to refuse)."""
    for i, arg in enumerate(args):
        if arg is None or not arg.startswith("--") or _flag_name(arg) != name:
            continue
        inline = "=" in arg
        text = arg.split("=", 1)[1] if inline else args[i + 1] if i + 1 < len(args) else None
        try:
            given = json.loads(text) if isinstance(text, str) else None
        except json.JSONDecodeError:
            return False
        if not isinstance(given, dict):
            return False
        merged = json.dumps(_deep_merge(given, values))
        if inline:
            args[i] = f"{name}={merged}"
        else:
            args[i + 1] = merged
        return True
    return False


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        old = merged.get(key)
        merged[key] = _deep_merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return merged
