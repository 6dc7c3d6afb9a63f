"""``POST /pooling``: any pooling task's raw output (token embeddings, rewards, ...) as nested lists,
as base64 of its values in the asked precision, or as vLLM's binary answer (vLLM's
``encoding_format``); ``sparse_embed`` as ``{index, value}`` objects.

The JSON answer is :class:`~poolrag.server.schemas.PoolingResponse`'s, written by orjson straight from
the arrays (:mod:`poolrag.server.float_json`): a per-token answer holds millions of values, and as
Python floats validated by pydantic it took 85 bytes of memory a value (its JSON is 21)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from fastapi import APIRouter, Request, Response

from poolrag.config.registry import Role
from poolrag.outputs import SPARSE_ENTRY
from poolrag.params import PoolingParams
from poolrag.server.answer_size import check_answer_values
from poolrag.server.bytes_answer import BYTES_ANSWER_DOC, BYTES_FORMATS, bytes_answer
from poolrag.server.errors import APIError
from poolrag.server.float_json import FloatRows, JsonAnswer
from poolrag.server.inputs import chat_prompt, input_count, messages_named, to_prompts
from poolrag.server.openapi import ENGINE_ERRORS
from poolrag.server.routing import OffLoopRoute
from poolrag.server.schemas import PoolingRequest, PoolingResponse, SparseEntry
from poolrag.server.state import model_state, new_id, now
from poolrag.server.truncation_report import report_truncated
from poolrag.server.wire_dtypes import wire_base64

router = APIRouter(tags=["pooling"], route_class=OffLoopRoute)
PATH = "/pooling"


def sparse_entries(data: np.ndarray) -> list[SparseEntry]:
    """A sparse result's (token id, weight) records as the wire's ``{index, value}`` objects."""
    return [SparseEntry(**entry) for entry in _sparse_json(data)]


def _sparse_json(data: np.ndarray) -> list[dict[str, int | float]]:
    ids, weights = data["index"].tolist(), data["value"].tolist()
    return [{"index": i, "value": v} for i, v in zip(ids, weights, strict=True)]


def _wire(data: np.ndarray, body: PoolingRequest) -> object:
    """One input's ``data`` in JSON's types, floats as :class:`FloatRows`."""
    if data.dtype == SPARSE_ENTRY:
        return _sparse_json(data)
    if body.encoding_format == "base64":
        return wire_base64(data, body.embed_dtype, body.endianness)
    if data.ndim == 0 or data.dtype.kind != "f":  # a lone score; anything not floats as it is
        return data.tolist()
    return FloatRows(data)


#: vLLM's choice for a /pooling request naming no task (its ``ModelConfig.get_pooling_task``): the
#: first of these the model runs, so an embedding model answers its vector, a classifier its
#: probabilities (older vLLM releases answered per-token data first)
VLLM_DEFAULT_ORDER = ("embed", "classify", "token_embed", "token_classify")
#: heads vLLM pools for ``token_classify`` whatever else poolrag runs on them: a token classifier's,
#: and a ``*ForRewardModel``'s, whose vLLM pooler is the head on every token
PER_TOKEN_HEADS = (Role.TOKEN_HEAD, Role.REWARD_HEAD)


def default_pooling_task(
    supported: Sequence[str], primary: str, pooler_task: str | None = None, per_token_head: bool = False
) -> str:
    """The task of a request naming none, as current vLLM picks it: the pooler config's ``task``
    where it names one, else ``token_classify`` for a per-token head, else the first of
    :data:`VLLM_DEFAULT_ORDER` the model runs, else the model's primary task (``sparse_embed``,
    ``reward``)."""
    if pooler_task is not None:
        return pooler_task
    if per_token_head and "token_classify" in supported:
        return "token_classify"
    return next((task for task in VLLM_DEFAULT_ORDER if task in supported), primary)


@router.post(PATH, response_model=PoolingResponse, responses={**ENGINE_ERRORS, 200: BYTES_ANSWER_DOC})
async def pooling(body: PoolingRequest, request: Request, response: Response) -> JsonAnswer | Response:
    state = model_state(request, body.model)
    engine = state.engine
    if body.messages is None:
        prompts = to_prompts(body.input, state.settings)  # type: ignore[arg-type]
    else:
        prompts = chat_prompt(body, engine.facts)
    task = body.task or default_pooling_task(
        engine.facts.supported_tasks,
        engine.task,
        engine.pooler_task,
        per_token_head=engine.spec.role in PER_TOKEN_HEADS,
    )
    params = PoolingParams(
        dimensions=body.dimensions,
        normalize=body.normalize,
        use_activation=body.use_activation,
        truncate_prompt_tokens=body.cut_for(engine.facts),
        truncate=body.truncate,
        input_type=body.input_type,
        prompt=body.prompt,
        prompt_name=body.prompt_name,
        max_active_dims=body.max_active_dims,
    )
    params.verify(task, engine.facts)  # refused before the request takes a slot
    if task == "sparse_embed" and body.encoding_format != "float":
        raise APIError(
            400,
            f"encoding_format {body.encoding_format} carries arrays; "
            "sparse_embed answers {index, value} objects",
            param="encoding_format",
        )
    with messages_named(body):
        outputs = await state.run_engine(PATH, input_count(prompts), engine.aencode, prompts, task, params)
    values = sum(out.outputs.data.size for out in outputs)
    check_answer_values(values, state.limits)
    tokens = sum(out.num_tokens for out in outputs)
    report_truncated(response, outputs)  # the route puts the header on the bytes answer too
    answer_id = new_id("pool", body.request_id)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    if body.encoding_format in BYTES_FORMATS:
        arrays = [out.outputs.data for out in outputs]
        return bytes_answer(arrays, body, answer_id, state.settings.model_name, usage)
    data = [
        {"index": i, "object": "pooling", "data": _wire(out.outputs.data, body)}
        for i, out in enumerate(outputs)
    ]
    content = {
        "id": answer_id,
        "object": "list",
        "created": now(),
        "model": state.settings.model_name,
        "data": data,
        "usage": usage,
    }
    return JsonAnswer(content, values=values)
