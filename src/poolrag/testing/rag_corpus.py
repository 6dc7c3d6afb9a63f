"""A small corpus with one clearly relevant document per query (and near misses), shared by the
adapter tests of both frameworks to check ranking against the engine's own scores."""

from __future__ import annotations

API_KEY = "integrations-key-51c2"

#: A small corpus with one clearly relevant document per query (and near misses), for ranking.
CORPUS = [
    ("Paris is the capital and largest city of France.", {"topic": "geography", "year": 2020}),
    ("Berlin is the capital of Germany and its most populous city.", {"topic": "geography", "year": 2021}),
    ("The mitochondrion is the powerhouse of the cell, producing ATP.", {"topic": "biology", "year": 2020}),
    (
        "Photosynthesis converts sunlight, water and carbon dioxide into glucose.",
        {"topic": "biology", "year": 2022},
    ),
    (
        "Python is a high-level programming language known for its readability.",
        {"topic": "computing", "year": 2021},
    ),
    ("A hash table maps keys to values using a hash function.", {"topic": "computing", "year": 2022}),
    ("The Pacific Ocean is the largest and deepest ocean on Earth.", {"topic": "geography", "year": 2022}),
    ("Bread is baked from flour, water, yeast and salt.", {"topic": "cooking", "year": 2020}),
]
TEXTS = [text for text, _ in CORPUS]
METADATAS = [meta for _, meta in CORPUS]
#: query -> index in CORPUS of the document that answers it
QUERIES = {
    "What is the capital of France?": 0,
    "Which organelle produces energy in cells?": 2,
    "Which programming language is easy to read?": 4,
    "How do plants make sugar from light?": 3,
}
