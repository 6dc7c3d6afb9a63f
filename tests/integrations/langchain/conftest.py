"""LangChain's standard test suites have ``async def`` tests without an asyncio mark; run them
(and ours) on pytest-asyncio, which ``langchain-tests`` installs, without changing the asyncio mode
of the rest of the repository."""

from __future__ import annotations

import inspect
from collections.abc import Generator
from typing import Any

import pytest


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: object) -> Generator[None, Any, None]:
    # Innermost wrapper: marks coroutine tests before pytest-asyncio turns marked ones into its items.
    outcome = yield
    result = outcome.get_result()
    for item in result if isinstance(result, list) else [result]:
        if isinstance(item, pytest.Function) and inspect.iscoroutinefunction(item.obj):
            item.add_marker(pytest.mark.asyncio)
