"""What one :class:`~poolrag.EngineArgs` builds: the model folder resolved, the pipeline loaded as
the tune verdict chose, and the facts callers may know.

The engine is built from one checked value, and only this module reads it, in the order the
errors should come: a bad score template or device is one line before a hub download, an
unsupported task is refused before a fast mode is measured.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import cast

import torch

from poolrag.batching.token_budget import default_batch_tokens
from poolrag.config.model_spec import ModelSpec, load_model_spec, with_hub_id_rules
from poolrag.config.pooler_config import PoolerConfig
from poolrag.config.resolve import resolve_model_path, resolve_tokenizer_folder
from poolrag.core.autotune import TunedLoad, TuneRequest, load_tuned, resolve_tune_mode
from poolrag.core.model_setup import TOKENIZER_SUFFIXES, Pipeline, build_pipeline, fingerprints
from poolrag.core.speed_plan import apply_plan
from poolrag.engine_args import EngineArgs
from poolrag.errors import InvalidInputError, UnsupportedTaskError
from poolrag.loading.cpu_fast_mode import FastModeReport, check_fast_mode_dtype
from poolrag.loading.dtype import dtype_for_model, resolve_device, resolve_dtype
from poolrag.loading.forked_threads import one_thread_if_forked
from poolrag.loading.native_loader import ModelImpl
from poolrag.loading.placement import Placement
from poolrag.model_facts import ModelFacts, model_identity, note_earlier_fingerprints, output_fingerprint
from poolrag.tokenization.score_template import ScoreTemplate, load_score_template
from poolrag.worker_threads import quota_threads_taken

#: the line said before a model loads: a hub download or gigabytes of weights read are minutes of
#: silence otherwise (``poolrag serve`` shows it at its default level, the other commands at a terminal)
PROGRESS_LOGGER = f"{__name__}.progress"
progress = logging.getLogger(PROGRESS_LOGGER)
logger = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class BuiltEngine:
    """Everything an engine serves with, built from its :class:`~poolrag.EngineArgs`.

    Attributes:
        task: the primary task (the args' own, checked, else the pooler config's, else the model's first).
        tuned: the pipeline to serve with, its speed plan (applied) and what is still to start
            (compile, background tune).
        fast_mode_report: the CPU fast mode's measured accuracy (None: exact, none asked).
    """

    spec: ModelSpec
    device: torch.device
    dtype: torch.dtype
    score_template: ScoreTemplate | None
    tuned: TunedLoad
    facts: ModelFacts
    task: str
    fast_mode_report: FastModeReport | None

    @property
    def pipeline(self) -> Pipeline:
        return self.tuned.pipeline


def build_engine(args: EngineArgs) -> BuiltEngine:
    """Resolve ``args``' model, build its pipeline (tuned), and say what it is."""
    template = load_score_template(args.score_template) if args.score_template is not None else None
    device = resolve_device(args.device)  # before a hub id is fetched: a device it cannot use is one line
    dtype = resolve_dtype(args.dtype, device)  # so is a dtype no model runs in
    check_fast_mode_dtype(args.cpu_fast_mode, dtype, device)
    hub = {"download_dir": args.download_dir, "hf_token": args.hf_token}
    progress.info("loading %s on %s", args.model, device)
    path = resolve_model_path(args.model, args.revision, **hub)
    # a tokenizer of its own, or the model's at another revision (vLLM's tokenizer_revision)
    tokenizer_path = (
        None
        if args.tokenizer is None and args.tokenizer_revision is None
        else str(resolve_tokenizer_folder(args.tokenizer or args.model, args.tokenizer_revision, **hub))
    )
    spec = with_hub_id_rules(
        load_model_spec(path, args.hf_overrides, args.trust_remote_code, args.convert), args.model
    )
    dtype = dtype_for_model(dtype, args.dtype, str(getattr(spec.hf_config, "model_type", "")))
    quota_threads_taken()  # the CLI's process under a CPU quota: before the verdict keyed by the count
    with one_thread_if_forked():  # a forked worker's loading ops would wait on its parent's threads
        tuned = _tuned_pipeline(args, spec, device, dtype, tokenizer_path)
    facts = _facts(args.model, spec, tuned.pipeline, tokenizer_path)
    _say_raised_batch_budget(args.max_batch_tokens, facts.max_model_len)
    if args.task is not None and args.task not in facts.supported_tasks:
        raise UnsupportedTaskError(args.task, facts.supported_tasks)
    pooled_for = tuned.pipeline.pooler_config.task
    if args.task is not None and pooled_for is not None and args.task != pooled_for:
        raise InvalidInputError(
            f"task {args.task!r} and pooler_config task {pooled_for!r} disagree: give one of them"
        )
    fast_report = apply_plan(tuned.pipeline, tuned.plan, args.cpu_fast_mode_min_cosine, tuned.fast_report)
    task = args.task or pooled_for or facts.supported_tasks[0]
    return BuiltEngine(spec, device, dtype, template, tuned, facts, task, fast_report)


def _say_raised_batch_budget(given: int | None, max_len: int) -> None:
    """A batch budget given below the model's length is raised to it (a full-length input runs in a
    batch of its own); said, since the caller sized memory by it, and TEI's --max-batch-tokens cuts
    inputs to it instead."""
    if given is not None and given < max_len:
        logger.warning(
            "max_batch_tokens=%d is below the model's length of %d tokens: a forward pass takes up to %d "
            "(one full-length input); max_model_len=%d cuts inputs to %d tokens instead, as TEI's "
            "--max-batch-tokens does",
            given,
            max_len,
            max_len,
            given,
            given,
        )


def _tuned_pipeline(
    args: EngineArgs, spec: ModelSpec, device: torch.device, dtype: torch.dtype, tokenizer_path: str | None
) -> TunedLoad:
    """The pipeline built with the implementation the tune verdict chose (timed now on a first load)."""
    pooler = PoolerConfig.from_value(args.pooler_config)
    placement = Placement(args.device_map, args.quantization)
    batch_tokens = args.max_batch_tokens or default_batch_tokens(device)
    # once: every candidate and the verdict's key take it; the digests older poolrags took of the same
    # files still name these weights (a collection they wrote records one)
    model_fingerprint, earlier = fingerprints(spec)
    note_earlier_fingerprints(model_fingerprint, earlier)

    def build(impl: ModelImpl) -> Pipeline:
        return build_pipeline(
            spec,
            pooler,
            dtype=dtype,
            device=device,
            max_model_len=args.max_model_len,
            max_batch_tokens=batch_tokens,
            max_batch_size=args.max_batch_size,
            trust_remote_code=args.trust_remote_code,
            tokenizer_path=tokenizer_path,
            placement=placement,
            model_impl=impl,
            model_fingerprint=model_fingerprint,
        )

    model_impl = cast(ModelImpl, args.model_impl)
    settings = {  # what changes the candidates' shapes: part of the verdict's key
        "dtype": str(dtype),
        "max_model_len": args.max_model_len,
        "max_batch_tokens": batch_tokens,
        "max_batch_size": args.max_batch_size,
        "pooler_config": repr(pooler),
        "tokenizer": args.tokenizer,
        "tokenizer_revision": args.tokenizer_revision,
        "model_impl": model_impl,
    }
    request = TuneRequest(
        resolve_tune_mode(args.tune),
        args.model,
        model_impl,
        args.compile,
        args.cpu_fast_mode,
        args.cpu_fast_mode_min_cosine,
        settings,
    )
    return load_tuned(build, model_fingerprint, device, request, batch_tokens, placement.places_itself)


def _facts(model_name: str, spec: ModelSpec, pipeline: Pipeline, tokenizer_path: str | None) -> ModelFacts:
    pooler = pipeline.pooler_config
    return ModelFacts(
        model_name=model_name,
        model_identity=model_identity(model_name, pipeline.fingerprint),
        supported_tasks=pipeline.supported_tasks,
        max_model_len=pipeline.max_model_len,
        embedding_dim=pipeline.embedding_dim,
        is_matryoshka=spec.is_matryoshka,
        matryoshka_dimensions=spec.matryoshka_dimensions,
        score_kind=pipeline.score_kind,
        output_fingerprint=output_fingerprint(
            # every pooler setting but task, which decides what score computes and changes no vector
            # (so a config without it keys where it always did)
            {name: value for name, value in asdict(pooler).items() if name != "task"}
            | _tokenizer_shaping(tokenizer_path)
            # a caller's normalise switch decides token_embed's vectors too: switched off (they are
            # normalised by default) it keys apart, else keys stay where they were
            | ({"token_normalize": False} if pipeline.token_normalize is False else {})
            # a folder pooled without its prompt (its config, or INSTRUCTOR's hub id) keys apart
            | ({} if spec.include_prompt else {"include_prompt": False})
        ),
        normalizes_embeddings=bool(pooler.normalize),
        default_dimensions=pooler.dimensions,
        prompt_names=tuple(spec.prompts),
        reads_images=pipeline.processor.images is not None,
    )


def _tokenizer_shaping(folder: str | None) -> dict[str, str]:
    """A tokenizer other than the folder's own decides the token ids, so the vectors: its files'
    digest goes into the outputs' fingerprint (caches and collections key on it); the folder's
    own adds nothing, so existing keys stay where they are."""
    if folder is None:
        return {}
    digest = hashlib.sha256()
    for path in sorted(Path(folder).glob("*")):
        if path.is_file() and path.suffix in (".json", *TOKENIZER_SUFFIXES):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return {"tokenizer": digest.hexdigest()[:16]}
