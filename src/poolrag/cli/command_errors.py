"""How a command ends on a user's mistake or a store's fault: one line on stderr and a documented
exit code, never a traceback."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import TYPE_CHECKING

from poolrag.errors import DimensionsError, PoolragError

if TYPE_CHECKING:
    from poolrag.model_facts import ModelFacts

EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_STORE_WRITE = 4  # the store's disk refused a write: full, size limit, read-only, permission


def setup_logging(verbose: bool, quiet: bool = False) -> None:
    """Log lines on stderr (INFO with ``--verbose``); ``--quiet`` also silences the progress bars of
    the hub client and transformers (loading weights), which read this before they are imported."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    # faiss (Milvus Lite's) tells at INFO which CPU build it could not load before the one it did:
    # lines that read as errors to a user who asked for poolrag's own
    logging.getLogger("faiss").setLevel(logging.WARNING)
    if quiet:
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    else:  # a first load times the model's paths: one line says so (and one what was chosen)
        logging.getLogger("poolrag.core.autotune.progress").setLevel(logging.INFO)
        # a load is seconds to minutes of silence a user at a terminal cannot tell from a hang: one
        # line names the model; piped (CI, scripts), stderr keeps to errors, a failure's one line
        if sys.stderr.isatty():
            logging.getLogger("poolrag.core.engine_build.progress").setLevel(logging.INFO)


def log_at(level: str) -> None:
    """Timestamped log lines on stderr at a ``--log-level`` (``serve``, ``tune``: long runs whose
    lines are read by when they came)."""
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def log_lines_above_bars() -> contextlib.AbstractContextManager[None]:
    """While a command draws progress bars, a log line (a file skipped, a first load's verdict)
    clears the bar, is written, and the bar is drawn again below it; without this a terminal showed
    the line glued to the end of the half-drawn bar."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    return logging_redirect_tqdm()


def report_error(command: str, exc: BaseException) -> int:
    """One line on stderr naming what went wrong; exit 3 for a database that is down (or an
    embedding cache, or an ingest's checkpoint, another process holds), 4 for a store (or the
    embedding cache, or a run's scratch database) whose disk refused a write, else 2."""
    from poolrag.cache.recovery import CacheBusyError, CacheWriteError
    from poolrag.ingest.run_lock import IngestRunningError
    from poolrag.ingest.scratch_space import ScratchSpaceError
    from poolrag.stores import StoreUnavailableError
    from poolrag.stores.storage_faults import StoreWriteError

    if isinstance(exc, (StoreWriteError, CacheWriteError, ScratchSpaceError)):
        print(f"poolrag {command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_STORE_WRITE
    if isinstance(exc, OSError) and not isinstance(exc, StoreUnavailableError) and exc.filename:
        message = f"{exc.filename}: {exc.strerror or exc}"
    else:
        message = str(exc) or type(exc).__name__
    print(f"poolrag {command}: error: {' '.join(message.split())}", file=sys.stderr)
    busy = (StoreUnavailableError, CacheBusyError, IngestRunningError)
    return EXIT_UNAVAILABLE if isinstance(exc, busy) else EXIT_BAD_INPUT


def user_errors() -> tuple[type[BaseException], ...]:
    """What a command reports as one line instead of a traceback: poolrag's own errors and the
    operating system's (a path that cannot be read or written)."""
    return (PoolragError, OSError)


def dimensions_flag_error(width: int, facts: ModelFacts, refusal: Exception) -> DimensionsError:
    """The engine's refusal of ``--dimensions width``, said as the CLI's flags: a width below a plain
    embedder's full size names ``--assume-matryoshka``, the CLI's own way to declare a model
    Matryoshka (``ingest`` and ``calibrate`` take it)."""
    if facts.is_matryoshka or not 0 < width < (facts.embedding_dim or 0):
        return DimensionsError(f"--dimensions {width}: {refusal}")
    return DimensionsError(
        f"--dimensions {width}: this model is not a Matryoshka model, so its vectors cannot be truncated "
        f"meaningfully; leave out --dimensions (full size is {facts.embedding_dim}), or add "
        "--assume-matryoshka only if the model was trained for it"
    )
