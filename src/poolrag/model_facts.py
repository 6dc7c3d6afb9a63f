"""What a caller may know about a served model without holding it: the facts every backend reports.

An in-process :class:`~poolrag.Engine` reads them from the loaded folder; the HTTP client reads the
same fields from the server's ``GET /v1/models``. Caches, stores, ingestion and the framework
adapters decide from these facts alone, so they never ask which kind of backend they hold.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Literal

from poolrag.errors import InvalidInputError, UnsupportedTaskError


def model_identity(name: str, weights: str) -> str:
    """``name@weights``: what a served model is called and a digest of its weights. Caches and
    collections key on it; only the weights part says whether two models are the same."""
    return f"{name}@{weights}"


def weights_fingerprint(identity: str) -> str:
    """The weights part of ``name@weights`` (the name may be a local path that differs per machine)."""
    return identity.rsplit("@", 1)[-1]


#: Digests older poolrags gave the weights a digest of today names (``today -> earlier``), noted as a
#: model loads: a collection or file written then records the earlier digest of the very same files.
_EARLIER_FINGERPRINTS: dict[str, frozenset[str]] = {}


def note_earlier_fingerprints(weights: str, earlier: Iterable[str]) -> None:
    """Record that the ``earlier`` digests name the weights ``weights`` names (what an older poolrag
    computed from the same files), so :func:`same_weights` takes either for the other."""
    known = _EARLIER_FINGERPRINTS.get(weights, frozenset()) | (frozenset(earlier) - {weights})
    if known:
        _EARLIER_FINGERPRINTS[weights] = known


def same_weights(identity: str, other: str) -> bool:
    """Whether two identities name the same weights, whatever each was called (and whichever
    poolrag digested them, once this process loaded the model: :func:`note_earlier_fingerprints`)."""
    ours, theirs = weights_fingerprint(identity), weights_fingerprint(other)
    return (
        ours == theirs
        or theirs in _EARLIER_FINGERPRINTS.get(ours, ())
        or ours in _EARLIER_FINGERPRINTS.get(theirs, ())
    )


#: A task a caller names (vLLM's ``PoolingTask``, with ``sparse_embed``).
PoolingTask = Literal["embed", "classify", "score", "token_classify", "token_embed", "reward", "sparse_embed"]


class ScoreKind(StrEnum):
    """How ``score`` relates two texts: one joint forward per pair, cosine of vectors, or MaxSim."""

    CROSS_ENCODER = "cross-encoder"
    COSINE = "cosine"
    MAXSIM = "maxsim"


def answering_model(served: Sequence[ModelFacts], task: str | None) -> int:
    """Which of several served models answers a request that names none: the first that runs
    ``task`` (for ``score``, the first cross-encoder; for ``classify``, the first that does not
    score pairs, so a reranker served first does not take a classifier's texts), else the first.
    The server routes by it and the client reads that model's facts by it, so the two agree on the
    model without a name."""
    if task is not None:
        runs = [i for i, facts in enumerate(served) if task in facts.supported_tasks]
        if task == "score":
            runs = [i for i in runs if served[i].score_kind is ScoreKind.CROSS_ENCODER] or runs
        elif task == "classify":
            runs = [i for i in runs if "score" not in served[i].supported_tasks] or runs
        if runs:
            return runs[0]
    return 0


def naming_served(
    refusal: UnsupportedTaskError, answering: ModelFacts, served: Sequence[ModelFacts]
) -> UnsupportedTaskError:
    """``refusal`` (the engine's "this model") naming ``answering`` by its served name and, of several
    ``served``, the others that run the task: a request naming no model reached it unasked. The
    server and the client both say it so, in the same words."""
    return refusal.naming(answering.model_name, task_runners(refusal.task, answering, served))


def task_runners(task: str, answering: ModelFacts, served: Sequence[ModelFacts]) -> list[str] | None:
    """The names of the ``served`` models other than ``answering`` that run ``task``; ``None`` with
    one model served, where a refusal has no other to point to."""
    if len(served) < 2:
        return None
    return [
        facts.model_name
        for facts in served
        if task in facts.supported_tasks and facts.model_name != answering.model_name
    ]


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """The served model, as far as requests and stored vectors depend on it.

    Attributes:
        model_name: the name the model was loaded (or is served) under.
        model_identity: changes whenever the weights do; caches and collections key on it.
        supported_tasks: the pooling tasks this model runs.
        max_model_len: tokens per input.
        embedding_dim: size of ``embed`` (or ColBERT token) vectors before truncation.
        is_matryoshka: whether a prefix of the vector is a meaningful smaller vector.
        matryoshka_dimensions: the sizes the model was trained for (``None``: any size).
        score_kind: how ``score`` works for this model.
        output_fingerprint: digest of the pooler settings that shape outputs (pooling type,
            normalisation, activation, chunked processing); ``model_identity`` covers the weights
            only, and the same weights pooled differently give different vectors.
        normalizes_embeddings: whether ``embed`` returns unit vectors when a request does not say;
            whoever truncates a full vector to a Matryoshka size renormalises by it.
        default_dimensions: the size ``embed`` returns when a request names none (the pooler's
            ``dimensions``); ``None`` is the full ``embedding_dim``.
        prompt_names: the names of the folder's instruction prompts (what ``prompt_name`` may say).
        reads_images: images go wherever texts go (a dual encoder such as CLIP).
    """

    model_name: str
    model_identity: str
    supported_tasks: tuple[PoolingTask, ...]
    max_model_len: int
    embedding_dim: int | None
    is_matryoshka: bool
    matryoshka_dimensions: tuple[int, ...] | None
    score_kind: ScoreKind
    output_fingerprint: str
    normalizes_embeddings: bool
    default_dimensions: int | None
    prompt_names: tuple[str, ...] = ()
    reads_images: bool = False

    def renamed(self, model_name: str) -> ModelFacts:
        """The same model under another name: a server reports its served name, not its folder path.

        ``model_identity`` is ``name@weights``; only the name part changes.
        """
        weights = weights_fingerprint(self.model_identity)
        return replace(self, model_name=model_name, model_identity=model_identity(model_name, weights))

    def to_json(self) -> dict[str, Any]:
        """The wire form (``GET /v1/models`` carries it per served name)."""
        return {
            "model_identity": self.model_identity,
            "supported_tasks": list(self.supported_tasks),
            "max_model_len": self.max_model_len,
            "embedding_dim": self.embedding_dim,
            "is_matryoshka": self.is_matryoshka,
            "matryoshka_dimensions": (
                None if self.matryoshka_dimensions is None else list(self.matryoshka_dimensions)
            ),
            "score_kind": self.score_kind.value,
            "output_fingerprint": self.output_fingerprint,
            "normalizes_embeddings": self.normalizes_embeddings,
            "default_dimensions": self.default_dimensions,
            "prompt_names": list(self.prompt_names),
            "reads_images": self.reads_images,
        }

    @classmethod
    def from_json(cls, model_name: str, data: dict[str, Any]) -> ModelFacts:
        """Facts a server reported; plain values only (nothing here selects code to run)."""
        try:
            dims = data.get("matryoshka_dimensions")
            embedding_dim = data.get("embedding_dim")
            default_dimensions = data.get("default_dimensions")
            return cls(
                model_name=model_name,
                model_identity=str(data["model_identity"]),
                supported_tasks=tuple(str(t) for t in data["supported_tasks"]),
                max_model_len=int(data["max_model_len"]),
                embedding_dim=None if embedding_dim is None else int(embedding_dim),
                is_matryoshka=bool(data["is_matryoshka"]),
                matryoshka_dimensions=None if dims is None else tuple(int(d) for d in dims),
                score_kind=ScoreKind(data["score_kind"]),
                output_fingerprint=str(data["output_fingerprint"]),
                normalizes_embeddings=bool(data["normalizes_embeddings"]),
                default_dimensions=None if default_dimensions is None else int(default_dimensions),
                prompt_names=tuple(str(n) for n in data.get("prompt_names") or ()),
                reads_images=bool(data.get("reads_images", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"the server's model description is incomplete or malformed: {exc}"
            ) from exc


def output_fingerprint(pooler_settings: Mapping[str, object]) -> str:
    """A short stable digest of the pooler settings that decide a model's outputs.

    ``dimensions`` is left out: it only cuts a vector the other settings decide, and
    :attr:`ModelFacts.default_dimensions` reports it.
    """
    shaping = {name: value for name, value in pooler_settings.items() if name != "dimensions"}
    text = json.dumps(shaping, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
