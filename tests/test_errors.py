"""poolrag's errors: one family callers catch, each naming its field, and each one survives pickling
(worker pools, Ray and LlamaIndex's ``num_workers`` send a worker's error back to the caller)."""

from __future__ import annotations

import multiprocessing
import pickle
from pathlib import Path

import pytest

from poolrag.client.errors import RemoteError, RemoteInputTooLongError, RemoteInvalidInputError
from poolrag.errors import InputTooLongError, InvalidInputError, PoolragError, UnsupportedTaskError
from poolrag.evaluation.beir import BeirFormatError
from poolrag.stores.errors import StoreUnavailableError

ERRORS = [
    InputTooLongError(600, 512),
    UnsupportedTaskError("embed", ("classify", "score")),
    RemoteInvalidInputError("/v1/embeddings: input is empty", 400),
    RemoteInputTooLongError("/v1/embeddings: input has 600 tokens", 400, "input"),
    RemoteError("/score failed with HTTP 503: busy", 503),
    StoreUnavailableError("Milvus at http://127.0.0.1:9 is unreachable", attempts=3),
    BeirFormatError(Path("qrels.tsv"), 3, "a score that is not a number"),
    InvalidInputError("truncate_prompt_tokens=1 leaves no room for text", param="truncate_prompt_tokens"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_every_error_round_trips_through_pickle(error: PoolragError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error) and copy.args == error.args
    assert copy.__dict__ == error.__dict__  # status codes, token counts, the field at fault


def test_scoring_on_a_classifier_of_several_labels_says_why_and_what_to_call() -> None:
    """A two-label 'reranker' (relevant / not): its refusal named the tasks, not the label count."""
    message = str(UnsupportedTaskError("score", ("classify",)))
    assert "scores pairs as a cross-encoder only with one label" in message
    assert "Engine.classify_pairs" in message
    assert "classify_pairs" not in str(UnsupportedTaskError("score", ("embed",)))


def _too_long(_: int) -> None:
    raise InputTooLongError(600, 512)


def test_a_worker_pools_caller_gets_the_workers_error() -> None:
    with multiprocessing.get_context("spawn").Pool(1) as pool, pytest.raises(InputTooLongError) as raised:
        pool.map_async(_too_long, [1]).get(timeout=60)
    assert (raised.value.num_tokens, raised.value.max_len) == (600, 512)
