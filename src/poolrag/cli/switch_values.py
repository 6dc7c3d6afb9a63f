"""TEI's spelling of ``--auto-truncate``: the switch with a value (``--auto-truncate false``,
``--auto-truncate=true``), as ``text-embeddings-router`` takes it, read as ``--no-auto-truncate`` /
``--auto-truncate``. Read as argparse reads a switch, the ``false`` was a MODEL argument
(``poolrag serve --auto-truncate false MODEL`` asked the hub for a model named ``false``, and
``MODEL --auto-truncate false`` stopped on an unknown ``false``) or ``=false`` a usage error, so a
command line carried over from TEI could not say "refuse over-long inputs"."""

from __future__ import annotations

from collections.abc import Sequence

#: the switches (dashed spelling; ``--a_b`` is read as ``--a-b``) that take TEI's ``true``/``false``
VALUED_SWITCHES = ("--auto-truncate",)
_VALUES = ("true", "false")


def _switch(arg: str) -> str:
    """``--auto_truncate=false`` -> ``--auto-truncate``; not a long flag: ``""``."""
    return "--" + arg[2:].split("=", 1)[0].replace("_", "-") if arg.startswith("--") else ""


def spell_switch_values(argv: Sequence[str]) -> list[str]:
    """``argv`` with each ``--switch true|false`` (or ``--switch=true|false``, any case) of a
    :data:`VALUED_SWITCHES` switch as ``--switch`` / ``--no-switch``; other arguments, any after
    ``--``, and a value that is not a boolean (left for argparse to refuse) are kept as given."""
    args = list(argv)
    stop = args.index("--") if "--" in args else len(args)
    spelled: list[str] = []
    i = 0
    while i < len(args):
        arg, i = args[i], i + 1
        name = _switch(arg) if i <= stop else ""
        if name not in VALUED_SWITCHES:
            spelled.append(arg)
            continue
        if "=" in arg:
            value = arg.split("=", 1)[1]
        elif i < stop and args[i].lower() in _VALUES:
            value, i = args[i], i + 1
        else:
            value = "true"  # the bare switch
        if value.lower() not in _VALUES:
            spelled.append(arg)
            continue
        spelled.append(name if value.lower() == "true" else "--no-" + name[2:])
    return spelled
