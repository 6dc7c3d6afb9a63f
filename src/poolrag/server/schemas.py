"""Request and response bodies, shaped like OpenAI's and vLLM's pooling APIs.

The pydantic models are the single source of both validation and ``/openapi.json``, so the
published schema is exactly what the server accepts. A field the server does not know is a 400
naming it, never ignored: a vLLM client sending a field poolrag cannot honour (``padding``,
``mm_processor_kwargs``, a non-zero ``priority``, ...) must learn that its request was not served
as written, not get a 200 computed without it.
"""

from __future__ import annotations

import binascii
import math
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    RootModel,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from poolrag.image_inputs import as_data_url, base64_bytes, is_image_input
from poolrag.model_facts import ModelFacts, ScoreKind
from poolrag.retrieval.fusion import SecondStage
from poolrag.server.chat_messages import ChatMessage, InputImagePart, TextPart, is_conversation
from poolrag.text_validity import lone_surrogate
from poolrag.vllm_inputs import content_part
from poolrag.vllm_options import refuse_longer_cut

#: A text field: whether a model can read it (empty, lone surrogates) is the engine's input stage's
#: one check (:mod:`poolrag.tokenization.input_processor`), not the schema's.
Text = StrictStr
#: Errors whose own message says more than a union's summary, so :func:`single_error` keeps them.
_OWN_MESSAGE_ERRORS = ("unechoable_document",)


def single_error(message: str) -> WrapValidator:
    """Replace a union's one-error-per-branch report with one readable message."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            own = next((e for e in exc.errors() if e["type"] in _OWN_MESSAGE_ERRORS), None)
            if own is not None:
                raise PydanticCustomError(own["type"], own["msg"]) from exc
            raise PydanticCustomError("invalid_input_shape", message) from exc

    return WrapValidator(validate)


def is_token_id_list(value: object) -> bool:
    return type(value) is list and all(type(t) is int for t in value)  # bool is not a token id


def _homogeneous_lists(message: str, token_ids: bool) -> WrapValidator:
    """Decide a list's form from its first item and check the rest in one pass.

    Without it, pydantic's union tries every branch on every item: a list of a million token ids
    first fails ``list[str]`` a million times, and those error objects took ~250 bytes per id
    (~120x the request body) and seconds of CPU.
    """

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if type(value) is not list or not value:
            return handler(value)
        first = type(value[0])
        if first is str:
            if all(type(t) is str for t in value):
                return value
        elif token_ids and first is int:
            if is_token_id_list(value):
                return value
        elif token_ids and first is list:
            if all(is_token_id_list(ids) for ids in value):
                return value
        else:
            return handler(value)
        raise PydanticCustomError("invalid_input_shape", message)

    return WrapValidator(validate)


_POOLING_SHAPES = "must be a string, a list of strings, a list of token ids or a list of token-id lists"
#: An instruction prompt is a sentence; the bound keeps one request from copying megabytes into each input.
PROMPT_MAX_CHARS = 2048
PROMPT_NAME_MAX_CHARS = 256  # a key of the folder's prompts
TokenIds = list[StrictInt]
PoolingInput = Annotated[
    Text | list[Text] | TokenIds | list[TokenIds],
    single_error(_POOLING_SHAPES),
    _homogeneous_lists(_POOLING_SHAPES, token_ids=True),
    Field(description="Text, texts, one token-id list, or several token-id lists."),
]
TextOrTexts = Annotated[
    Text | list[Text],
    single_error("must be a string or a list of strings"),
    _homogeneous_lists("must be a string or a list of strings", token_ids=False),
]
TruncatePromptTokens = Annotated[
    StrictInt | None,
    Field(
        ge=-1,
        description="Keep at most this many tokens per input (-1: the model's maximum). Without it, "
        "'truncate' (or the server's default) decides.",
    ),
]
InputType = Literal["query", "document"]
#: ``/v1/embeddings``' and ``/pooling``'s choice of prompt, as sentence-transformers' ``encode`` takes it
Prompt = Annotated[
    str | None,
    Field(
        max_length=PROMPT_MAX_CHARS,
        description="Text put before each text input instead of the model's prompts, as "
        "sentence-transformers' prompt= (poolrag extension).",
    ),
]
PromptName = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=PROMPT_NAME_MAX_CHARS,
        description="One of the model folder's prompts by name, as sentence-transformers' prompt_name= "
        "(poolrag extension; GET /v1/models lists them as prompt_names).",
    ),
]
AddSpecialTokens = Annotated[
    Literal[True], Field(description="Texts get the tokenizer's special tokens (false is not supported).")
]


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: The task whose model answers a request naming none (``ServedModels.for_task``).
    default_task: ClassVar[str | None] = None

    model: StrictStr | None = Field(
        None,
        description="One of the served model names; optional (omitted or empty: the first that runs "
        "this route's task, for scores the first cross-encoder; else the first).",
    )


#: vLLM's and Cohere's ``priority``: 0 or null only, as every request is served in arrival order.
Priority = Annotated[
    Literal[0] | None,
    Field(description="Only 0 (or null): requests are served in arrival order (no priority scheduling)."),
]


class VllmRequestBody(RequestBody):
    """The fields vLLM takes on every pooling endpoint, each honoured or refused by its type."""

    user: StrictStr | None = Field(None, description="The caller's end-user id (not used to compute).")
    truncate_prompt_tokens: TruncatePromptTokens = None
    truncate: StrictBool | None = Field(
        None,
        description="An input over the model's length: true keeps its first tokens, false refuses it "
        "(400 context_length_exceeded); omitted: the server's default (truncate, unless started with "
        "--no-auto-truncate). The answer's X-Truncated-Inputs header counts the inputs cut.",
    )
    truncation_side: Literal["right"] | None = Field(
        None, description="Truncation keeps the first tokens ('left' is not supported)."
    )
    request_id: StrictStr | None = Field(
        None, min_length=1, max_length=256, description="Returned as the answer's id."
    )
    priority: Priority = 0
    # vLLM's request models declare these with null defaults, and a client posting a whole dumped
    # request sends the nulls: taken as what they mean (no padding, no processor options)
    padding: Literal["do_not_pad", False] | None = Field(
        None, description="Inputs are never padded (packed rows): null, false or 'do_not_pad' only."
    )
    mm_processor_kwargs: None = Field(None, description="null only: no processor options are taken.")
    cache_salt: StrictStr | None = Field(
        None,
        min_length=1,
        max_length=1024,
        description="Accepted: poolrag keeps no prefix cache shared between requests, so there is "
        "nothing to salt.",
    )

    def cut_for(self, facts: ModelFacts) -> int | None:
        """``truncate_prompt_tokens`` for the model ``facts`` describe, refused (400) where vLLM
        refuses it: over the model's length."""
        refuse_longer_cut(self.truncate_prompt_tokens, facts.max_model_len)
        return self.truncate_prompt_tokens


