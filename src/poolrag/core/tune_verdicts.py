"""Autotune verdicts on disk: one small JSON file per model, load settings and machine.

A verdict only ever picks among names poolrag enumerates itself (an implementation, a forward, a
precision); nothing in the file can name code to import or turn on remote code (a compiled path
only reuses a compile bundle this user alone could have written: ``compile.disk_cache``). The file
is read back field by field: the key must equal the one this load computes (a file written for another
model, machine, torch build or thread count is foreign), every name must be one of the enumerated
ones and every number finite. Anything else is ignored with one warning, and the model is tuned
again as if the file were not there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import platform
import stat
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from poolrag.cache_location import partial_path, poolrag_cache_dir
from poolrag.loading.cpu_fast_mode import cpu_flags, onednn_isa_limit

logger = logging.getLogger(__name__)

TUNE_FORMAT = "poolrag-tune"
TUNE_VERSION = 1  # bump when the candidates or the way they are timed change
IMPLS = ("native", "transformers")
FORWARDS = ("eager", "compiled")
PRECISIONS = ("fp32", "bf16", "int8")
STATUSES = ("chosen", "slower", "rejected", "failed")

# the CPU flags that change which kernels (and so which path) win
_ISA_PREFIXES = ("avx", "amx", "fma", "f16c", "sse4")


@lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description(device: torch.device) -> str:
    """The hardware a timing holds for: the GPU's name, or the CPU's model and ISA flags with the
    kernels torch and oneDNN use on it (``ATEN_CPU_CAPABILITY`` and ``ONEDNN_MAX_CPU_ISA`` cap them)."""
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    flags = sorted(f for f in cpu_flags() if f.startswith(_ISA_PREFIXES) or "vnni" in f or "bf16" in f)
    limit = onednn_isa_limit()
    capped = f"; oneDNN capped at {limit}" if limit else ""
    kernels = f"; torch kernels {torch.backends.cpu.get_cpu_capability()}"
    return f"cpu: {_cpu_model()} [{platform.machine()}]; {' '.join(flags)}{capped}{kernels}"


@lru_cache(maxsize=1)
def library_versions() -> str:
    """poolrag's and transformers' versions: which paths exist and how fast each runs change with them."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "none"

    return f"poolrag {of('poolrag')}; transformers {of('transformers')}"


@dataclass(frozen=True, slots=True)
class TuneKey:
    """What a verdict holds for; any field that differs means another file.

    Attributes:
        model_fingerprint: the weights' identity (``core.model_setup.fingerprints``).
        settings: a digest of the load options that change the candidates or their shapes.
        machine: :func:`machine_description`.
        torch_version, threads: the build and the thread count the timings were taken with.
        libraries: :func:`library_versions`.
    """

    model_fingerprint: str
    settings: str
    machine: str
    torch_version: str
    threads: int
    libraries: str = ""
    version: int = TUNE_VERSION

    @staticmethod
    def for_load(model_fingerprint: str, settings: dict[str, Any], device: torch.device) -> TuneKey:
        text = json.dumps(settings, sort_keys=True, default=str)
        return TuneKey(
            model_fingerprint=model_fingerprint,
            settings=hashlib.sha256(text.encode()).hexdigest()[:16],
            machine=machine_description(device),
            torch_version=torch.__version__,
            threads=torch.get_num_threads(),
            libraries=library_versions(),
        )

    def path(self) -> Path:
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:24]
        return poolrag_cache_dir() / "tune" / f"{digest}.json"


