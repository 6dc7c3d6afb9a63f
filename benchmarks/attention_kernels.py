"""CPU attention for small heads at short lengths: flash SDPA vs the alternatives, per length.

    python benchmarks/attention_kernels.py [--threads 1] [--repeats 15] [--tables kernels,layouts,projection]

One equal-length run of ``n`` sequences (``n × L ≈ 4,096`` tokens, 12 heads) as the native
encoders hand it to attention: a view of the packed ``[T, 3H]`` query/key/value rows.

``kernels``: what one run costs, from the packed rows to ``[T, H]`` output rows:

* ``flash``: ``F.scaled_dot_product_attention`` on the views; its output memory is already
  ``[n, L, heads, d]``, so the ``[T, H]`` rows are a view of it (one run: no copy);
* ``flash+rows``: the same, copied into preallocated ``[T, H]`` rows (what ``packed_attention``
  does for each run when a batch has several);
* ``head-major``: the rows first copied to ``[3·heads, T, d]`` so that each head's rows are
  contiguous, then flash (the relayout included);
* ``math``: SDPA restricted to its math backend;
* ``bmm``: all heads of all sequences as one batched ``q @ kᵀ``, softmax, ``@ v``.

``layouts``: the flash kernel alone on query/key/value already in each memory layout (nothing
copied in the timed call), next to the two copies that moving between layouts costs; it says how
much a layout would be worth if the projection could produce it for free.

``projection``: QKV projection plus attention, since a layout only helps if the matmul writes it:
the fused oneDNN ``[T, 3H]`` matmul + flash on the views, against one batched matmul per head
(weights permuted head-major once) writing ``[3·heads, T, d]`` + flash.

Prints median milliseconds per call (contenders interleaved) and the largest difference to flash.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from common import machine, table
from torch.nn.attention import SDPBackend, sdpa_kernel

Attention = Callable[[torch.Tensor, int, int, int, int], torch.Tensor]
HEADS = 12
TOKENS = 4096


def _views(qkv: torch.Tensor, n: int, length: int, heads: int, dim: int) -> list[torch.Tensor]:
    return list(qkv.view(n, length, 3, heads, dim).permute(2, 0, 3, 1, 4).unbind(0))  # [n, heads, L, d]


def _head_major_views(major: torch.Tensor, n: int, length: int, heads: int, dim: int) -> list[torch.Tensor]:
    """``[3·heads, T, d]`` → q, k, v as ``[n, heads, L, d]`` whose rows of one head are contiguous."""
    return list(major.view(3, heads, n, length, dim).transpose(1, 2).unbind(0))


def _head_major(qkv: torch.Tensor, heads: int, dim: int) -> torch.Tensor:
    return qkv.view(qkv.shape[0], 3 * heads, dim).transpose(0, 1).contiguous()


def flash(qkv: torch.Tensor, n: int, length: int, heads: int, dim: int) -> torch.Tensor:
    q, k, v = _views(qkv, n, length, heads, dim)
    return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n * length, heads * dim)


def flash_rows(qkv: torch.Tensor, n: int, length: int, heads: int, dim: int) -> torch.Tensor:
    out = qkv.new_empty(n * length, heads * dim)
    q, k, v = _views(qkv, n, length, heads, dim)
    out.view(n, length, heads, dim).copy_(F.scaled_dot_product_attention(q, k, v).transpose(1, 2))
    return out


def head_major(qkv: torch.Tensor, n: int, length: int, heads: int, dim: int) -> torch.Tensor:
    q, k, v = _head_major_views(_head_major(qkv, heads, dim), n, length, heads, dim)
    return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n * length, heads * dim)


def math(qkv: torch.Tensor, n: int, length: int, heads: int, dim: int) -> torch.Tensor:
    with sdpa_kernel(SDPBackend.MATH):
        return flash(qkv, n, length, heads, dim)


def bmm(qkv: torch.Tensor, n: int, length: int, heads: int, dim: int) -> torch.Tensor:
    q, k, v = (x.reshape(n * heads, length, dim) for x in _views(qkv, n, length, heads, dim))
    scores = torch.bmm(q, k.transpose(1, 2)).mul_(dim**-0.5).softmax(-1)
    out = torch.bmm(scores, v).view(n, heads, length, dim)
    return out.transpose(1, 2).reshape(n * length, heads * dim)


CONTENDERS: dict[str, Attention] = {
    "flash": flash,
    "flash+rows": flash_rows,
    "head-major": head_major,
    "math": math,
    "bmm": bmm,
}


def _medians_ms(calls: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median ms per call, the calls interleaved; the first two rounds warm up."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats + 2):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts[2:]) * 1e3 for name, ts in times.items()}


def _shapes(dims: tuple[int, ...]) -> list[tuple[int, int, int]]:
    return [(dim, length, TOKENS // length) for dim in dims for length in (16, 32, 64, 128, 256)]


def _kernels_row(dim: int, length: int, n: int, repeats: int) -> list[object]:
    qkv = torch.randn(n * length, 3 * HEADS * dim)
    reference = flash(qkv, n, length, HEADS, dim)
    calls = {name: partial(attend, qkv, n, length, HEADS, dim) for name, attend in CONTENDERS.items()}
    ms = _medians_ms(calls, repeats)
    row: list[object] = [dim, length, n, ms["flash"]]
    for name, call in list(calls.items())[1:]:
        row += [ms[name], ms[name] / ms["flash"], float((call() - reference).abs().max())]
    return row


def kernels_table(repeats: int) -> str:
    headers = ["head_dim", "L", "seqs", "flash ms"]
    for name in list(CONTENDERS)[1:]:
        headers += [f"{name} ms", f"{name} / flash", f"{name} max |Δ|"]
    return table(headers, [_kernels_row(*shape, repeats) for shape in _shapes((32, 64))])


def _layouts_row(dim: int, length: int, n: int, repeats: int) -> list[object]:
    tokens, hidden = n * length, HEADS * dim
    qkv = torch.randn(tokens, 3 * hidden)
    packed = _views(qkv, n, length, HEADS, dim)  # rows 3H apart
    by_projection = qkv.view(tokens, 3, hidden).transpose(0, 1).contiguous()  # [3, T, H]
    split = [x.view(n, length, HEADS, dim).transpose(1, 2) for x in by_projection.unbind(0)]  # rows H apart
    major = _head_major_views(_head_major(qkv, HEADS, dim), n, length, HEADS, dim)  # rows d apart
    out = qkv.new_empty(tokens, hidden)
    attended = F.scaled_dot_product_attention(*packed)

    def into_rows() -> None:
        out.view(n, length, HEADS, dim).copy_(attended.transpose(1, 2))

    ms = _medians_ms(
        {
            "packed": partial(F.scaled_dot_product_attention, *packed),
            "split": partial(F.scaled_dot_product_attention, *split),
            "head-major": partial(F.scaled_dot_product_attention, *major),
            "relayout copy": partial(_head_major, qkv, HEADS, dim),
            "output copy": into_rows,
        },
        repeats,
    )
    delta = max(float((F.scaled_dot_product_attention(*x) - attended).abs().max()) for x in (split, major))
    return [dim, length, n, ms["packed"], ms["split"], ms["head-major"], ms["head-major"] / ms["packed"],
            ms["relayout copy"], ms["output copy"], delta]  # fmt: skip


def layouts_table(repeats: int) -> str:
    headers = ["head_dim", "L", "seqs", "packed [T,3H] ms", "split [3,T,H] ms", "head-major [3·heads,T,d] ms",
               "head-major / packed", "relayout copy ms", "output copy ms", "max |Δ|"]  # fmt: skip
    return table(headers, [_layouts_row(*shape, repeats) for shape in _shapes((32,))])


def _projection_row(dim: int, length: int, n: int, repeats: int) -> list[object]:
    from poolrag.models.fused_linear import FusedLinear

    tokens, hidden = n * length, HEADS * dim
    weight = torch.randn(3 * hidden, hidden) * hidden**-0.5
    bias = torch.randn(3 * hidden) * 0.02
    fused = FusedLinear(hidden, 3 * hidden)
    fused.linear.weight.copy_(weight)
    fused.linear.bias.copy_(bias)
    fused.pack()
    # the same weights, permuted head-major once: [3·heads, H, d] and a [3·heads, 1, d] bias
    per_head = weight.view(3 * HEADS, dim, hidden).transpose(1, 2).contiguous()
    per_head_bias = bias.view(3 * HEADS, 1, dim)
    x = torch.randn(tokens, hidden)

    def fused_flash() -> torch.Tensor:
        return flash(fused(x), n, length, HEADS, dim)

    def per_head_flash() -> torch.Tensor:
        major = torch.baddbmm(per_head_bias, x.expand(3 * HEADS, tokens, hidden), per_head)
        q, k, v = _head_major_views(major, n, length, HEADS, dim)
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(tokens, hidden)

    ms = _medians_ms({"fused": fused_flash, "per-head": per_head_flash}, repeats)
    delta = float((per_head_flash() - fused_flash()).abs().max())
    return [dim, length, n, ms["fused"], ms["per-head"], ms["per-head"] / ms["fused"], delta]


def projection_table(repeats: int) -> str:
    headers = ["head_dim", "L", "seqs", "fused [T,3H] matmul + flash ms", "per-head matmul + flash ms",
               "per-head / fused", "max |Δ|"]  # fmt: skip
    return table(headers, [_projection_row(*shape, repeats) for shape in _shapes((32,))])


TABLES = {"kernels": kernels_table, "layouts": layouts_table, "projection": projection_table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--tables", default=",".join(TABLES), help=f"comma-separated, of {', '.join(TABLES)}")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(machine())
    torch.manual_seed(0)
    with torch.inference_mode():
        for name in args.tables.split(","):
            print(f"\n{name}\n{TABLES[name](args.repeats)}", flush=True)


if __name__ == "__main__":
    main()
