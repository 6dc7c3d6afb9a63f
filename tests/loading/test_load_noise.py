"""A model load through transformers prints no bar and no library build warning, and leaves the
user's own settings (a transformers tqdm hook, a logger's level) as they were."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from transformers.utils import logging as hf_logging

from poolrag import Engine
from poolrag.loading.load_noise import NOISY_LOGGERS
from poolrag.testing.tiny_models import build_colpali


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


def test_a_page_retriever_loads_silently_in_a_fresh_process(
    tmp_path: Path, minilm_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A page retriever's class is transformers' own, imported on its first load: that import (the
    modelling stack, torchao's where it is installed, as in the test extra) is inside the quiet load."""
    folder = build_colpali(tmp_path / "colpali", minilm_path)
    capfd.readouterr()
    env = os.environ | {"HF_HUB_OFFLINE": "1", "POOLRAG_CACHE_DIR": str(tmp_path / "cache")}
    load = f"from poolrag import Engine; Engine({str(folder)!r})"
    run = subprocess.run([sys.executable, "-c", load], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr == ""


def test_a_checkpoint_saved_without_berts_pooler_loads_without_a_missing_weights_report(
    tiny_model: Callable[..., Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """sentence-transformers checkpoints often lack BERT's pooler, which no embedding reads:
    transformers' AutoModel reports it missing ("LOAD REPORT ... pooler.dense.weight | MISSING"),
    and the background tune's load printed that on a user's first load. The backbone is loaded
    without that layer instead (it also ran on every batch for nothing)."""
    import shutil

    from transformers import AutoModel, BertModel

    folder = tmp_path / "no-pooler"
    shutil.copytree(tiny_model("bert"), folder)
    full = BertModel.from_pretrained(folder)
    BertModel(full.config, add_pooling_layer=False).save_pretrained(folder)  # no pooler weights
    with caplog.at_level(logging.WARNING, logger="transformers"):
        AutoModel.from_pretrained(folder)
        assert "LOAD REPORT" in caplog.text  # what transformers says of it
        caplog.clear()
        engine = Engine(folder, model_impl="transformers", tune="off")
        assert "LOAD REPORT" not in caplog.text
        Engine(tiny_model("bert"), model_impl="transformers", tune="off")  # one with its pooler
        assert "LOAD REPORT" not in caplog.text  # nor its weights reported unexpected
    assert engine.embed_array(["a bee"]).shape == (1, full.config.hidden_size)
