"""A model load through transformers prints no bar and no library build warning, and leaves the
user's own settings (a transformers tqdm hook, a logger's level) as they were."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from transformers.utils import logging as hf_logging

from poolrag import Engine
from poolrag.loading.load_noise import NOISY_LOGGERS


def test_a_load_is_silent_and_puts_the_users_settings_back(
    tiny_model: Callable[..., Path], capfd: pytest.CaptureFixture[str]
) -> None:
    folder = tiny_model("bert")  # built (and its own bars drawn) before the load under test
    capfd.readouterr()
    bars: list[str] = []

    def users_hook(factory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        bars.append(str(kwargs.get("desc")))
        return factory(*args, **kwargs)

    before = hf_logging.set_tqdm_hook(users_hook)
    levels = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    try:
        Engine(folder, model_impl="transformers", tune="off")
        err = capfd.readouterr().err
        assert "Loading weights" not in err and "%|" not in err
        assert bars == []  # the bar was replaced inside poolrag's load, not drawn through the user's hook
        assert hf_logging.set_tqdm_hook(before) is users_hook  # the user's hook is back
        assert all(logging.getLogger(name).level == logging.INFO for name in NOISY_LOGGERS)
    finally:
        hf_logging.set_tqdm_hook(before)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
