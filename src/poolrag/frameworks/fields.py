"""The adapters' constructor arguments as pydantic fields, declared once for both frameworks.

LangChain's and LlamaIndex's base classes are both pydantic models, so each adapter class is its
framework's base plus one of these mixins, and every adapter takes the same arguments:

* ``engine=`` an already loaded :class:`poolrag.Engine` (shared, nothing is loaded again);
* ``model_name=`` a path or hub id to load in this process (``engine_kwargs`` go to ``Engine``), or
  ``engine_args=`` a :class:`poolrag.EngineArgs` naming the model and its options;
* ``base_url=`` a ``poolrag serve`` URL (then ``model_name`` is the served name, ``api_key`` defaults
  to ``$POOLRAG_API_KEY``), or ``client=`` a :class:`poolrag.client.PoolragClient`;
* nothing at all when ``$POOLRAG_BASE_URL`` is set.

``engine=`` is checked against :class:`poolrag.Engine` only when one is given: importing the
adapters, or building one for a server, loads no torch or transformers.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    SecretStr,
    field_serializer,
    model_validator,
)
from pydantic_core import PydanticKnownError

from poolrag.backend import PoolingBackend
from poolrag.client import PoolragClient
from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError
from poolrag.frameworks.backend_resolution import (
    API_KEY_ENV,
    adapter_backend,
    engine_class,
)
from poolrag.frameworks.sparse_encoding import (
    LearnedSparseEncoder,
    LexicalSparseEncoder,
    QueryIdf,
    QueryIdfName,
    SparseSource,
    SparseSourceName,
    SparseTextEncoder,
)
from poolrag.params import InputType, PoolingParams
from poolrag.sparse.bm25 import BM25Encoder, BM25Parameters


def _instance_of(cls: Callable[[], type]) -> PlainValidator:
    """A validator passing a value of the class ``cls()`` returns (looked up only when a value is
    checked), else raising pydantic's own ``is_instance_of`` error."""

    def check(value: object) -> object:
        if not isinstance(value, expected := cls()):
            raise PydanticKnownError("is_instance_of", {"class": expected.__name__})
        return value

    return PlainValidator(check)


if TYPE_CHECKING:
    from poolrag.engine import Engine as SharedEngine

    GivenEngineArgs = EngineArgs
else:  # an Engine checked when given, so that this module does not import it (and torch) itself
    SharedEngine = Annotated[Any, _instance_of(engine_class)]
    # not InstanceOf[EngineArgs]: pydantic < 2.13 builds the dataclass's schema for it, and its
    # torch annotations (imported for type checkers only) left every adapter "not fully defined"
    GivenEngineArgs = Annotated[Any, _instance_of(lambda: EngineArgs)]

#: ``HuggingFaceEmbeddings``' and ``HuggingFaceEmbedding``'s arguments that are engine options here
HUGGINGFACE_ENGINE_OPTIONS = ("device", "trust_remote_code", "revision", "token")
#: their hub cache folder, which is vLLM's (and so the engine's) ``download_dir``
HUGGINGFACE_CACHE_FOLDER = "cache_folder"


def with_huggingface_options(
    data: dict[str, Any], options: Mapping[str, Any], truncate_dim: object
) -> dict[str, Any]:
    """An adapter's arguments with a HuggingFace class's engine ``options`` merged under
    ``engine_kwargs`` (those at their unset values dropped, so ``engine=`` or ``base_url=`` still
    take them; ``cache_folder`` as ``download_dir``) and its ``truncate_dim`` as ``dimensions``: the
    frameworks' embeddings and rerankers map them so."""
    given = {name: value for name, value in options.items() if value is not None and value is not False}
    if HUGGINGFACE_CACHE_FOLDER in given:
        given["download_dir"] = str(given.pop(HUGGINGFACE_CACHE_FOLDER))
    if "token" in given:  # a gated model's hub token (True: the one huggingface_hub has stored)
        given["hf_token"] = given.pop("token")
    if given:
        data["engine_kwargs"] = {**given, **(data.get("engine_kwargs") or {})}
    if truncate_dim is not None:
        if data.get("dimensions") not in (None, truncate_dim):
            raise InvalidInputError("truncate_dim and dimensions disagree; give one")
        data["dimensions"] = truncate_dim
    return data


