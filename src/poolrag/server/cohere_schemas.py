"""Request and answer bodies of Cohere's embed API (``/v2/embed``, ``/v1/embed``): Cohere's own field
names and answer shapes, kept apart from the OpenAI/vLLM bodies of :mod:`poolrag.server.schemas`."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field, StrictInt, model_validator

from poolrag.image_inputs import is_image_input
from poolrag.server.schemas import Priority, RequestBody, Text

CohereInputType = Literal["search_query", "search_document", "classification", "clustering", "image"]
EmbeddingType = Literal["float", "int8", "uint8", "binary", "ubinary", "base64"]


class CohereImageUrl(BaseModel):
    url: str = Field(description="A data:image/...;base64, URI (nothing is fetched).")


class CohereContent(BaseModel):
    """One part of a Cohere ``inputs`` item: a text, or an image as a data URI."""

    type: Literal["text", "image_url"]
    text: str | None = None
    image_url: CohereImageUrl | None = None


class CohereEmbedInput(BaseModel):
    content: list[CohereContent] = Field(min_length=1)


class CohereEmbedRequest(RequestBody):
    default_task: ClassVar[str | None] = "embed"
    texts: list[Text] | None = Field(None, min_length=1, description="The texts to embed.")
    images: list[str] | None = Field(
        None,
        min_length=1,
        description="Images as data:image/...;base64, URIs, instead of texts (a model that reads images).",
    )
    inputs: list[CohereEmbedInput] | None = Field(
        None,
        min_length=1,
        description="Cohere's mixed form: each item's content is one text or one image_url part (this "
        "server's models embed one or the other, not a fused text and image).",
    )
    input_type: CohereInputType | None = Field(
        None,
        description="search_query / search_document select the model's query / document prompt; "
        "classification / clustering the folder's prompt of that name. Required for a model with a "
        "query or document prompt, as Cohere's v3+ models require it; else omitted is search_document.",
    )
    embedding_types: list[EmbeddingType] | None = Field(
        None,
        min_length=1,
        description="One or more types; each comes back under its own key (omitted or null: float). "
        "base64: each float vector's little-endian float32 bytes, base64-encoded.",
    )
    output_dimension: StrictInt | None = Field(None, ge=1, description="Matryoshka output size.")
    max_tokens: StrictInt | None = Field(
        None,
        ge=1,
        description="At most this many tokens of each input are embedded (special tokens included).",
    )
    priority: Priority = 0
    truncate: Literal["NONE", "START", "END"] | None = Field(
        None,
        description="END keeps the first tokens; NONE refuses a text that is too long; omitted: the "
        "server's default (END, unless started with --no-auto-truncate).",
    )
    calibration: list[list[float]] | None = Field(
        None,
        min_length=1,
        description="Vectors whose per-dimension min/max scale int8/uint8 (poolrag extension; "
        "default: the request's own texts).",
    )

    @model_validator(mode="after")
    def _texts_or_images(self) -> CohereEmbedRequest:
        if sum(given is not None for given in (self.texts, self.images, self.inputs)) != 1:
            raise ValueError("send texts, images or inputs (one of the three)")
        for i, image in enumerate(self.images or ()):
            if not is_image_input(image):
                raise ValueError(f"images[{i}] must be a data:image/...;base64, URI (nothing is fetched)")
        for i, item in enumerate(self.inputs or ()):
            _one_part(item, f"inputs[{i}]")
        return self

    @property
    def types(self) -> list[str]:
        """The embedding types asked for, float when none were."""
        return list(self.embedding_types or ["float"])

    @property
    def field(self) -> str:
        """The field the request's items came in, for its errors."""
        return "texts" if self.texts is not None else "images" if self.images is not None else "inputs"

    @property
    def items(self) -> list[str]:
        """The texts, or the images' data URIs, or each input's one text or image."""
        if self.inputs is not None:
            return [_part_value(item.content[0]) for item in self.inputs]
        return list(self.texts if self.texts is not None else self.images or ())

    @property
    def has_images(self) -> bool:
        if self.inputs is not None:
            return any(item.content[0].type == "image_url" for item in self.inputs)
        return self.images is not None


def _one_part(item: CohereEmbedInput, name: str) -> None:
    """An ``inputs`` item this server embeds: one text, or one image as a data URI."""
    if len(item.content) != 1:
        raise ValueError(
            f"{name}.content has {len(item.content)} parts: this model embeds one text or one image per input"
        )
    part = item.content[0]
    if part.type == "text" and part.text is None:
        raise ValueError(f"{name}.content[0] is a text part without text")
    if part.type == "image_url":
        url = part.image_url.url if part.image_url is not None else ""
        if not is_image_input(url):
            raise ValueError(
                f"{name}.content[0].image_url must be a data:image/...;base64, URI (nothing is fetched)"
            )


def _part_value(part: CohereContent) -> str:
    if part.type == "text":
        return part.text or ""
    return part.image_url.url if part.image_url is not None else ""


class CohereBilledUnits(BaseModel):
    input_tokens: int


class CohereMeta(BaseModel):
    api_version: dict[str, str] = {"version": "2"}
    billed_units: CohereBilledUnits
    warnings: list[str] | None = Field(None, description="Says how many texts were truncated, if any.")


class CohereEmbedResponse(BaseModel):
    id: str
    response_type: Literal["embeddings_by_type"] = "embeddings_by_type"
    embeddings: dict[str, list[list[float]] | list[list[int]] | list[str]]
    texts: list[str]
    meta: CohereMeta


class CohereFloatsResponse(BaseModel):
    """``/v1/embed`` without ``embedding_types``: Cohere v1's bare float vectors."""

    id: str
    response_type: Literal["embeddings_floats"] = "embeddings_floats"
    embeddings: list[list[float]]
    texts: list[str]
    meta: CohereMeta