# -- errors ------------------------------------------------------------------------------------------
class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorInfo
    detail: str = Field(description="error.message again, where Jina's API answers it.")
    message: str = Field(description="error.message again, where Cohere's API answers it.")


class Usage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class _ListResponse(BaseModel):
    """vLLM's answer of one item per input; each route's answer names its items' type."""

    id: str
    object: Literal["list"] = "list"
    created: int
    model: str
    data: list[Any]
    usage: Usage


# -- /v1/embeddings ---------------------------------------------------------------------------------
EmbedDType = Literal["float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2"]
Endianness = Annotated[
    Literal["native", "little", "big"],
    Field(description="Byte order of base64 and bytes values (native: little)."),
]


class ChatFormBody(VllmRequestBody):
    """A body taking vLLM's chat form, ``messages``, instead of ``input`` (``/v1/embeddings``,
    ``/pooling``): to a model that reads images their one text or image part is the one input."""

    # required, as OpenAI publishes it; vLLM's chat form sends messages instead (None here then)
    input: Annotated[PoolingInput | None, WithJsonSchema(TypeAdapter(PoolingInput).json_schema())]
    messages: list[ChatMessage] | None = Field(
        None,
        min_length=1,
        description="vLLM's chat form, instead of input: the messages' one text or image_url part "
        "(a model that reads images; poolrag applies no chat template).",
    )

    #: the field the conversation came in: ``messages``, or ``input`` (vLLM's embeddings take one there too)
    _chat_field: str = PrivateAttr(default="messages")

    @property
    def chat_field(self) -> str:
        return self._chat_field

    @model_validator(mode="before")
    @classmethod
    def _messages_stand_for_input(cls, data: Any) -> Any:
        if isinstance(data, dict) and "messages" in data and "input" not in data:
            return {**data, "input": None}
        return data

    @model_validator(mode="after")
    def _input_or_messages(self) -> Self:
        if (self.input is None) == (self.messages is None):
            raise ValueError("send input or messages (one of the two)")
        if self.messages is not None:
            self.message_part()  # a request the model cannot read is refused before it queues
        return self

    def message_part(self) -> tuple[str, str]:
        """Where in ``messages`` their one text or image is, and it (an image as its data URL).

        A dual encoder (CLIP, SigLIP) embeds a text or an image, never both in one vector, and
        with no chat template there is no rendering of several parts into one input."""
        parts = [
            (f"messages[{m}].content", message.content)
            if isinstance(message.content, str)
            else (f"messages[{m}].content[{p}]", part)
            for m, message in enumerate(self.messages or ())
            for p, part in enumerate([None] if isinstance(message.content, str) else message.content)
        ]
        if len(parts) != 1:
            raise ValueError(
                f"messages hold {len(parts)} parts: this model embeds one text or one image per "
                "request (send several inputs in input instead)"
            )
        name, part = parts[0]
        if isinstance(part, str):
            return name, part
        if isinstance(part, TextPart):
            return name, part.text
        url = part.image_url if isinstance(part, InputImagePart) else part.image_url.url
        if not is_image_input(url):
            field = "image_url" if isinstance(part, InputImagePart) else "image_url.url"
            raise ValueError(f"{name}.{field} must be a data:image/...;base64, URL (nothing is fetched)")
        return name, url