def engine_options(args: EngineArgs) -> dict[str, Any]:
    """The options ``args`` sets besides its model (never its hub token), as JSON values: what an
    adapter given ``engine=`` / ``engine_args=`` serialises as its ``engine_kwargs``, since the
    frameworks key caches on the serialised adapter (LlamaIndex's ``IngestionCache``)."""
    options: dict[str, Any] = {}
    for field in dataclasses.fields(args):
        value = getattr(args, field.name)
        if field.name in ("model", "hf_token") or value == field.default:
            continue
        options[field.name] = _json_value(value)
    return options


def _json_value(value: object) -> Any:
    """``value`` as JSON: a dataclass (a PoolerConfig, a ScoreTemplate) as its fields, which
    ``Engine`` takes back; a torch dtype or device as its name, at any depth (``hf_overrides``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(key): _json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value).removeprefix("torch.")


def _api_key_from_env() -> SecretStr | None:
    value = os.environ.get(API_KEY_ENV)
    return SecretStr(value) if value else None


class BackendFields(BaseModel):
    """Where an adapter's model runs; resolved once, at construction."""

    model_config = ConfigDict(arbitrary_types_allowed=True, protected_namespaces=(), extra="forbid")

    model_name: str | None = Field(
        default=None,
        description="Model path or hub id to load in process; the served model name when remote.",
    )
    base_url: str | None = Field(default=None, description="URL of a `poolrag serve` server.")
    api_key: SecretStr | None = Field(
        default_factory=_api_key_from_env,
        exclude=True,  # never serialised (LlamaIndex's to_json); from_json reads $POOLRAG_API_KEY again
        description="API key of the server.",
    )
    engine: SharedEngine | None = Field(
        default=None, exclude=True, repr=False, description="A loaded poolrag.Engine to share."
    )
    client: PoolragClient | None = Field(
        default=None, exclude=True, repr=False, description="A PoolragClient to share."
    )
    engine_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments of poolrag.Engine when model_name is loaded here (with engine= or "
        "engine_args=: their options, so that the serialised adapter names them).",
    )
    engine_args: GivenEngineArgs | None = Field(
        default=None,
        exclude=True,
        description="A poolrag.EngineArgs (model and options) to load here, instead of model_name.",
    )
    truncate_prompt_tokens: int | None = Field(
        default=-1,
        description="-1: cut inputs at the model's maximum length, as sentence-transformers does; "
        "None: raise on over-long inputs instead.",
    )

    _backend: PoolingBackend = PrivateAttr()
    #: the pooling task every call of this adapter runs, checked against the model at construction
    _task: ClassVar[str | None] = None

    def _embedding_cache(self) -> Any:
        """The ``cache=`` argument of classes that embed (none for the others)."""
        return None

    def _runs_a_model(self) -> bool:
        """Whether this adapter needs a backend at all (a BM25 encoder needs only a tokenizer)."""
        return True

    @model_validator(mode="after")
    def _connect(self) -> Any:
        if not self._runs_a_model():
            return self
        self._backend = adapter_backend(
            engine=self.engine,
            client=self.client,
            model_name=self.model_name,
            base_url=self.base_url,
            api_key=self.api_key.get_secret_value() if self.api_key is not None else None,
            cache=self._embedding_cache(),
            engine_kwargs=self.engine_kwargs,
            truncate_prompt_tokens=self.truncate_prompt_tokens,
            engine_args=self.engine_args,
            task=self._task,
        )
        client = self._backend if isinstance(self._backend, PoolragClient) else None
        remote_url = None if client is None else client.base_url
        if remote_url != self.base_url:  # filled in from $POOLRAG_BASE_URL or client=
            self.base_url = remote_url
        if self.model_name is None:
            # named even when given as engine= / engine_args= / client= (excluded from serialisation):
            # the frameworks key caches on the serialised adapter (LlamaIndex's IngestionPipeline),
            # and LlamaIndex's events and reprs show the name. A client naming none leaves it None:
            # constructing an adapter does not call its server (nor do the frameworks' remote classes)
            self.model_name = self._backend.facts.model_name if client is None else client.model
        given = self.engine_args if self.engine is None else self.engine.engine_args
        if given is not None and not self.engine_kwargs:
            # the options as model_name's would show them: the same model pooled or cut otherwise
            # is another cache key, not the first one's vectors again
            self.engine_kwargs = engine_options(given)
        # Settings refused now rather than at the first call: truncation always; the task and
        # ``dimensions`` against the model where it runs here (a server's facts would need a request).
        for input_type in (None, "query"):  # a query's settings may be its own (query_encode_kwargs)
            params = self._params(input_type)
            if self._task is not None and remote_url is None:
                params.verify(self._task, self._backend.facts)
        return self

    @field_serializer("engine_kwargs")
    def _without_hub_token(self, engine_kwargs: dict[str, Any]) -> dict[str, Any]:
        """``engine_kwargs`` less the hub token: a secret, like ``api_key``, is never serialised
        (LlamaIndex's to_json and cache keys); huggingface_hub's stored token or $HF_TOKEN serves
        the rebuilt adapter."""
        return {name: value for name, value in engine_kwargs.items() if name != "hf_token"}

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, self._without_hub_token(value) if name == "engine_kwargs" else value

    @property
    def backend(self) -> PoolingBackend:
        """The engine, cache-reading embedder or HTTP client this adapter calls."""
        return self._backend

    def _params(self, input_type: InputType | None = None) -> PoolingParams:
        return PoolingParams.cut_at(self.truncate_prompt_tokens, input_type=input_type)


