"""vLLM's ``use_tqdm``: one "Processed prompts" bar over an ``LLM`` call, advanced as the engine
answers its requests (vLLM draws it by default, on stderr; ``use_tqdm`` may also be the tqdm class
to draw it with). The engine's batches are not changed to draw it: the executor reports how many
of a call's requests are answered (:mod:`poolrag.core.progress`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from poolrag.core.progress import reporting


class PromptsBar:
    """The bar of one ``LLM`` call over ``total`` prompts; nothing is drawn without ``use_tqdm``."""

    def __init__(self, use_tqdm: bool | Callable[..., Any], total: int) -> None:
        self._bar: Any = None
        self._start = 0  # prompts of the engine calls already made
        if use_tqdm and total:
            if callable(use_tqdm):
                make = use_tqdm
            else:
                from tqdm.auto import tqdm as make
            self._bar = make(total=total, desc="Processed prompts", dynamic_ncols=True)

    @contextmanager
    def covering(self, prompts: int) -> Iterator[None]:
        """An engine call over the next ``prompts`` prompts: the bar follows its requests (a long
        text cut into windows is several), and stands past them when it returns."""
        if self._bar is None:
            yield
            return
        start = self._start
        with reporting(lambda answered, total: self._move_to(start + prompts * answered // total)):
            yield
        self._start = start + prompts
        self._move_to(self._start)

    def _move_to(self, position: int) -> None:
        if position > self._bar.n:
            self._bar.update(position - self._bar.n)

    def __enter__(self) -> PromptsBar:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.close()
