"""The caller's places of the items in LlamaIndex's ``embed_batch_size`` slices.

``BaseEmbedding.get_text_embedding_batch`` and ``MultiModalEmbedding.get_image_embedding_batch`` cut
the caller's list into slices before this package sees any, so an input the engine refuses is named
by its place in its slice (``input[44]``) unless the slices are counted: this module counts them
during one batch call, so the error names the caller's ``input[300]``.

The sync calls embed the slices in order. The async calls create one task per slice in order (also
with ``num_workers``, whose semaphore lets them in first come, first served), and each slice takes
its places in its task's first step, before it awaits anything, so the places hold there too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from poolrag.errors import InvalidInputError, at_position

#: Where the next slice starts in the caller's list (a one-item list, shared by the tasks an async
#: call starts); ``None`` outside a counted call.
_NEXT_SLICE: ContextVar[list[int] | None] = ContextVar("poolrag_next_slice", default=None)


@contextmanager
def slices_counted(enabled: bool = True) -> Iterator[None]:
    """Count the slices LlamaIndex cuts while the block runs; ``enabled=False`` where they do not
    reach the engine whole and in order (its embeddings cache sends only the misses, its rate
    limiter awaits before a slice starts), and places are then the slice's own."""
    token = _NEXT_SLICE.set([0] if enabled else None)
    try:
        yield
    finally:
        _NEXT_SLICE.reset(token)


@contextmanager
def slice_named(size: int) -> Iterator[None]:
    """An input the engine refuses in the block named by its place in the caller's list, among the
    ``size`` items of the slice now starting (``0..size`` outside a counted call). The places are
    taken on entering the block, before it awaits anything."""
    counter = _NEXT_SLICE.get()
    start = 0 if counter is None else counter[0]
    if counter is not None:
        counter[0] += size
    try:
        yield
    except InvalidInputError as exc:
        raise at_position(exc, range(start, start + size)) from None
