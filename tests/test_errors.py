"""poolrag's errors: one family callers catch, each naming its field, and each one survives pickling
(worker pools, Ray and LlamaIndex's ``num_workers`` send a worker's error back to the caller)."""

from __future__ import annotations

import multiprocessing
import pickle
from pathlib import Path

import pytest

from poolrag.client.errors import RemoteError, RemoteInputTooLongError, RemoteInvalidInputError
from poolrag.errors import (
    InputTooLongError,
    InvalidImageError,
    InvalidInputError,
    InvalidTextError,
    PoolragError,
    UnsupportedTaskError,
    at_position,
)
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


@pytest.mark.parametrize(
    ("error", "named"),
    [
        (InvalidImageError("input[1]", "not a readable image"), "input[7]: not a readable image"),
        (InvalidTextError("text_2", 1, "is empty"), "text_2[7] is empty"),
        (InputTooLongError(600, 512, "input", 1), "input[7] has 600 tokens"),
        (RemoteInvalidInputError("/v1/embeddings: input[1]: token ids must be in [0, 9)", 400), "input[7]"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_error_from_a_part_of_the_callers_list_names_the_callers_index(
    error: PoolragError, named: str
) -> None:
    """A cache sends only its misses, a client one request of several: the caller's list is the one
    the message must point into."""
    moved = at_position(error, [4, 7, 9])
    assert type(moved) is type(error) and named in str(moved) and "[1]" not in str(moved)
    assert getattr(moved, "index", 7) == 7 and getattr(moved, "name", "input[7]") == "input[7]"
    assert pickle.loads(pickle.dumps(moved)).args == moved.args


def test_an_error_naming_no_input_is_left_as_it_is() -> None:
    error = InvalidInputError("text_1 and text_2 must both be non-empty")
    assert at_position(error, [4, 7]) is error