class EmbeddingRequest(ChatFormBody):
    default_task: ClassVar[str | None] = "embed"

    @model_validator(mode="wrap")
    @classmethod
    def _conversation_in_input(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """Current vLLM's embeddings take one conversation as ``input`` too: read as ``messages``."""
        if isinstance(data, dict) and "messages" not in data and is_conversation(data.get("input")):
            body = handler({**{k: v for k, v in data.items() if k != "input"}, "messages": data["input"]})
            body._chat_field = "input"
            return body
        return handler(data)

    encoding_format: Literal["float", "base64", "bytes", "bytes_only"] = Field(
        "float",
        description="base64: each vector's bytes in embed_dtype, as OpenAI sends (float32). bytes / "
        "bytes_only (vLLM's): the vectors' bytes back to back as application/octet-stream, with a "
        "'metadata' header of JSON (each vector's start, end, dtype, byte order, shape; usage) for bytes.",
    )
    embed_dtype: EmbedDType = Field(
        "float32",
        description="Precision on the wire: base64 and bytes carry 4 (float32), 2 (float16, bfloat16) "
        "or 1 byte (fp8) per value; float lists carry the values as they are, as vLLM's do.",
    )
    endianness: Endianness = "native"
    dimensions: StrictInt | None = Field(None, ge=1, description="Matryoshka output size.")
    normalize: StrictBool | None = Field(
        None, description="false: the vector as pooled, not L2-normalised (default: the model's)."
    )
    use_activation: StrictBool | None = Field(
        None, description="vLLM's newer name of normalize on embeddings; must agree with it if both given."
    )
    add_special_tokens: AddSpecialTokens = True
    input_type: InputType | None = Field(
        None, description="Selects the model's query or document prompt (poolrag extension)."
    )
    prompt: Prompt = None
    prompt_name: PromptName = None
    _jina_images: tuple[int, ...] = PrivateAttr(default=())
    late_chunking: LateChunking | StrictBool | None = Field(
        None,
        description="{spans} (poolrag extension): input is one document, data one vector per span, "
        "in order. true (Jina's): the inputs are read as one text joined by spaces, one vector each.",
    )
    # Jina's embeddings API (api.jina.ai/v1/embeddings), taken on the same route
    task: str | None = Field(
        None,
        max_length=PROMPT_NAME_MAX_CHARS,
        description="Jina's: retrieval.query / retrieval.passage select the query / document prompt, "
        "text-matching none; another names a folder prompt (jina-embeddings-v3 names its prompts so).",
    )
    normalized: StrictBool | None = Field(None, description="Jina's name of normalize.")
    embedding_type: Literal["float", "base64", "binary", "ubinary"] | None = Field(
        None,
        description="Jina's: float lists, base64 float32, or one bit per dimension packed 8 to an "
        "integer (binary: -128..127, ubinary: 0..255), as sentence-transformers' quantize_embeddings.",
    )
    encoding_type: Literal["float", "base64", "binary", "ubinary"] | None = Field(
        None,
        description="Jina's older name of embedding_type, which its clients still send (LlamaIndex's "
        "JinaEmbedding: float by default); both given must agree.",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _jina_input_objects(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> EmbeddingRequest:
        """Jina's ``{"text"}`` / ``{"image"}`` items as plain inputs, the images' places kept: a
        text-only model would read an image's data URL as text."""
        images: tuple[int, ...] = ()
        if isinstance(data, dict) and isinstance(data.get("input"), list):
            items, images = jina_inputs(data["input"])
            data = {**data, "input": items}
        request = handler(data)
        if images and request.late_chunking is True:
            raise ValueError(f"late_chunking true joins texts: input[{images[0]}] is an image")
        request._jina_images = images
        return request

    @property
    def image_items(self) -> tuple[int, ...]:
        """Where ``input`` held Jina's ``{"image"}`` items (each now its data URL)."""
        return self._jina_images

    @model_validator(mode="after")
    def _jina_and_openai_fields_agree(self) -> EmbeddingRequest:
        if self.late_chunking is True and not (
            isinstance(self.input, list) and self.input and all(isinstance(t, str) for t in self.input)
        ):
            raise ValueError("late_chunking true reads the texts of input, a list of strings, as one text")
        if (
            None not in (self.embedding_type, self.encoding_type)
            and self.embedding_type != self.encoding_type
        ):
            raise ValueError("embedding_type and encoding_type (Jina's older name) disagree; give one")
        if self.embedding_type is None:
            self.embedding_type = self.encoding_type
        if self.embedding_type is not None and "encoding_format" in self.model_fields_set:
            raise ValueError(
                "give encoding_format (OpenAI's) or embedding_type (Jina's; older: encoding_type), not both"
            )
        if None not in (self.normalize, self.normalized) and self.normalize != self.normalized:
            raise ValueError("normalize and normalized (Jina's name) disagree; give one")
        if self.task is not None and (self.input_type is not None or self.prompt_name is not None):
            raise ValueError("task (Jina's) picks the prompt: give it or input_type / prompt_name")
        if self.messages is not None and self.late_chunking:
            raise ValueError("late_chunking reads one document from input, not messages")
        return self


def jina_inputs(items: list[Any]) -> tuple[list[Any], tuple[int, ...]]:
    """Jina's input objects as the texts and images the route reads, and where the images are:
    ``{"text": ...}`` its text, ``{"image": ...}`` its data URL (nothing is fetched, and a web
    address read as text would embed the address); other items are left for the input's own
    validation."""
    out, images = [], []
    for i, item in enumerate(items):
        if isinstance(item, dict) and len(item) == 1 and set(item) <= {"text", "image"}:
            ((kind, item),) = item.items()
            if kind == "image":
                item = _jina_image(item, f"input[{i}].image")
                images.append(i)
        out.append(item)
    return out, tuple(images)


def _jina_image(item: object, name: str) -> str:
    """A Jina image as a data URL: one already, or the bare base64 of the file Jina's API also takes
    (its other form, a web address, is refused: nothing is fetched)."""
    if is_image_input(item):
        return item  # type: ignore[return-value]
    if isinstance(item, str) and "://" not in item:
        try:
            data = base64_bytes(item)
        except (binascii.Error, ValueError):
            data = b""
        if data:
            return as_data_url(data)
    raise ValueError(f"{name} must be a data:image/...;base64, URL or a file's base64 (nothing is fetched)")


class LateChunking(BaseModel):
    """poolrag extension: embed ``input`` (one document) once, one vector per chunk span."""

    model_config = ConfigDict(extra="forbid")

    spans: list[tuple[StrictInt, StrictInt]] = Field(
        min_length=1,
        description="[start, end) character spans of the document's chunks; each gets the mean of its "
        "tokens' rows from one pass over the whole document (overlapping spans are allowed).",
    )


class EmbeddingData(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class EmbeddingResponse(_ListResponse):
    data: list[EmbeddingData]


# -- /score -------------------------------------------------------------------------------------------
#: vLLM's other names of a score request's two sides, read as text_1 / text_2.
SCORE_SIDE_NAMES = (("queries", "documents"), ("queries", "items"), ("data_1", "data_2"))


def _is_content_item(value: object) -> bool:
    return isinstance(value, dict) and set(value) == {"content"}


def _content_value(value: dict[str, Any], where: str) -> str:
    """One of vLLM's ``{"content": [part]}`` as the string this server reads: its text part's text,
    or its ``image_url`` part's data URL. vLLM fuses the parts of one content into one input, so a
    content of several parts is refused rather than read as several items."""
    parts = value["content"]
    if not isinstance(parts, list) or not parts:
        raise ValueError(f"{where}.content must be a list of one text or image_url part")
    if len(parts) > 1:
        raise ValueError(
            f"{where}.content has {len(parts)} parts, which vLLM fuses into one input; this server's "
            "models read one text or one image, so give one part per item "
            '(a list of {"content": [part]} for several items)'
        )
    kind, value = content_part(parts[0]) or (None, None)
    if kind == "text" and isinstance(value, str):
        return value
    if kind == "image_url":
        if not isinstance(value, str) or not is_image_input(value):
            field = "image_url" if parts[0].get("type") == "input_image" else "image_url.url"
            raise ValueError(
                f"{where}.content[0].{field} must be a data:image/...;base64, URL (nothing is fetched)"
            )
        return value
    raise ValueError(f"{where}.content[0] must be a text part or an image_url part")


def vllm_score_side(value: Any, name: str) -> Any:
    """One side of vLLM's score or rerank request (its ``ScoreInput | list[ScoreInput]``) as this
    server reads it: each ``{"content": [part]}`` is one query or document, alone or in a list,
    read as its part's text or data URL; anything else as it came."""
    if _is_content_item(value):
        return _content_value(value, name)
    if isinstance(value, list) and any(_is_content_item(item) for item in value):
        return [
            _content_value(item, f"{name}[{i}]") if _is_content_item(item) else item
            for i, item in enumerate(value)
        ]
    return value


TokensPerText = Annotated[StrictInt | None, Field(ge=0)]


class ScoringRequestBody(VllmRequestBody):
    """vLLM's fields of ``/score`` and ``/rerank`` (its ``ScoringRequestMixin``)."""

    max_tokens_per_query: TokensPerText = Field(
        None,
        description="Each query (text_1) is cut to its first n tokens before it is scored (0 or "
        "omitted: only the model's own length cuts it).",
    )
    max_tokens_per_doc: TokensPerText = Field(
        None,
        description="Each document (text_2) is cut to its first n tokens before it is scored, as "
        "vLLM's and Cohere's field (0 or omitted: only the model's own length cuts it).",
    )
    instruction: StrictStr | None = Field(
        None,
        max_length=PROMPT_MAX_CHARS,
        description="The score template's instruction (an LLM reranker's task, e.g. Qwen3-Reranker's "
        "{{ instruction }}); the same as chat_template_kwargs {'instruction': ...}. A model that "
        "scores pairs without a template refuses it.",
    )
    chat_template_kwargs: dict[StrictStr, Any] | None = Field(
        None,
        description="Variables of the score template (an LLM reranker's); a key here wins over "
        "instruction. A model that scores pairs without a template refuses them.",
    )

    def template_variables(self) -> dict[str, Any] | None:
        """``chat_template_kwargs`` with ``instruction`` folded in (a key given there wins), as vLLM
        merges them; ``None`` where neither says anything."""
        variables = dict(self.chat_template_kwargs or {})
        if self.instruction is not None:
            variables.setdefault("instruction", self.instruction)
        return variables or None


class ScoreRequest(ScoringRequestBody):
    default_task: ClassVar[str | None] = "score"
    text_1: TextOrTexts = Field(description="One query, or as many texts as text_2 (zipped pairs).")
    text_2: TextOrTexts
    use_activation: StrictBool | None = Field(
        None, description="Cross-encoders: false gives the raw logit instead of its sigmoid."
    )

    @model_validator(mode="before")
    @classmethod
    def _vllm_side_names(cls, data: Any) -> Any:
        """vLLM also names the sides queries/documents, queries/items or data_1/data_2."""
        if not isinstance(data, dict):
            return data
        if "text_1" not in data and "text_2" not in data:
            for first, second in SCORE_SIDE_NAMES:
                if first in data and second in data:
                    data = dict(data)
                    data["text_1"], data["text_2"] = data.pop(first), data.pop(second)
                    break
        return {
            **data,
            **{side: vllm_score_side(data[side], side) for side in ("text_1", "text_2") if side in data},
        }


class ScoreData(BaseModel):
    index: int
    object: Literal["score"] = "score"
    score: float


class ScoreResponse(_ListResponse):
    data: list[ScoreData]


# -- /rerank ------------------------------------------------------------------------------------------
#: how deep a document object may nest to be echoed (pydantic's serializer stops near 255 levels)
MAX_ECHO_DEPTH = 64


def _unechoable(value: object) -> str | None:
    """Why ``value`` (a parsed JSON value) cannot be written back as JSON, or ``None``: a lone
    surrogate cannot be encoded, a NaN or an infinity (``1e400``) would come back as null, and
    nesting past :data:`MAX_ECHO_DEPTH` would fail only after the model had run."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if lone_surrogate(item) is not None:
                return "holds a string that is not valid Unicode (a lone surrogate)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "holds a number that is not finite"
        elif isinstance(item, dict | list):
            if depth >= MAX_ECHO_DEPTH:
                return f"nests more than {MAX_ECHO_DEPTH} levels deep"
            children = [*item, *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return None


class RerankDocumentIn(BaseModel):
    """A document object: ranked by its ``text``; its other keys (an id, a title, metadata, as
    Cohere v1 and Jina callers send them) come back with it when ``return_documents`` is true."""

    model_config = ConfigDict(extra="allow")

    text: Text

    @model_validator(mode="after")
    def _echoable(self) -> RerankDocumentIn:
        problem = _unechoable(self.model_extra)
        if problem is not None:
            raise PydanticCustomError("unechoable_document", f"the document object {problem}")
        return self


class RelevantSpans(BaseModel):
    """Cohere v2's ``relevant_spans``: only ``disabled`` (no model here gives spans; Cohere's own
    come from its Rerank v5 models)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["disabled"] = Field(description="'enabled' is refused: no model here gives spans.")
    threshold: StrictFloat | None = None
    max_spans: StrictInt | None = None


class ContentDocument(BaseModel):
    """vLLM's document of parts, ``{"content": [part]}``: ranked by its one part (a text, or an image
    as its data URL) and echoed as vLLM echoes it, the parts under ``multi_modal``."""

    model_config = ConfigDict(extra="forbid")

    content: list[dict[str, Any]] = Field(
        min_length=1, max_length=1, description="One text part or one image_url part (a data URL)."
    )
    _item: str = PrivateAttr(default="")

    @classmethod
    def read(cls, value: dict[str, Any], where: str) -> ContentDocument:
        item = _content_value(value, where)
        document = cls(content=value["content"])
        document._item = item
        return document

    @property
    def item(self) -> str:
        """What the model reads: the text part's text or the image part's data URL."""
        return self._item


FiniteScore = Annotated[StrictFloat, Field(allow_inf_nan=False)]
RerankDocumentForm = Annotated[
    Text | RerankDocumentIn | ContentDocument,
    single_error("must be a string, an object with a 'text' string, or vLLM's content object"),
]


class RerankRequest(ScoringRequestBody):
    default_task: ClassVar[str | None] = "score"
    query: Text
    documents: list[RerankDocumentForm] = Field(
        description='Texts, or objects with a "text" string as Jina and Cohere v1 accept; an '
        "object's other keys are returned with it (return_documents) and not read by the model."
    )
    top_n: StrictInt | None = Field(None, ge=0, description="Return the best n results (0 or omitted: all).")
    return_documents: StrictBool | None = Field(
        None,
        description="Each result carries its document. Omitted or null: true on /rerank and /v1/rerank "
        "(Jina's and vLLM's answer), false on /v2/rerank (Cohere v2 answers index and relevance_score "
        "only).",
    )
    rank_fields: list[Literal["text"]] | None = Field(
        None,
        description="Cohere v1's: the object keys ranked on; only [\"text\"], Cohere's default (a "
        "document object is ranked by its text).",
    )
    max_chunks_per_doc: StrictInt | None = Field(
        None,
        ge=1,
        description="Cohere v1's; accepted: a document over the model's length is cut to its first "
        "chunk (or refused with truncate false), not split, and X-Truncated-Inputs counts it.",
    )
    relevant_spans: RelevantSpans | None = None
    use_activation: StrictBool | None = Field(
        None, description="Cross-encoders: false ranks by the raw logit instead of its sigmoid."
    )
    first_stage_scores: list[FiniteScore] | None = Field(
        None,
        description="poolrag extension: the retriever's score of each document (same order and length); "
        "the reranker's scores are then fused with them (second_stage 'fuse' by default).",
    )
    second_stage: SecondStage | None = Field(
        None,
        description="poolrag extension: 'fuse' mixes per-query z-scores of the first stage and the "
        "reranker (ranks when no first_stage_scores: the documents' order is the first stage), 'rrf' "
        "fuses ranks, 'replace' ranks by the reranker alone. Default: 'fuse' with first_stage_scores, "
        "else 'replace' (plain Jina/Cohere reranking).",
    )
    rerank_weight: StrictFloat | None = Field(
        None,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="poolrag extension: the reranker's share when fusing (default 0.5).",
    )

    @model_validator(mode="before")
    @classmethod
    def _vllm_score_inputs(cls, data: Any) -> Any:
        """vLLM's ``query: ScoreInput`` and ``documents: ScoreInput | list[ScoreInput]``: a
        ``{"content": [part]}`` is one query or document, and one document may come bare."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "query" in data:
            data["query"] = vllm_score_side(data["query"], "query")
        documents = data.get("documents")
        if isinstance(documents, str) or _is_content_item(documents):
            documents, names = [documents], ["documents"]
        elif isinstance(documents, list):
            names = [f"documents[{i}]" for i in range(len(documents))]
        else:
            return data
        data["documents"] = [
            ContentDocument.read(doc, name) if _is_content_item(doc) else doc
            for doc, name in zip(documents, names, strict=True)
        ]
        return data


class RerankDocument(RootModel[dict[str, Any]]):
    """A document as the request gave it: a string as ``{"text": ...}``, an object whole (Cohere v1
    echoes its other keys). A root model, so that the answer's ``exclude_none`` keeps its nulls."""

    model_config = ConfigDict(
        json_schema_extra={"properties": {"text": {"type": "string"}}, "required": ["text"]}
    )


class RerankResult(BaseModel):
    index: int
    relevance_score: float = Field(description="The final score: fused when the second stage fuses.")
    rerank_score: float | None = Field(None, description="The reranker's own score, when fused.")
    document: RerankDocument | None = None


class RerankBilledUnits(BaseModel):
    search_units: int = Field(description="Cohere's unit: a query with up to 100 documents.")


class RerankMeta(BaseModel):
    """Cohere's ``meta``: its clients type it, and code that counts usage reads ``billed_units``."""

    api_version: dict[str, str]
    billed_units: RerankBilledUnits
    warnings: list[str] | None = Field(None, description="Says how many documents were truncated, if any.")


class RerankResponse(BaseModel):
    id: str
    model: str
    usage: Usage = Field(description="prompt_tokens and total_tokens (equal here), as vLLM answers.")
    results: list[RerankResult]
    meta: RerankMeta


# -- /classify ---------------------------------------------------------------------------------------
class ClassificationRequest(VllmRequestBody):
    default_task: ClassVar[str | None] = "classify"
    input: PoolingInput
    use_activation: StrictBool | None = Field(None, description="false: return raw logits as probs.")
    add_special_tokens: AddSpecialTokens = True


class ClassificationData(BaseModel):
    index: int
    label: str
    probs: list[float]
    num_classes: int


class ClassificationResponse(_ListResponse):
    data: list[ClassificationData]


# -- /pooling -----------------------------------------------------------------------------------------
PoolingTaskName = Literal["embed", "classify", "token_embed", "token_classify", "reward", "sparse_embed"]


class PoolingRequest(ChatFormBody):
    task: PoolingTaskName | None = Field(
        None,
        description="Pooling task; omitted, as vLLM picks it: the server's pooler_config task, else "
        "the model's own: embed, else classify, else token_embed, else token_classify (a token "
        "classifier's or reward model's per-token head first), else the model's primary task.",
    )
    dimensions: StrictInt | None = Field(None, ge=1)
    normalize: StrictBool | None = None
    use_activation: StrictBool | None = None
    input_type: InputType | None = None
    prompt: Prompt = None
    prompt_name: PromptName = None
    max_active_dims: StrictInt | None = Field(
        None, ge=1, description="sparse_embed: keep only this many largest weights per input."
    )
    encoding_format: Literal["float", "base64", "bytes", "bytes_only"] = Field(
        "float",
        description="float: nested lists; base64: the array's values flattened (row after row) as "
        "bytes in embed_dtype, as vLLM sends them; bytes / bytes_only: vLLM's binary answer, the "
        "arrays' bytes back to back (bytes: with a 'metadata' header giving each one's place and "
        "shape). Not for sparse_embed.",
    )
    embed_dtype: EmbedDType = Field("float32", description="Precision of base64 and bytes values.")
    endianness: Endianness = "native"
    add_special_tokens: AddSpecialTokens = True

    @property
    def default_task(self) -> str | None:  # type: ignore[override]
        """A request naming its task and no model goes to the first model that runs that task."""
        return self.task


class SparseEntry(BaseModel):
    """One non-zero weight of a sparse vector (TEI's ``/embed_sparse`` item)."""

    index: int = Field(description="Token id.")
    value: float


class PoolingData(BaseModel):
    index: int
    object: Literal["pooling"] = "pooling"
    data: float | list[float] | list[list[float]] | list[SparseEntry] | str = Field(
        description="The pooled array as nested lists: a vector, or one row per token or step; for "
        "sparse_embed the non-zero weights as {index, value} objects, sorted by token id; with "
        "encoding_format base64, the values' bytes as base64."
    )


class PoolingResponse(_ListResponse):
    data: list[PoolingData]


# -- /tokenize ----------------------------------------------------------------------------------------
class TokenizeRequest(RequestBody):
    prompt: Text
    add_special_tokens: StrictBool = True
    return_token_strs: StrictBool = False


class TokenizeResponse(BaseModel):
    count: int
    max_model_len: int
    tokens: list[int]
    token_strs: list[str] | None = None


class DetokenizeRequest(RequestBody):
    """vLLM's ``/detokenize``: token ids back to text, special tokens kept (as vLLM decodes them)."""

    tokens: list[Annotated[StrictInt, Field(ge=0)]]


class DetokenizeResponse(BaseModel):
    prompt: str


# -- /v1/models, /health ------------------------------------------------------------------------------
class ModelCard(BaseModel):
    """OpenAI's model card plus the model's facts (:class:`~poolrag.model_facts.ModelFacts`), which
    :class:`~poolrag.client.PoolragClient` reads so it can answer and check like an in-process engine;
    OpenAI clients ignore the extra fields."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "poolrag"
    root: str
    max_model_len: int
    tasks: list[str]
    model_identity: str
    supported_tasks: list[str]
    embedding_dim: int | None
    is_matryoshka: bool
    matryoshka_dimensions: list[int] | None
    score_kind: ScoreKind
    output_fingerprint: str
    normalizes_embeddings: bool
    default_dimensions: int | None
    prompt_names: list[str] = Field(default_factory=list, description="What prompt_name may say.")
    reads_images: bool = Field(default=False, description="Images (data URLs) go wherever texts go.")
    max_inputs_per_request: int = Field(
        description="The most inputs (texts, documents, pairs) one request may carry (--max-inputs)."
    )
    max_queue: int = Field(description="The most requests to this model admitted at once (--max-queue).")
    late_chunking_refusal: str | None = Field(
        default=None,
        description="Why late_chunking is refused on this model (it pools no vector with a part per "
        "chunk); null where it runs. Read before any input, so an ingest over HTTP refuses before it "
        "makes a collection.",
    )


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class HealthResponse(BaseModel):
    status: Literal["ok"] = "ok"


class VersionResponse(BaseModel):
    version: str
