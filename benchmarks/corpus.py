"""A deterministic mixed-length corpus: short queries, sentences and long passages.

Built from a fixed word list with a seeded generator, so every run and every engine sees the
same texts. Word counts are chosen so that, with a BERT WordPiece tokenizer, queries are ~8
tokens, sentences ~20-80 and passages up to ``max_passage_words`` words (~1.3 tokens a word).
"""

from __future__ import annotations

import random

_VOCABULARY = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no will can more "
    "who out its also into other only time new some could these two may first then do any like my now "
    "over such our man me even most made after many before must through back years where much your way "
    "well down should because each just those people how too little state good very make world still "
    "own see men work long get here between both life being under never day same another know while last "
    "might us great old year off come since against go came right used take three himself few house use "
    "during without again place american around however home small found thought went say part once "
    "general high upon school every don does got united left number course war until always away "
    "something fact though water less public put think almost hand enough far took head yet government "
    "system better set told nothing night end why called didn eyes find going look asked later knew point "
    "next program city business give group toward young days let room president side social present "
    "given several order national possible rather second face per among form important often things "
    "early white case john become large big need four within felt along children saw best church ever "
    "least power development light thing seemed family interest want members mind country area others "
    "done turned although open problem god service certain kind different thus began door help means "
    "retrieval embedding vector database search ranking passage query document transformer attention "
    "latency throughput batching tokenizer inference pooling semantic similarity cosine normalization "
    "photosynthesis chlorophyll mitochondria enzyme protein molecule catalyst equilibrium thermodynamics "
    "jurisprudence constitutional legislature amendment parliamentary sovereignty referendum electorate "
    "cryptocurrency blockchain decentralized consensus validator ledger transaction settlement liquidity"
)
_WORDS = tuple(_VOCABULARY.split())
_WEIGHTS = [1.0 / (rank + 8) for rank in range(len(_WORDS))]


def _sentence(rng: random.Random, n_words: int) -> str:
    words = rng.choices(_WORDS, weights=_WEIGHTS, k=n_words)
    out: list[str] = []
    for i, word in enumerate(words):
        out.append(word.capitalize() if i == 0 or out[-1].endswith(".") else word)
        if i < n_words - 1 and rng.random() < 0.06:
            out[-1] += "," if rng.random() < 0.7 else "."
    return " ".join(out) + rng.choice((".", ".", ".", "?", "!"))


def mixed_corpus(n: int = 2000, seed: int = 0, max_passage_words: int = 210) -> list[str]:
    """``n`` texts: 30% queries (3-12 words), 45% sentences (13-100), 25% passages (100-max).

    The default stays within 256 WordPiece tokens (all-MiniLM-L6-v2's limit); ``max_passage_words=
    400`` gives ~500-token passages for 512-token models."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        r = rng.random()
        if r < 0.30:
            words = rng.randint(3, 12)
        elif r < 0.75:
            words = rng.randint(13, 100)
        else:
            words = rng.randint(100, max_passage_words)
        texts.append(_sentence(rng, words))
    return texts


def queries(n: int = 200, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [_sentence(rng, rng.randint(4, 10)) for _ in range(n)]
