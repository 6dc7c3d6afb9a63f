"""The GPU path: packed rows, flash varlen attention, fp16/bf16 — equal to the exact CPU path.

The CPU suite pins every task to transformers / sentence-transformers in fp32; here the same
engines run on a CUDA device and must agree with their own CPU run within half precision. The
conftest hides GPUs from every other test (so the CPU parity suite stays exact on a machine that
has one); run these with ``POOLRAG_TEST_CUDA=1 pytest tests/engine/test_cuda.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from poolrag import Engine
from poolrag.models.packed_attention import (
    AttentionLayout,
    cuda_varlen_attention,
    packed_self_attention,
    pads_attention,
)
from poolrag.testing import engine_internals as internals
from poolrag.testing.tiny_models import (
    ENCODER_ARCHS,
    SENTENCES,
    build_clip,
    build_siglip,
    write_sentence_transformers,
)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU and POOLRAG_TEST_CUDA=1 (see the docstring)"
)

HALF = [torch.float16, torch.bfloat16]
# smallest per-row cosine to the fp32 CPU result: fp16 keeps 11 bits of mantissa, bf16 8
MIN_COSINE = {torch.float16: 0.9995, torch.bfloat16: 0.995, torch.float32: 0.99999}
# very different lengths in one batch, one of them long: varlen attention must keep them apart
MIXED = [*SENTENCES, " ".join(["padding-free batches keep every token real"] * 12), "ok"]


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a.reshape(len(a), -1) if a.ndim > 2 else a
    b = b.reshape(len(b), -1) if b.ndim > 2 else b
    num = (a * b).sum(axis=1)
    return float((num / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).min())


def _st_folder(tiny_model, tmp_path: Path, arch: str) -> Path:
    folder = tmp_path / arch
    shutil.copytree(tiny_model(arch), folder)
    return write_sentence_transformers(folder, pooling="mean")


def test_the_default_device_is_the_gpu_in_half_precision_with_packed_batches(tiny_model) -> None:
    engine = Engine(tiny_model("bert"))
    assert engine.device.type == "cuda"
    assert engine.dtype == (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    runner = internals.runner(engine)
    assert runner.packed and runner.padding_free
    assert not pads_attention(engine.device, engine.dtype)  # flash varlen reads the packed rows


def test_a_packed_forward_never_waits_for_the_gpu(tiny_model) -> None:
    """No device sync inside the forward, so the host queues the next batch while this one runs."""
    engine = Engine(tiny_model("bert"), device="cuda")
    lengths = [5, 17, 1, 9]
    cu = torch.tensor([0, *np.cumsum(lengths)], dtype=torch.int32, device="cuda")
    ids = torch.randint(1000, 2000, (1, sum(lengths)), device="cuda")
    positions = torch.cat([torch.arange(n) for n in lengths])[None].to("cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = internals.loaded_module(engine)(
            input_ids=ids, position_ids=positions, cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=17
        )
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert out.last_hidden_state.shape[:2] == (1, sum(lengths))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_varlen_attention_keeps_packed_sequences_apart(dtype: torch.dtype) -> None:
    heads, head_dim, lengths = 4, 32, [3, 17, 1, 64, 64, 5]
    torch.manual_seed(0)
    qkv = torch.randn(sum(lengths), 3 * heads * head_dim, device="cuda", dtype=dtype)
    layout = AttentionLayout.from_lengths(torch.tensor(lengths, device="cuda"))
    got = packed_self_attention(qkv, layout, heads).float()
    expected = []
    for rows in torch.split(qkv.float(), lengths):
        q, k, v = rows.view(len(rows), 3, heads, head_dim).permute(1, 2, 0, 3)
        expected.append(F.scaled_dot_product_attention(q, k, v).transpose(0, 1).reshape(len(rows), -1))
    tolerance = 2e-3 if dtype is torch.float16 else 1.6e-2
    torch.testing.assert_close(got, torch.cat(expected), rtol=0, atol=tolerance)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_varlen_attention_with_grouped_heads_a_custom_scale_and_a_causal_mask(causal: bool) -> None:
    """What decoders need, whichever keywords the installed ``varlen_attn`` takes."""
    lengths, heads, kv_heads, head_dim, scale = [5, 1, 33], 8, 2, 64, 0.3
    torch.manual_seed(1)
    q = torch.randn(sum(lengths), heads, head_dim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(sum(lengths), kv_heads, head_dim, device="cuda", dtype=torch.bfloat16) for _ in "kv")
    cu = torch.tensor([0, 5, 6, 39], device="cuda", dtype=torch.int32)
    got = cuda_varlen_attention(q, k, v, cu, max(lengths), scale, causal).float()
    expected = []
    for qs, ks, vs in zip(*(torch.split(t.float(), lengths) for t in (q, k, v)), strict=True):
        qs, ks, vs = (t.transpose(0, 1) for t in (qs, ks, vs))  # [heads, L, d]
        out = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=scale, enable_gqa=True)
        expected.append(out.transpose(0, 1))
    torch.testing.assert_close(got, torch.cat(expected), rtol=0, atol=1.6e-2)


@pytest.mark.parametrize("dtype", [*HALF, torch.float32], ids=str)
@pytest.mark.parametrize("arch", ENCODER_ARCHS)
def test_embeddings_match_the_exact_cpu_path(tiny_model, tmp_path, arch: str, dtype: torch.dtype) -> None:
    folder = _st_folder(tiny_model, tmp_path, arch)
    cpu = Engine(folder, device="cpu").embed_array(MIXED)
    gpu = Engine(folder, device="cuda", dtype=dtype).embed_array(MIXED)
    assert gpu.dtype == np.float32 and gpu.shape == cpu.shape
    assert _min_cosine(gpu, cpu) >= MIN_COSINE[dtype]


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_cross_encoder_scores_and_classifier_probabilities_match_the_cpu(tiny_model, dtype) -> None:
    reranker = tiny_model("bert", head="sequence", num_labels=1)
    query, docs = MIXED[0], MIXED[1:]
    cpu = np.array([r.outputs.score for r in Engine(reranker, device="cpu").score(query, docs)])
    gpu = np.array([r.outputs.score for r in Engine(reranker, device="cuda", dtype=dtype).score(query, docs)])
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=0.02 * np.abs(cpu).max() + 1e-3)

    classifier = tiny_model("bert", head="sequence", num_labels=3)
    cpu_p = np.stack([r.outputs.probs for r in Engine(classifier, device="cpu").classify(MIXED)])
    on_gpu = Engine(classifier, device="cuda", dtype=dtype)
    gpu_p = np.stack([r.outputs.probs for r in on_gpu.classify(MIXED)])
    np.testing.assert_allclose(gpu_p.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(gpu_p, cpu_p, rtol=0, atol=0.01)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_token_vectors_match_the_cpu_row_for_row(tiny_model, dtype) -> None:
    folder = tiny_model("bert")
    cpu = Engine(folder, device="cpu").encode(MIXED, "token_embed")
    gpu = Engine(folder, device="cuda", dtype=dtype).encode(MIXED, "token_embed")
    for ours, ref in zip(gpu, cpu, strict=True):
        assert ours.outputs.data.shape == ref.outputs.data.shape
        assert _min_cosine(ours.outputs.data, ref.outputs.data) >= MIN_COSINE[dtype]


def test_real_minilm_on_the_gpu_matches_sentence_transformers_in_fp32(minilm_path) -> None:
    """Real weights: half precision through poolrag stays as close to fp32 as ST's own fp16 does."""
    from sentence_transformers import SentenceTransformer

    texts = [*MIXED, *(f"question {i}: how do pooling models rank passage {i * 7}?" for i in range(40))]
    st = SentenceTransformer(str(minilm_path), device="cuda")
    reference = st.encode(texts, batch_size=16)
    st_half = st.half().encode(texts, batch_size=16)
    floor = min(_min_cosine(st_half, reference), 0.9995)
    for dtype in HALF:
        ours = Engine(minilm_path, device="cuda", dtype=dtype).embed_array(texts)
        cosine = _min_cosine(ours, reference)
        assert cosine >= (floor if dtype is torch.float16 else MIN_COSINE[dtype]), (dtype, cosine, floor)


@pytest.mark.parametrize("builder", ["clip", "siglip"])
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_a_dual_encoder_embeds_texts_and_images_on_the_gpu_as_on_the_cpu(
    tmp_path: Path, minilm_path: Path, builder: str, dtype: torch.dtype
) -> None:
    """Images go through the same half-precision towers: one mixed call on the GPU gives the CPU's
    vectors within half precision, texts and photographs in their order."""
    pytest.importorskip("PIL.Image", reason="images need the images extra (Pillow)")
    samples = Path(pytest.importorskip("matplotlib").get_data_path()) / "sample_data"
    build = {"clip": build_clip, "siglip": build_siglip}[builder]
    folder = build(tmp_path / builder, minilm_path)
    mixed = [samples / "grace_hopper.jpg", "a photograph of an admiral", samples / "logo2.png", "ok"]
    cpu = Engine(folder, device="cpu").embed_array(mixed)
    gpu = Engine(folder, device="cuda", dtype=dtype).embed_array(mixed)
    assert gpu.shape == cpu.shape
    assert _min_cosine(gpu, cpu) >= MIN_COSINE[dtype]
