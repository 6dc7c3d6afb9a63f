#!/usr/bin/env python3
"""Binary index quantization on real FAQ sets: how deep the codes must be searched.

    python benchmarks/real_datasets.py            # once: the sets, under ~/.cache/poolrag/real-data
    python benchmarks/index_quantization.py [--sets debian-faq-en,perlfaq,...]

Each set is ingested as ``poolrag ingest --index-quantization binary --store qdrant-edge`` would
(all-MiniLM-L6-v2, 384 dimensions), and every judged query is searched through the shard's codes
with rescoring at several oversampling factors. Printed: the share of the exact float top 10 each
keeps, which is what ``poolrag.stores.qdrant_points.oversampling`` is chosen by. (int8 is not
measured here: a shard builds int8 codes only for segments past Qdrant's indexing threshold, so on
sets this small it searches the floats; binary codes exist from the first write.)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from common import machine, minilm_path
from real_hybrid import DEFAULT_DATA

from poolrag import Engine
from poolrag.cache import CachedEmbedder, EmbeddingCache
from poolrag.evaluation import BeirDataset
from poolrag.evaluation.run import corpus_documents
from poolrag.ingest import DenseEncoder, IngestPipeline, TokenChunker
from poolrag.stores import open_store
from poolrag.stores.qdrant_points import oversampling

K = 10
FACTORS = (2.0, 4.0, 8.0, 12.0, 16.0, 24.0)
SETS = "debian-faq-en,debian-faq-de,debian-faq-fr,perlfaq,chatterbot-english"


def kept(store, queries: np.ndarray, factor: float) -> float:
    """Mean share of the exact top K among the shard's K hits searched ``factor`` times deeper."""
    import qdrant_edge as qe

    ids = list(store.list_sources())
    stored = store.fetch_vectors(ids)
    matrix = np.stack([stored[i] for i in ids])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    params = qe.SearchParams(quantization=qe.QuantizationSearchParams(rescore=True, oversampling=factor))
    shares = []
    for query in queries:
        exact = {ids[j] for j in np.argsort(-(matrix @ (query / np.linalg.norm(query))))[:K]}
        request = qe.QueryRequest(limit=K, query=qe.Query.Nearest(query.tolist()), params=params)
        found = {str(p.id) for p in store._shard.query(request)}
        shares.append(len(exact & found) / K)
    return float(np.mean(shares))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sets", default=SETS)
    args = parser.parse_args()
    engine = Engine(str(minilm_path()), tune="off")
    print(machine(), "store qdrant-edge, all-MiniLM-L6-v2 (384 dims), k=10")
    print("| set | chunks | quantization | default | " + " | ".join(f"{f:g}×" for f in FACTORS) + " |")
    print("|---|---:|---|---:|" + "---:|" * len(FACTORS))
    for name in args.sets.split(","):
        dataset = BeirDataset(args.data / name)
        qrels = dataset.qrels()
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            with EmbeddingCache(folder / "cache.sqlite") as cache:
                embedder = CachedEmbedder(engine, cache)
                texts = [q.text for q in dataset.queries() if q.id in qrels]
                queries = np.stack(embedder.embed(texts, input_type="query"))
                for quantization in ("binary",):
                    store = open_store("qdrant-edge", quantization, path=str(folder / "edge"))
                    report = IngestPipeline(
                        store,
                        DenseEncoder(embedder),
                        TokenChunker.for_model(engine.tokenizer, engine.facts),
                        checkpoint_dir=folder,
                        progress=False,
                        quantization=quantization,  # type: ignore[arg-type]
                    ).run(corpus_documents(dataset))
                    default = oversampling(store.read_spec())
                    shares = [f"{kept(store, queries, f):.3f}" for f in FACTORS]
                    print(
                        f"| {name} | {report.chunks} | {quantization} | {default:g}× | {' | '.join(shares)} |"
                    )
                    store.close()


if __name__ == "__main__":
    main()
