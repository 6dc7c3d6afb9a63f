"""The constructor fields every adapter shares, as a pydantic mixin (LangChain and LlamaIndex
classes are both pydantic models), so that each adapter is declared with the same arguments:

* ``engine=`` an already loaded :class:`poolrag.Engine` (shared, nothing is loaded again);
* ``model_name=`` a path or hub id to load in this process (``engine_kwargs`` go to ``Engine``);
* ``base_url=`` a ``poolrag serve`` URL (then ``model_name`` is the served name, ``api_key`` defaults
  to ``$POOLRAG_API_KEY``), or ``client=`` a :class:`poolrag.client.PoolragClient`;
* nothing at all when ``$POOLRAG_BASE_URL`` is set.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, model_validator

from integrations.backend import API_KEY_ENV, PoolingBackend, backend_base_url, resolve_backend


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
    api_key: SecretStr | None = Field(default_factory=_api_key_from_env, description="API key of the server.")
    engine: Any = Field(
        default=None, exclude=True, repr=False, description="A loaded poolrag.Engine to share."
    )
    client: Any = Field(default=None, exclude=True, repr=False, description="A PoolragClient to share.")
    engine_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments of poolrag.Engine when model_name is loaded here.",
    )
    truncate_prompt_tokens: int | None = Field(
        default=-1,
        description="-1: cut inputs at the model's maximum length, as sentence-transformers does; "
        "None: raise on over-long inputs instead.",
    )

    _backend: PoolingBackend = PrivateAttr()

    @model_validator(mode="after")
    def _connect(self) -> Any:
        self._backend = resolve_backend(
            engine=self.engine,
            client=self.client,
            model_name=self.model_name,
            base_url=self.base_url,
            api_key=self.api_key.get_secret_value() if self.api_key is not None else None,
            cache=getattr(self, "cache", None),
            engine_kwargs=self.engine_kwargs,
        )
        remote_url = backend_base_url(self._backend)
        if remote_url != self.base_url:  # filled in from $POOLRAG_BASE_URL or client=
            self.base_url = remote_url
        return self

    @property
    def backend(self) -> PoolingBackend:
        """The engine wrapper or HTTP client this adapter calls."""
        return self._backend
