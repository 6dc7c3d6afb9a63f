"""``poolrag serve --config FILE``: the serve flags from a YAML file, as ``vllm serve --config`` reads them.

A deployment kept as vLLM's YAML (``port: 8000``, ``served-model-name: [a, b]``, ``pooler-config:
{pooling_type: MEAN}``) starts unchanged. Each key is a flag's long name (with ``-`` or ``_``) or
``model``; its value is what the flag takes: ``true`` gives a switch, ``false`` leaves it off (or
gives its ``--no-`` form), a list gives several values, a mapping its JSON. The file's values become
the flags' defaults, so the command line wins, as vLLM's order is (command line, file, defaults):
``poolrag serve MODEL --config FILE`` serves MODEL whatever the file's ``model`` says. The file is
read as data (YAML's safe loader); a key that is no ``serve`` flag stops the start naming it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The file key that names the MODEL argument (every other key is an option's long name)
MODEL_KEY = "model"
#: The largest file read: a config is some lines of options (vLLM's longest JSON options included)
MAX_CONFIG_BYTES = 1 << 20


def with_config_file(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, args: argparse.Namespace
) -> argparse.Namespace:
    """``args`` parsed again with the ``--config`` file's values as the command's defaults (``args``
    itself where no file was given)."""
    path = getattr(args, "config", None)
    if path is None:
        return args
    command = subcommand_parser(parser, args.command)
    say = command.error  # every refusal, the file's and a flag's of a value in it, names the file
    command.error = lambda message: say(f"--config {path}: {message}")  # type: ignore[method-assign]
    try:
        tokens, model = _tokens(_read(path, command), command)
        given = command.parse_args([*([model] if model is not None else []), *tokens])
    finally:
        del command.error  # the class's again
    defaults = {dest: value for dest, value in vars(given).items() if value != command.get_default(dest)}
    command.set_defaults(**defaults)
    return parser.parse_args(argv)


def subcommand_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of ``parser``'s subcommand ``name`` (``LookupError`` where it has none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    raise LookupError(name)


def _read(path: Path, command: argparse.ArgumentParser) -> dict[str, Any]:
    import yaml

    class NoAliases(yaml.SafeLoader):
        """YAML's safe loader without aliases (``*name``): nested ones multiply a short file into
        billions of values (a 275-byte file took 817 MB as option values), and no option needs one."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.events.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, "aliases (*name) are not read here", mark)
            return super().compose_node(parent, index)

    try:
        with path.open("rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            command.error(f"larger than {MAX_CONFIG_BYTES:,} bytes, not a config file")
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        command.error(f"cannot read it ({getattr(exc, 'strerror', None) or exc})")
    try:
        loaded = yaml.load(text, Loader=NoAliases)  # a SafeLoader: tags construct nothing
    except yaml.YAMLError as exc:
        command.error(f"not YAML ({' '.join(str(exc).split())})")
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        command.error(f"a mapping of option names to values, not a {type(loaded).__name__}")
    return loaded


def _tokens(values: dict[str, Any], command: argparse.ArgumentParser) -> tuple[list[str], str | None]:
    """The file as command-line tokens, and its ``model``."""
    actions = command._option_string_actions
    tokens: list[str] = []
    model = None
    for key, value in values.items():
        name = str(key).replace("_", "-")
        if name == MODEL_KEY:
            model = None if value is None else str(value)
            continue
        option = f"--{name}"
        if option not in actions or name == "config":
            command.error(f"{key!r} is not a poolrag serve option")
        if value is None:
            continue
        if actions[option].nargs == 0:  # a switch
            if not isinstance(value, bool):
                command.error(f"{key!r} is a switch: give true or false, not {value!r}")
            if value:
                tokens.append(option)
            elif f"--no-{name}" in actions:
                tokens.append(f"--no-{name}")
            continue
        items = value if isinstance(value, list) else [value]
        tokens += [option, *(_token(item) for item in items)]
    return tokens, model


def _token(value: Any) -> str:
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
