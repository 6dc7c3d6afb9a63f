"""Execute pooling requests: dedupe, batch by token budget, forward, pool.

This is the synchronous heart that every front door ends in; it holds a lock so that threads
sharing an engine never interleave forward passes on one model.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from poolrag.batching.token_budget import TokenBudgetBatcher
from poolrag.pooling.task_poolers import TaskPooler
from poolrag.request import PoolingRequest
from poolrag.runner.model_runner import ModelRunner

logger = logging.getLogger(__name__)


class ModelExecutor:
    def __init__(
        self, runner: ModelRunner, poolers: Mapping[str, TaskPooler], batcher: TokenBudgetBatcher
    ) -> None:
        self.runner = runner
        self.poolers = dict(poolers)
        self.batcher = batcher
        self._lock = threading.Lock()

    def execute(self, requests: Sequence[PoolingRequest]) -> list[np.ndarray]:
        """Results in input order; identical requests are computed once and share the result."""
        unique: dict[PoolingRequest, int] = {}
        slot = [unique.setdefault(req, len(unique)) for req in requests]
        distinct = list(unique)
        results: list[np.ndarray | None] = [None] * len(distinct)
        by_task: dict[str, list[int]] = defaultdict(list)
        for i, req in enumerate(distinct):
            by_task[req.params.task].append(i)
        with self._lock:
            for task, members in by_task.items():
                pooler = self.poolers[task]
                lengths = [distinct[i].num_tokens for i in members]
                for batch in self.batcher.plan(lengths):
                    batch_requests = [distinct[members[j]] for j in batch]
                    output = self.runner.forward(batch_requests)
                    for j, value in zip(batch, pooler(output, batch_requests), strict=True):
                        results[members[j]] = value
        return [results[s] for s in slot]  # type: ignore[misc]
