"""CPU attention for small heads at short lengths: flash SDPA vs the alternatives, per length.

    python benchmarks/attention_kernels.py [--threads 1] [--repeats 15]

One equal-length run of ``n`` sequences (``n × L ≈ 4,096`` tokens, 12 heads) as the native
encoders hand it to attention: a view of the packed ``[T, 3H]`` query/key/value rows. Contenders:

* ``flash``: ``F.scaled_dot_product_attention`` on the views (what ``packed_attention`` runs);
* ``math``: the same call restricted to SDPA's math backend;
* ``bmm``: all heads of all sequences as one batched ``q @ kᵀ``, softmax, ``@ v``.

Prints the median milliseconds per call, GFLOPS and the largest difference to flash.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from common import machine, table
from torch.nn.attention import SDPBackend, sdpa_kernel

Attention = Callable[[torch.Tensor, int, int, int, int], torch.Tensor]


def _views(qkv: torch.Tensor, n: int, length: int, heads: int, dim: int) -> list[torch.Tensor]:
    return list(qkv.view(n, length, 3, heads, dim).permute(2, 0, 3, 1, 4).unbind(0))  # [n, heads, L, d]


def flash(qkv: torch.Tensor, n: int, length: int, heads: int, dim: int) -> torch.Tensor:
    q, k, v = _views(qkv, n, length, heads, dim)
    return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n * length, heads * dim)


def math(qkv: torch.Tensor, n: int, length: int, heads: int, dim: int) -> torch.Tensor:
    with sdpa_kernel(SDPBackend.MATH):
        return flash(qkv, n, length, heads, dim)


def bmm(qkv: torch.Tensor, n: int, length: int, heads: int, dim: int) -> torch.Tensor:
    q, k, v = (x.reshape(n * heads, length, dim) for x in _views(qkv, n, length, heads, dim))
    scores = torch.bmm(q, k.transpose(1, 2)).mul_(dim**-0.5).softmax(-1)
    out = torch.bmm(scores, v).view(n, heads, length, dim)
    return out.transpose(1, 2).reshape(n * length, heads * dim)


CONTENDERS: dict[str, Attention] = {"flash": flash, "math": math, "bmm": bmm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(machine())
    torch.manual_seed(0)
    rows = []
    heads = 12
    for dim in (32, 64):
        for length in (16, 32, 64, 128, 256):
            n = 4096 // length
            qkv = torch.randn(n * length, 3 * heads * dim)
            reference = flash(qkv, n, length, heads, dim)
            times: dict[str, list[float]] = {name: [] for name in CONTENDERS}
            for _ in range(args.repeats + 2):  # interleaved; the first two rounds warm up
                for name, attend in CONTENDERS.items():
                    start = time.perf_counter()
                    attend(qkv, n, length, heads, dim)
                    times[name].append(time.perf_counter() - start)
            flops = 4 * n * heads * length * length * dim
            row: list[object] = [dim, length, n]
            for name, attend in CONTENDERS.items():
                ms = statistics.median(times[name][2:]) * 1e3
                delta = float((attend(qkv, n, length, heads, dim) - reference).abs().max())
                row += [ms, flops / ms / 1e6] + ([delta] if name != "flash" else [])
            rows.append(row)
    headers = ["head_dim", "L", "seqs", "flash ms", "flash GFLOPS", "math ms", "math GFLOPS", "math max |Δ|",
               "bmm ms", "bmm GFLOPS", "bmm max |Δ|"]  # fmt: skip
    print(table(headers, rows))


if __name__ == "__main__":
    main()
