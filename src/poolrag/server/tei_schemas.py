"""Request and answer bodies of Hugging Face Text Embeddings Inference's own API (``/embed``,
``/embed_all``, ``/embed_sparse``, ``/predict``, ``/rerank``, ``/similarity``, ``/tokenize``,
``/decode``, ``/info``), shaped as TEI publishes them, so its clients (``huggingface_hub``'s
``InferenceClient``, LlamaIndex's ``TextEmbeddingsInference``, LangChain's
``HuggingFaceEndpointEmbeddings``, Haystack's and Milvus' TEI functions) work unchanged.

TEI answers bare lists where OpenAI answers objects, and fails with ``{"error", "error_type"}``
(:mod:`poolrag.server.tei_errors`). A field it does not know is ignored, as TEI ignores it (its
request types deny no unknown field), and named once in the log; ``model`` is poolrag's addition,
naming one of several served models. ``/rerank`` and ``/tokenize`` speak TEI and another dialect
on one path: the bodies here tell the two apart by their fields (:class:`RerankBody`,
:class:`TokenizeBody`).
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    GetJsonSchemaHandler,
    PlainValidator,
    RootModel,
    StrictBool,
    StrictInt,
    StrictStr,
    Tag,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from poolrag.server.schemas import (
    PROMPT_NAME_MAX_CHARS,
    RerankRequest,
    SparseEntry,
    Text,
    TextOrTexts,
    TokenizeRequest,
    is_token_id_list,
    single_error,
)

#: TEI's spellings of a truncation side; poolrag keeps a long input's first tokens (Right) only.
TruncationDirection = Literal["Right", "right", "Left", "left"]
ErrorType = Literal["Unhealthy", "Backend", "Overloaded", "Validation", "Tokenizer", "Empty"]

logger = logging.getLogger(__name__)
_named_ignored: set[str] = set()
_NAMED_AT_MOST = 256
#: A name is the client's and may be megabytes long: only its start is logged and kept.
_NAME_SHOWN_CHARS = 64


def _shown(name: str) -> str:
    return name if len(name) <= _NAME_SHOWN_CHARS else name[:_NAME_SHOWN_CHARS] + "..."


_TRUNCATE = Field(
    None,
    description="An input over the model's length: true keeps its first tokens, false refuses it; "
    "omitted: the server's default (truncate, unless started with --no-auto-truncate), as TEI's "
    "--auto-truncate.",
)
_DIRECTION = Field("Right", description="Right keeps the first tokens; Left is refused (not supported).")
_PROMPT_NAME = Field(
    None,
    min_length=1,
    max_length=PROMPT_NAME_MAX_CHARS,
    description="One of the model folder's sentence-transformers prompts, put before each input.",
)


class TeiIgnoresUnknownFields(BaseModel):
    """A TEI body or part of one: a field TEI does not know is dropped, as TEI drops it (clients send
    their own options, such as langchain-community's ``parameters``), and logged the first time."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _name_ignored(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted({_shown(k) for k in data if isinstance(k, str) and k not in cls.model_fields})
            new = [k for k in unknown if f"{cls.__name__}.{k}" not in _named_ignored]
            if new and len(_named_ignored) < _NAMED_AT_MOST:  # names are the client's: bounded
                _named_ignored.update(f"{cls.__name__}.{k}" for k in new)
                logger.warning("ignoring fields TEI ignores (logged once): %s in %s", new, cls.__name__)
        return data


class TeiRequestBody(TeiIgnoresUnknownFields):
    """Every TEI request: unknown fields ignored; ``model`` picks one of several served models."""

    #: Errors answering this body are TEI's (read by :class:`~poolrag.server.tei_routing.TeiRoute`).
    speaks_tei: ClassVar[bool] = True
    #: The task whose model answers a request naming none (TEI's clients name none).
    default_task: ClassVar[str | None] = None

    model: StrictStr | None = Field(
        None,
        description="poolrag extension: one of the served model names (omitted: the first that runs "
        "this route's task, for /rerank the first cross-encoder; else the first).",
    )


class TeiTruncation(TeiRequestBody):
    truncate: StrictBool | None = _TRUNCATE
    truncation_direction: TruncationDirection = _DIRECTION


class EitherBody(RootModel[Any]):
    """A path's body in either of two shapes, told apart by its fields; ``root`` is the one it is."""

    @property
    def model(self) -> str | None:
        return self.root.model

    @property
    def default_task(self) -> str | None:
        return self.root.default_task

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """``anyOf``, not the ``oneOf`` pydantic writes for a callable discriminator: a body may fit
        several shapes (``{"inputs": "a"}`` is ``/embed``'s and ``/predict``'s), and the server takes
        it as the first its fields pick, where JSON Schema's ``oneOf`` says such a body is invalid."""
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        if "oneOf" in target:
            target["anyOf"] = target.pop("oneOf")
        return schema


# -- /embed, /embed_all, /embed_sparse ------------------------------------------------------------------
_TEI_INPUT_SHAPES = (
    "must be a string, a list of token ids, or a list whose items are strings or token-id lists"
)


def _tei_batch(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """TEI's ``inputs`` (its ``Input``: one ``String`` or ``Ids``, or a batch of them): a list of
    integers is one input's ids; another list a batch whose items are texts or token-id lists,
    mixed as the caller likes. Checked in one pass, not by the union, whose every branch would fail
    on every item of a long bad list and hold an error object for each."""
    if type(value) is not list or not value:
        return handler(value)
    if is_token_id_list(value) or all(type(item) is str or is_token_id_list(item) for item in value):
        return value
    raise PydanticCustomError("invalid_input_shape", _TEI_INPUT_SHAPES)


TeiInputs = Annotated[
    Text | list[StrictInt] | list[Text | list[StrictInt]],
    single_error(_TEI_INPUT_SHAPES),
    WrapValidator(_tei_batch),
    Field(description="A text, one token-id list, or a batch of texts and token-id lists, mixed (as TEI)."),
]


class TeiEmbedRequest(TeiTruncation):
    default_task: ClassVar[str | None] = "embed"
    inputs: TeiInputs
    normalize: StrictBool = Field(True, description="L2-normalise each vector (TEI's default: true).")
    dimensions: StrictInt | None = Field(
        None,
        ge=1,
        description="Cut each vector to its first n components (then normalised), any model's as TEI "
        "cuts; only a Matryoshka model was trained to keep its meaning there.",
    )
    prompt_name: str | None = _PROMPT_NAME
    encoding_format: Literal["float", "base64"] | None = Field(
        None,
        description="Sent by huggingface_hub's feature_extraction; TEI answers floats whatever it "
        "says, and so does this route (the client reads floats back).",
    )


class TeiEmbedAllRequest(TeiTruncation):
    default_task: ClassVar[str | None] = "token_embed"
    inputs: TeiInputs
    prompt_name: str | None = _PROMPT_NAME


class TeiEmbedSparseRequest(TeiTruncation):
    default_task: ClassVar[str | None] = "sparse_embed"
    inputs: TeiInputs
    prompt_name: str | None = _PROMPT_NAME


class TeiEmbedResponse(RootModel[list[list[float]]]):
    """One vector per input."""


class TeiEmbedAllResponse(RootModel[list[list[list[float]]]]):
    """One row per token (special tokens included) per input."""


class TeiEmbedSparseResponse(RootModel[list[list[SparseEntry]]]):
    """One list of non-zero ``{index, value}`` weights per input, sorted by token id."""


# -- /similarity ----------------------------------------------------------------------------------------
class TeiSimilarityInput(TeiIgnoresUnknownFields):
    source_sentence: Text
    sentences: list[Text] = Field(description="Compared with source_sentence, one score each.")


class TeiSimilarityParameters(TeiIgnoresUnknownFields):
    truncate: StrictBool | None = _TRUNCATE
    truncation_direction: TruncationDirection = _DIRECTION
    prompt_name: str | None = _PROMPT_NAME


class TeiSimilarityRequest(TeiRequestBody):
    default_task: ClassVar[str | None] = "embed"
    inputs: TeiSimilarityInput
    parameters: TeiSimilarityParameters | None = None


class TeiSimilarityResponse(RootModel[list[float]]):
    """The cosine of each sentence's vector with the source sentence's."""


# -- /predict -------------------------------------------------------------------------------------------
_PREDICT_SHAPES = (
    "must be a string, a pair of strings [string, string] or a batch of single strings and pairs "
    "[[string], [string, string], ...]"
)


def _sequence(value: Any) -> tuple[str] | tuple[str, str]:
    if type(value) is not list or not 1 <= len(value) <= 2 or any(type(t) is not str for t in value):
        raise PydanticCustomError("invalid_input_shape", _PREDICT_SHAPES)
    return tuple(value)  # type: ignore[return-value]


def _predict_inputs(value: Any) -> str | tuple[str] | tuple[str, str] | list[tuple[str] | tuple[str, str]]:
    """TEI's three forms, told apart by the first item as TEI does: a string, one sequence given as
    a list of one or two strings, or a batch of such lists (checked in one pass)."""
    if type(value) is str:
        return value
    if type(value) is not list or not value:
        raise PydanticCustomError("invalid_input_shape", _PREDICT_SHAPES)
    if type(value[0]) is str:
        return _sequence(value)
    return [_sequence(item) for item in value]


_STRINGS = {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}
PredictInputs = Annotated[
    Any,
    PlainValidator(_predict_inputs),
    WithJsonSchema(
        {
            "oneOf": [{"type": "string"}, _STRINGS, {"type": "array", "items": _STRINGS, "minItems": 1}],
            "description": "A text, a pair of texts, or a batch of texts and pairs (each as a list).",
        }
    ),
]


class TeiClassificationParameters(TeiIgnoresUnknownFields):
    """``huggingface_hub``'s ``text_classification`` options (TEI ignores them; honoured here)."""

    function_to_apply: Literal["sigmoid", "softmax", "none"] | None = Field(
        None, description="Applied to the raw logits instead of the model's own activation."
    )
    top_k: StrictInt | None = Field(None, ge=1, description="Only the k best labels.")


class TeiPredictRequest(TeiTruncation):
    default_task: ClassVar[str | None] = "classify"
    inputs: PredictInputs
    raw_scores: StrictBool = Field(False, description="The logits, without the model's activation.")
    parameters: TeiClassificationParameters | None = None


class TeiPrediction(BaseModel):
    score: float
    label: str


class TeiPredictResponse(RootModel[list[TeiPrediction] | list[list[TeiPrediction]]]):
    """Each input's labels, best first: a list for one input, a list of lists for a batch."""


# -- /rerank --------------------------------------------------------------------------------------------
class TeiRerankRequest(TeiTruncation):
    default_task: ClassVar[str | None] = "score"
    query: Text
    texts: list[Text] = Field(description="The texts to rank for the query.")
    raw_scores: StrictBool = Field(False, description="Cross-encoders: the logit instead of its sigmoid.")
    return_text: StrictBool = Field(False, description="Each result carries its text.")


class TeiRank(BaseModel):
    index: int
    text: str | None = None
    score: float


class TeiRerankResponse(RootModel[list[TeiRank]]):
    """Every text's rank, best first."""


def _tei_rerank(data: Any) -> bool:
    """TEI's body names ``texts``; Jina's and Cohere's ``documents``."""
    return isinstance(data, dict) and "texts" in data and "documents" not in data


class RerankBody(EitherBody):
    """``/rerank``'s body in either dialect: Jina/Cohere (``documents``) or TEI (``texts``)."""

    root: Annotated[
        Annotated[RerankRequest, Tag("Jina")] | Annotated[TeiRerankRequest, Tag("TEI")],
        Discriminator(lambda data: "TEI" if _tei_rerank(data) else "Jina"),
    ]
    dialect_speaks_tei = staticmethod(_tei_rerank)


# -- /tokenize, /decode ---------------------------------------------------------------------------------
class TeiTokenizeRequest(TeiRequestBody):
    inputs: TextOrTexts
    add_special_tokens: StrictBool = True
    prompt_name: str | None = _PROMPT_NAME


class TeiToken(BaseModel):
    id: int
    text: str = Field(description="The input's bytes start..stop, or a special token's own string.")
    special: bool
    start: int | None = Field(description="UTF-8 byte offset in the input (null for special tokens).")
    stop: int | None


class TeiTokenizeResponse(RootModel[list[list[TeiToken]]]):
    """One list of tokens per input."""


def _tei_tokenize(data: Any) -> bool:
    """TEI's body names ``inputs``; vLLM's ``prompt``."""
    return isinstance(data, dict) and "inputs" in data and "prompt" not in data


class TokenizeBody(EitherBody):
    """``/tokenize``'s body in either dialect: vLLM (``prompt``) or TEI (``inputs``)."""

    root: Annotated[
        Annotated[TokenizeRequest, Tag("VLLM")] | Annotated[TeiTokenizeRequest, Tag("TEI")],
        Discriminator(lambda data: "TEI" if _tei_tokenize(data) else "VLLM"),
    ]
    dialect_speaks_tei = staticmethod(_tei_tokenize)


TokenIds = list[Annotated[StrictInt, Field(ge=0)]]


class TeiDecodeRequest(TeiRequestBody):
    ids: TokenIds | list[TokenIds] = Field(description="One token-id list, or several.")
    skip_special_tokens: StrictBool = True


class TeiDecodeResponse(RootModel[list[str]]):
    """One text per token-id list."""


# -- /info ----------------------------------------------------------------------------------------------
class TeiEmbeddingModel(BaseModel):
    pooling: str = Field(description="cls, mean, last_token, splade")


class TeiClassifierModel(BaseModel):
    id2label: dict[str, str]
    label2id: dict[str, int]


class TeiEmbeddingType(BaseModel):
    embedding: TeiEmbeddingModel


class TeiClassifierType(BaseModel):
    classifier: TeiClassifierModel


class TeiRerankerType(BaseModel):
    reranker: TeiClassifierModel


class TeiInfo(BaseModel):
    model_id: str
    model_sha: str | None = None
    model_dtype: str
    served_model_name: str
    model_type: TeiEmbeddingType | TeiClassifierType | TeiRerankerType
    max_concurrent_requests: int
    max_input_length: int
    max_batch_tokens: int
    max_batch_requests: int | None = None
    max_client_batch_size: int
    auto_truncate: bool
    tokenization_workers: int
    version: str
    sha: str | None = None
    docker_label: str | None = None


# -- errors ---------------------------------------------------------------------------------------------
class TeiErrorResponse(BaseModel):
    error: str
    error_type: ErrorType


# -- POST / ---------------------------------------------------------------------------------------------
def embed_dialect(data: Any) -> str:
    """``POST /`` on an embedding model. ``InferenceClient.sentence_similarity`` sends ``inputs`` as
    an object; ``text_classification`` one text with its ``parameters`` (``function_to_apply``,
    ``top_k``; ``{}`` when none is set); an embedding, a text or a list, the list perhaps with
    ``parameters`` TEI ignores (what langchain-community's ``HuggingFaceHubEmbeddings`` sends)."""
    if not isinstance(data, dict):
        return "Embed"
    inputs, parameters = data.get("inputs"), data.get("parameters")
    if isinstance(inputs, dict):
        return "Similarity"
    return "Predict" if _text_classification(inputs, parameters) else "Embed"


def _text_classification(inputs: Any, parameters: Any) -> bool:
    """Whether ``inputs`` and ``parameters`` are ``text_classification``'s: one text, and its
    options (``{}`` when none is set)."""
    return (
        isinstance(inputs, str)
        and isinstance(parameters, dict)
        and parameters.keys() <= TeiClassificationParameters.model_fields.keys()
    )


class TeiEmbedOnCrossEncoder(TeiRequestBody):
    """``/embed``'s body sent to a cross-encoder's ``/``: refused, as TEI's reranker refuses it
    (its ``/`` reranks only), rather than read as a ``/predict`` whose labels the client cannot
    parse (``InferenceClient.feature_extraction`` failed with a ``TypeError``, or two texts were
    scored as a pair)."""

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, data: Any) -> Any:
        raise ValueError(
            "this model is a cross-encoder and gives no embeddings: POST / takes /rerank's body "
            "(query, texts) or text_classification's (inputs, parameters); POST /predict classifies "
            "any inputs"
        )


def reranker_dialect(data: Any) -> str:
    """``POST /`` on a cross-encoder. ``texts`` rerank. ``inputs`` predict where only a
    classification sends them: one text with ``text_classification``'s ``parameters``,
    ``raw_scores``, or a batch of pairs; a bare text or list of texts is ``feature_extraction``'s
    body (``/embed``'s), refused."""
    if not isinstance(data, dict) or "texts" in data or "inputs" not in data:
        return "Rerank"
    inputs = data["inputs"]
    if (
        _text_classification(inputs, data.get("parameters"))
        or "raw_scores" in data
        or (isinstance(inputs, list) and any(isinstance(item, list) for item in inputs))
    ):
        return "Predict"
    return "EmbedOnCrossEncoder"


class UnservedTeiBody(RootModel[Any]):
    """A TEI body sent to a model of no TEI kind (ColBERT, a token classifier): refused by the
    route, whatever it holds, naming the tasks the model runs instead."""

    default_task: ClassVar[str | None] = None

    @property
    def model(self) -> str | None:
        name = self.root.get("model") if isinstance(self.root, dict) else None
        return name if isinstance(name, str) else None


#: Every body ``POST /`` takes, by the tag :func:`root_body`'s discriminator gives it.
ROOT_BODIES: dict[str, type[BaseModel]] = {
    "Embed": TeiEmbedRequest,
    "Similarity": TeiSimilarityRequest,
    "Predict": TeiPredictRequest,
    "Rerank": TeiRerankRequest,
    "EmbedOnCrossEncoder": TeiEmbedOnCrossEncoder,
    "Sparse": TeiEmbedSparseRequest,
    "Unserved": UnservedTeiBody,
}


class TeiRootBody(EitherBody):
    """The base of each app's ``POST /`` body: ``root`` is the TEI request of the route it takes."""

    speaks_tei: ClassVar[bool] = True  # read from the class by the router (tei_routing)


def root_body(tags: Sequence[str], tag_of: Callable[[Any], str]) -> type[TeiRootBody]:
    """``POST /``'s body class for one app: the bodies of :data:`ROOT_BODIES` that ``tags`` name
    (those its models' kinds take), each body taken as the one ``tag_of`` picks by its fields and
    the model it names, so a request naming a served model gets the route of that model's kind."""
    taken = list(dict.fromkeys(tags))
    root: Any = ROOT_BODIES[taken[0]]
    if len(taken) > 1:  # pydantic's discriminator is for a union only
        members = [Annotated[ROOT_BODIES[tag], Tag(tag)] for tag in taken]
        root = Annotated[functools.reduce(operator.or_, members), Discriminator(tag_of)]
    return type(
        "TeiRootBody",
        (TeiRootBody,),
        {"__annotations__": {"root": root}, "__module__": __name__},
    )
