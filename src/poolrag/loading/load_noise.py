"""Keep third-party chatter off the user's terminal while poolrag loads a model.

Loading through transformers prints a ``Loading weights: 100%|...|`` bar on every load, and its
first import of the quantizers imports torchao where that is installed (the ``big-models``
extra), which logs a warning per CUDA kernel library a CPU build cannot open and torch logs one per
enum it registers. None of it is the user's business: the bar ends before anyone could read it and
the warnings name nothing the user can change. Around poolrag's own load calls only, those bars
are replaced by silent ones and those loggers raised to ERROR; both are put back afterwards (the
last of several overlapping loads, on any thread, puts them back), so the user's own transformers
calls keep their settings. transformers' own warnings about a checkpoint (missing or unexpected
weights) are kept: they can mean a wrong model.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

# loggers whose warnings at import or load are about the library's build, not the user's model
NOISY_LOGGERS = ("torchao", "torch.utils._pytree")

_lock = threading.Lock()
_depth = 0
_saved_levels: dict[str, int] = {}
_saved_hook: Any = None


def _silent_bar(factory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from transformers.utils.logging import EmptyTqdm

    return EmptyTqdm(*args, **kwargs)


def _enter() -> None:
    global _saved_hook
    from transformers.utils import logging as hf_logging

    for name in NOISY_LOGGERS:
        log = logging.getLogger(name)
        _saved_levels[name] = log.level
        log.setLevel(logging.ERROR)
    set_hook = getattr(hf_logging, "set_tqdm_hook", None)
    if set_hook is not None:
        _saved_hook = ("hook", set_hook(_silent_bar))
    elif hf_logging.is_progress_bar_enabled():  # transformers before the hook existed
        hf_logging.disable_progress_bar()
        _saved_hook = ("enabled", None)
    else:
        _saved_hook = None


def _leave() -> None:
    global _saved_hook
    from transformers.utils import logging as hf_logging

    for name, level in _saved_levels.items():
        logging.getLogger(name).setLevel(level)
    _saved_levels.clear()
    if _saved_hook is not None:
        kind, previous = _saved_hook
        if kind == "hook":
            hf_logging.set_tqdm_hook(previous)
        else:
            hf_logging.enable_progress_bar()
    _saved_hook = None


@contextlib.contextmanager
def quiet_load() -> Iterator[None]:
    """No third-party progress bar or build warning inside; everything as it was afterwards."""
    global _depth
    with _lock:
        if _depth == 0:
            _enter()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _leave()