class EmbeddingFields(BackendFields):
    """An embedding adapter's arguments: where the model runs, plus output size and cache."""

    _task: ClassVar[str | None] = "embed"

    dimensions: int | None = Field(default=None, description="Matryoshka output size.")
    cache: Any = Field(
        default=None,
        exclude=True,
        repr=False,
        description="poolrag EmbeddingCache (or its path), or a CachedEmbedder, to read through.",
    )

    def _embedding_cache(self) -> Any:
        return self.cache

    def _params(self, input_type: InputType | None = None) -> PoolingParams:
        return super()._params(input_type).with_updates(dimensions=self.dimensions)


class SparseFields(BackendFields):
    """A sparse encoder's arguments: which source makes the vectors, and BM25's settings.

    ``source="bm25"`` needs only a tokenizer: the ``engine``'s, or that of ``model_name`` (loaded
    alone, no model weights); ``source="model"`` runs a sparse model wherever the shared fields say.
    """

    source: SparseSourceName = Field(
        default=SparseSource.BM25,
        description="'bm25': lexical BM25 over the model's tokenizer; 'model': a SPLADE / BGE-M3 model.",
    )
    avg_doc_length: float | None = Field(
        default=None,
        gt=0,
        description="BM25: the corpus' mean length in terms; None pins the first batch's mean.",
    )
    query_idf: QueryIdfName = Field(
        default=QueryIdf.STORE,
        description="BM25: 'store' (unit query weights, Qdrant Modifier.IDF) or 'documents' (IDF from the "
        "documents this object encoded, for Milvus).",
    )
    k1: float = Field(default=BM25Parameters.k1, description="BM25 term-frequency saturation.")
    b: float = Field(default=BM25Parameters.b, description="BM25 length normalisation.")

    _encoder: SparseTextEncoder = PrivateAttr()

    def _runs_a_model(self) -> bool:
        return self.source is SparseSource.MODEL

    @model_validator(mode="after")
    def _build_encoder(self) -> Any:
        if self.source is SparseSource.MODEL:
            document, query = self._params("document"), self._params("query")
            self._encoder = LearnedSparseEncoder(self.backend, document, query)
            return self
        if self.base_url is not None or self.client is not None:
            raise InvalidInputError(
                "BM25 needs the model's tokenizer here: pass engine= or model_name=, not a server"
            )
        if self.engine is not None:
            tokenizer = self.engine.tokenizer
        elif self.engine_args is not None:
            args = self.engine_args
            tokenizer = BM25Encoder.from_pretrained(
                args.tokenizer or args.model,
                args.tokenizer_revision if args.tokenizer or args.tokenizer_revision else args.revision,
                download_dir=args.download_dir,
                hf_token=args.hf_token,
            ).tokenizer
        elif self.model_name is not None:
            tokenizer = BM25Encoder.from_pretrained(self.model_name).tokenizer
        else:
            raise InvalidInputError("BM25 needs a tokenizer: pass engine= or model_name= (a path or hub id)")
        encoder = BM25Encoder(tokenizer, BM25Parameters(self.k1, self.b))
        self._encoder = LexicalSparseEncoder(encoder, self.avg_doc_length, self.query_idf)
        return self

    @property
    def encoder(self) -> SparseTextEncoder:
        """The object that makes the vectors (its ``stats`` hold BM25's document counts)."""
        return self._encoder
