"""Vectors in the precision and byte order a client asks for (``embed_dtype``, ``endianness``), as
vLLM's embeddings and pooling routes send them: float32, float16, bfloat16 and the two fp8 formats.

numpy has no bfloat16 or fp8: bfloat16 is float32's top half rounded to nearest even, and fp8 goes
through torch's own conversion (the server process has torch loaded), so a value decodes to what
vLLM's client, converting with torch, gets.
"""

from __future__ import annotations

import base64

import numpy as np

#: ``"native"``: x86-64 and ARM servers are little-endian.
_BYTE_ORDERS = {"native": "<", "little": "<", "big": ">"}
_FP8 = {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


def _bfloat16_bits(values: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def stored_values(values: np.ndarray, embed_dtype: str) -> np.ndarray:
    """The values as stored in ``embed_dtype``: bfloat16 and fp8 as their bit patterns."""
    if embed_dtype == "bfloat16":
        return _bfloat16_bits(values)
    if embed_dtype in _FP8:
        import torch

        fp8 = torch.from_numpy(np.ascontiguousarray(values, np.float32)).to(getattr(torch, _FP8[embed_dtype]))
        return fp8.view(torch.uint8).numpy()
    return np.asarray(values, dtype=np.float16 if embed_dtype == "float16" else np.float32)


def wire_bytes(values: np.ndarray, embed_dtype: str, endianness: str) -> bytes:
    """The values' bytes, flattened, in ``embed_dtype`` and byte order."""
    stored = stored_values(values, embed_dtype)
    return stored.astype(stored.dtype.newbyteorder(_BYTE_ORDERS[endianness])).tobytes()


def wire_base64(values: np.ndarray, embed_dtype: str, endianness: str) -> str:
    return base64.b64encode(wire_bytes(values, embed_dtype, endianness)).decode("ascii")
