"""Every command-line test: ``main`` sets up logging on stderr, which pytest swaps per test."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _drop_cli_log_handlers() -> Iterator[None]:
    """Drop the handlers a ``main`` call added to the root logger, so the next test's stderr gets
    its own and none writes to a stream pytest already closed."""
    before = list(logging.root.handlers)
    yield
    for handler in [h for h in logging.root.handlers if h not in before]:
        logging.root.removeHandler(handler)
