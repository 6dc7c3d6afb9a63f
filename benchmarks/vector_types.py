#!/usr/bin/env python3
"""float32 vs float16 vs uint8 collections on real FAQ sets: what storing compact vectors costs.

    python benchmarks/real_datasets.py            # once: the sets, under ~/.cache/poolrag/real-data
    python benchmarks/vector_types.py [--sets debian-faq-en,perlfaq,...] [--store qdrant-edge]

Each set is ingested as ``poolrag ingest --vector-type`` would (all-MiniLM-L6-v2, the real store),
once per type; the uint8 ranges are the corpus's own chunk vectors (what ``poolrag calibrate`` on
the corpus writes). Printed per set: MRR@10 / nDCG@10 of each type, and for uint8 how much of
float32's top 10 chunks the database's first stage holds at a given depth, for the default uint8
query and two others, which is what ``poolrag.stores.vector_types.first_stage_query`` and
``RESCORE_DEPTH`` are chosen by.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from common import machine, minilm_path
from real_hybrid import DEFAULT_DATA, as_run

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.evaluation import BeirDataset, evaluate
from poolrag.evaluation.run import corpus_documents
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker
from poolrag.postprocess.quantization_ranges import QuantizationRanges
from poolrag.postprocess.vector_precision import bucket_steps
from poolrag.stores import open_store
from poolrag.stores import vector_types as vt

K = 10
DEPTHS = (10, 20, 40, 80, 160, 320)


def ingest(engine, cache, dataset, store_kind: str, folder: Path, vector_type: str, ranges=None):
    store = open_store(store_kind, vector_type, path=str(folder / store_kind))
    pipeline = IngestPipeline(
        store,
        DenseEncoder(CachedEmbedder(engine, cache)),
        TokenChunker.for_model(engine.tokenizer, engine.facts),
        checkpoint_dir=folder,
        progress=False,
        vector_type=vector_type,  # type: ignore[arg-type]
        ranges=ranges,
    )
    report = pipeline.run(corpus_documents(dataset))
    return store, report


def _shifted_weights(query: np.ndarray, codec) -> np.ndarray:
    """The first stage's former query: ``q ⊙ step`` shifted onto 0..255 (a bias weighted 1 / step)."""
    weights = query * bucket_steps(codec.ranges)
    return np.round((weights - weights.min()) * (255 / np.ptp(weights))).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sets", default="debian-faq-en,debian-faq-de,debian-faq-fr,perlfaq")
    parser.add_argument("--store", default="qdrant-edge", choices=("qdrant", "qdrant-edge"))
    args = parser.parse_args()
    engine = Engine(str(minilm_path()))
    print(machine(), f"store {args.store}, all-MiniLM-L6-v2, k={K}")
    rows = []
    for name in args.sets.split(","):
        dataset = BeirDataset(args.data / name)
        qrels = dataset.qrels()
        queries = [q for q in dataset.queries() if q.id in qrels]
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            cache = EmbeddingCache(folder / "cache.sqlite")
            vectors = CachedEmbedder(engine, cache).embed([q.text for q in queries], input_type="query")
            stores = {}
            full, report = ingest(engine, cache, dataset, args.store, folder, "float32")
            stores["float32"] = full
            stored = full.fetch_vectors(list(full.list_sources()))  # the corpus's chunk vectors
            matrix = np.stack(list(stored.values()))
            ranges = QuantizationRanges.from_vectors({matrix.shape[1]: matrix})
            stores["float16"], _ = ingest(engine, cache, dataset, args.store, folder, "float16")
            stores["uint8"], _ = ingest(engine, cache, dataset, args.store, folder, "uint8", ranges)
            chunks = K if report.chunks <= report.documents else 3 * K
            scores = {}
            top10 = {}
            for kind, store in stores.items():
                hits = {q.id: store.search(v, chunks) for q, v in zip(queries, vectors, strict=True)}
                top10[kind] = {qid: [h.id for h in found[:K]] for qid, found in hits.items()}
                scores[kind] = evaluate(as_run(hits, chunks), qrels, (K,))
            # The first stage alone: the database's ranking of the uint8 query, DEPTHS deep; the
            # default query and two others it was chosen over.
            spec = stores["uint8"].read_spec()
            codec = spec.stored_vectors
            queries_as = {
                "(q - min q) ⊙ step onto 0..255 (default)": codec.first_stage_query,
                "q ⊙ step shifted onto 0..255": lambda v, c=codec: _shifted_weights(v, c),
                "bucketed like the rows": lambda v, c=codec: c.encode(v[None, :])[0].astype(np.float32),
            }
            held = {}
            for label, as_uint8 in queries_as.items():
                first = {
                    q.id: [
                        h.id
                        for h in stores["uint8"]._search(
                            spec, as_uint8(v / np.linalg.norm(v)), max(DEPTHS), None
                        )
                    ]
                    for q, v in zip(queries, vectors, strict=True)
                }
                held[label] = {
                    d: np.mean([len(set(top10["float32"][q]) & set(first[q][:d])) / K for q in first])
                    for d in DEPTHS
                }
            same = np.mean([top10["uint8"][q] == top10["float32"][q] for q in first])
            for store in stores.values():
                store.close()
            cache.close()
        rows.append((name, report.chunks, len(queries), scores, held, same))
    print()
    print("| set | chunks | queries | MRR@10 float32 | float16 | uint8 | nDCG@10 float32 | float16 | uint8 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, n_chunks, n_queries, scores, _, _ in rows:
        mrr = [f"{scores[t]['mrr@10']:.4f}" for t in vt.VECTOR_TYPES]
        ndcg = [f"{scores[t]['ndcg@10']:.4f}" for t in vt.VECTOR_TYPES]
        print(f"| {name} | {n_chunks} | {n_queries} | {' | '.join(mrr)} | {' | '.join(ndcg)} |")
    print()
    print(
        f"uint8 first stage: share of float32's top {K} chunks among the first N (rescoring default: "
        f"N = max(limit x {vt.RESCORE_DEPTH}, {vt.MIN_CANDIDATES}))"
    )
    print("| set | uint8 query | " + " | ".join(f"N={d}" for d in DEPTHS) + " | top 10 == float32's |")
    print("|---|---|" + "---:|" * (len(DEPTHS) + 1))
    for name, _, _, _, held, same in rows:
        for label, share in held.items():
            print(
                f"| {name} | {label} | " + " | ".join(f"{share[d]:.4f}" for d in DEPTHS) + f" | {same:.3f} |"
            )


if __name__ == "__main__":
    main()
