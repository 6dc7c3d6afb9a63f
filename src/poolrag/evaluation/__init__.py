"""Retrieval quality on a user's own data: BEIR-layout datasets and the standard ranking metrics."""

from poolrag.evaluation.beir import BeirDataset, BeirDocument, BeirFormatError, BeirQuery
from poolrag.evaluation.metrics import Qrels, Run, evaluate, ndcg_at_k, recall_at_k, reciprocal_rank_at_k

__all__ = [
    "BeirDataset",
    "BeirDocument",
    "BeirFormatError",
    "BeirQuery",
    "Qrels",
    "Run",
    "evaluate",
    "ndcg_at_k",
    "recall_at_k",
    "reciprocal_rank_at_k",
]
