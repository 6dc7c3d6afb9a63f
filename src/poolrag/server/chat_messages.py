"""vLLM's chat messages and their text and image parts, as ``/v1/embeddings`` and ``/pooling`` take
them: one conversation's wire form, apart from the request bodies of :mod:`poolrag.server.schemas`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator


class ImageURL(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: StrictStr = Field(description="A data:image/...;base64, URL (nothing is fetched).")
    detail: Literal["auto", "low", "high"] | None = Field(
        None, description="Accepted as OpenAI's chat parts carry it; the model's own preprocessing applies."
    )


class TextPart(BaseModel):
    """A text part: chat's ``text``, or the Responses API's ``input_text``, which vLLM reads alike."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["text", "input_text"]
    text: StrictStr


class ImagePart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["image_url"]
    image_url: ImageURL


class InputImagePart(BaseModel):
    """The Responses API's image part, its ``image_url`` the URL itself, which vLLM's chat form
    reads as an ``image_url`` part."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["input_image"]
    image_url: StrictStr = Field(description="A data:image/...;base64, URL (nothing is fetched).")
    detail: Literal["auto", "low", "high"] | None = None


def _typed_part(part: Any) -> Any:
    """vLLM reads a part without ``type`` holding ``image_url`` (a URL, or ``{"url": ...}``) as an
    image part, the plain form OpenAI's API takes undocumented."""
    if isinstance(part, dict) and "type" not in part and "image_url" in part:
        image = part["image_url"]
        return {**part, "type": "image_url", "image_url": {"url": image} if isinstance(image, str) else image}
    return part


class ChatMessage(BaseModel):
    """One chat message of vLLM's multimodal embedding request."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: StrictStr | list[Annotated[TextPart | ImagePart | InputImagePart, Field(discriminator="type")]]

    @field_validator("content", mode="before")
    @classmethod
    def _parts_typed(cls, content: Any) -> Any:
        return [_typed_part(part) for part in content] if isinstance(content, list) else content


def is_conversation(value: object) -> bool:
    """A list of chat messages (each an object with a string ``role``), as vLLM tells them apart."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value)
    )
