"""What loading made, left out of Python's cyclic garbage collection in a long-running process.

Loading torch, transformers and a model leaves some 350k objects that live as long as the process.
Each full collection walks all of them, ~0.2 s with the GIL held, every few seconds of steady work:
the p99 of a busy server was those pauses (benchmarks/RESULTS.md). A server, an ingest run and a Ray
actor or replica freeze them once their models are loaded, as vLLM's server does; objects freed by
their reference counts are freed as before. One-shot commands (``search``) do not: the collection
the freeze starts with costs more than they would save.
"""

from __future__ import annotations

import gc


def freeze_loaded_objects() -> None:
    """Collect what loading left unreachable, then freeze every object alive now."""
    gc.collect()
    gc.freeze()