@dataclass(frozen=True, slots=True)
class CandidateTiming:
    """One candidate as measured: median seconds per timing batch (None when not timed) and its
    lowest per-row cosine to the reference path's outputs."""

    impl: str
    forward: str
    precision: str
    status: str
    seconds: float | None
    min_cosine: float | None

    @property
    def name(self) -> str:
        return f"{self.impl} {self.forward} {self.precision}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The fastest candidate that agreed with the reference, and everything that was measured.

    Attributes:
        impl, forward: the exact path chosen (``native``/``transformers``, ``eager``/``compiled``).
        fast_mode: ``bf16``/``int8`` when ``cpu_fast_mode="auto"`` measured one faster than exact
            fp32 within its cosine bar, ``fp32`` when none was; None when fast modes were not measured.
        compiled_measured: compiled candidates were timed (``tune="full"`` / ``poolrag tune``).
        candidates: every candidate's timing, exact ones first.
        batch_tokens, passes: the timing batch's size and how many interleaved passes were taken.
        seconds: what the measuring cost (wall clock, model loads and compiles included).
        fast_reference_seconds: the chosen exact path timed again in the fast modes' own passes
            (what their seconds compare with); None when fast modes were not measured.
        fast_forward: how the chosen fast mode runs, ``eager`` or ``compiled`` (int8 on a native
            encoder, timed by ``tune="full"``); files written before it existed read as ``eager``.
        min_rows_per_run: for a native encoder on the CPU, the fewest rows an equal-length run
            must average for attention to take one SDPA call per run rather than padded groups
            (:mod:`poolrag.core.runs_or_groups_tuning`); None for other models and in files
            written before it was measured (measured then at the next load).
    """

    impl: str
    forward: str
    fast_mode: str | None
    compiled_measured: bool
    candidates: tuple[CandidateTiming, ...]
    batch_tokens: int
    passes: int
    seconds: float
    fast_reference_seconds: float | None = None
    fast_forward: str = "eager"
    min_rows_per_run: int | None = None


class _Invalid(ValueError):
    pass


def _name(value: object, allowed: tuple[str, ...], field: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise _Invalid(f"{field} is not one of {', '.join(allowed)}")
    return value


def _number(value: object, field: str, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Invalid(f"{field} is not a finite number")
    return float(value)


def _count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Invalid(f"{field} is not a count")
    return value


def _candidate(raw: object, index: int) -> CandidateTiming:
    if not isinstance(raw, dict):
        raise _Invalid(f"candidate {index} is not an object")
    where = f"candidate {index}"
    return CandidateTiming(
        impl=_name(raw.get("impl"), IMPLS, f"{where} impl"),
        forward=_name(raw.get("forward"), FORWARDS, f"{where} forward"),
        precision=_name(raw.get("precision"), PRECISIONS, f"{where} precision"),
        status=_name(raw.get("status"), STATUSES, f"{where} status"),
        seconds=_number(raw.get("seconds"), f"{where} seconds", optional=True),
        min_cosine=_number(raw.get("min_cosine"), f"{where} min_cosine", optional=True),
    )


def _verdict(raw: dict[str, Any]) -> Verdict:
    candidates = raw.get("candidates")
    if not isinstance(candidates, list):
        raise _Invalid("candidates is not a list")
    fast = raw.get("fast_mode")
    compiled = raw.get("compiled_measured")
    if not isinstance(compiled, bool):
        raise _Invalid("compiled_measured is not true/false")
    return Verdict(
        impl=_name(raw.get("impl"), IMPLS, "impl"),
        forward=_name(raw.get("forward"), FORWARDS, "forward"),
        fast_mode=None if fast is None else _name(fast, PRECISIONS, "fast_mode"),
        compiled_measured=compiled,
        candidates=tuple(_candidate(c, i) for i, c in enumerate(candidates)),
        batch_tokens=_count(raw.get("batch_tokens"), "batch_tokens"),
        passes=_count(raw.get("passes"), "passes"),
        seconds=_number(raw.get("seconds"), "seconds") or 0.0,
        fast_reference_seconds=_number(raw.get("fast_reference_seconds"), "fast_reference_seconds", True),
        fast_forward=_name(raw.get("fast_forward", "eager"), FORWARDS, "fast_forward"),
        min_rows_per_run=_min_rows_per_run(raw.get("min_rows_per_run")),
    )


def _min_rows_per_run(value: object) -> int | None:
    if value is None:
        return None
    rows = _count(value, "min_rows_per_run")
    if rows == 0:
        raise _Invalid("min_rows_per_run is 0")
    return rows


#: a verdict is a few KB; a larger file is not one, and is not read into memory
MAX_VERDICT_BYTES = 1 << 20


def _verdict_bytes(path: Path) -> bytes:
    """The file's bytes, if it is a regular file of a verdict's size: opened without blocking and
    checked before reading, so a named pipe (or a device) at the path cannot hang the load."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as file:
        found = os.fstat(file.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise _Invalid("not a regular file")
        if found.st_size > MAX_VERDICT_BYTES:
            raise _Invalid(f"{found.st_size:,} bytes, larger than any verdict")
        return file.read(MAX_VERDICT_BYTES + 1)


def read_verdict(key: TuneKey) -> Verdict | None:
    """The verdict stored for ``key``; None when there is none, or (with one warning) when the
    file is unreadable, corrupt or written for another key."""
    path = key.path()
    try:
        try:
            raw = json.loads(_verdict_bytes(path))
        except UnicodeDecodeError:  # json reads UTF-8/16/32 bytes; anything else is not a verdict file
            raise _Invalid("not valid JSON (not text)") from None
        if not isinstance(raw, dict) or raw.get("format") != TUNE_FORMAT:
            raise _Invalid(f"not a {TUNE_FORMAT} file")
        if raw.get("key") != asdict(key):
            raise _Invalid("written for another model, machine, library version or thread count")
        verdict = raw.get("verdict")
        if not isinstance(verdict, dict):
            raise _Invalid("verdict is not an object")
        return _verdict(verdict)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:  # JSONDecodeError and _Invalid are ValueErrors
        logger.warning("ignoring tune verdict %s: %s", path, exc)
        return None


def write_verdict(key: TuneKey, verdict: Verdict) -> Path | None:
    """Store ``verdict`` for ``key`` atomically; None (and a warning) when the cache is not writable."""
    path = key.path()
    body = {"format": TUNE_FORMAT, "key": asdict(key), "verdict": asdict(verdict)}
    partial = partial_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(body, indent=1))
        partial.replace(path)
    except OSError as exc:
        logger.warning(
            "tune verdict not saved to %s (%s): the next load measures again (POOLRAG_CACHE_DIR names a "
            "writable folder to keep it)",
            path,
            exc,
        )
        with contextlib.suppress(OSError):  # a full disk's empty file, or one a folder at path refused
            partial.unlink()
        return None
    return path
