"""Similarity functions for bi-encoder and late-interaction scoring."""
