"""Which language a collection is written in, from its commonest words, when the user did not say.

The hybrid default lets BM25 lead where the dense model does not cover the collection's language
(:mod:`poolrag.stores.language_prior`). Users who do not pass ``--language`` (the default word-piece
analyzer needs none) would otherwise get the English-tuned rule on an Italian FAQ. Function words
(articles, pronouns, auxiliaries) are the most frequent words of any prose and differ by language, so
counting them over the first batch of chunks is a reliable guess for a whole collection; where the
counts do not clearly single out one language (mixed text, code, near-twins such as Danish and
Norwegian, a language without a list here), the answer is ``None`` and the default stays.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping


def _words(listed: str) -> frozenset[str]:
    return frozenset(listed.split())


#: The commonest function words of each language, keyed by the analyzer's language names.
FUNCTION_WORDS: Mapping[str, frozenset[str]] = {
    "english": _words(
        "the of and to in is that it for with as was on are be this by not or from have you what "
        "how do can my your i"
    ),
    "german": _words(
        "der die das und ist nicht ein eine zu den mit von sich des auf für im dem auch es ich wie "
        "sie was wird kann oder wenn werden"
    ),
    "french": _words(
        "le la les et est des un une du que qui pas pour dans en ce il je sur au vous avec ne se "
        "sont mais ou comment"
    ),
    "italian": _words(
        "il di che è e la un una per non sono mi ti con del della gli le lo ma come cosa io tu ho "
        "hai si questo anche più"
    ),
    "spanish": _words(
        "el la los las de que y es en un una por con no para del se lo como qué pero más yo tú eres "
        "estoy mi muy al está"
    ),
    "portuguese": _words(
        "o a os as de que e é um uma do da em não para com por se no na eu você mas como mais meu "
        "isso dos ao está"
    ),
    "dutch": _words(
        "de het een en is van ik te dat die in niet je op zijn met voor er maar wat hoe ben jij ook "
        "als aan dit wel naar"
    ),
    "swedish": _words(
        "och att det som en är på av för med den till inte har jag du om ett vad hur men kan var så vi"
    ),
    "danish": _words(
        "og at det er en til på af for med den ikke har jeg du som de et hvad hvordan men kan var så vi"
    ),
    "norwegian": _words(
        "og at det er en til på av for med den ikke har jeg du som de et hva hvordan men kan var så vi"
    ),
    "finnish": _words(
        "ja on ei se että olen oli ovat mitä kuin mutta hän minä sinä tämä joka myös niin kun jos ole voi sen"
    ),
    "russian": _words("и в не на что я с он как а это по но ты к у же вы за бы мне так его был она"),
}

#: Words looked at: enough for the counts to settle, few enough to cost nothing.
SAMPLE_WORDS = 5000
#: The winner's share of all words, and its lead over the runner-up, below which the guess is None.
MIN_SHARE = 0.10
MIN_LEAD = 1.25

_WORD = re.compile(r"\w+")


def detect_language(texts: Iterable[str]) -> str | None:
    """The analyzer language name (a key of :data:`FUNCTION_WORDS`) that ``texts`` are written in, or
    ``None`` when the function words do not single one out."""
    words: list[str] = []
    for text in texts:
        words += _WORD.findall(text.casefold())
        if len(words) >= SAMPLE_WORDS:
            break
    words = words[:SAMPLE_WORDS]
    if not words:
        return None
    shares = sorted(
        (
            (sum(word in vocabulary for word in words) / len(words), name)
            for name, vocabulary in FUNCTION_WORDS.items()
        ),
        reverse=True,
    )
    (best, name), (second, _) = shares[0], shares[1]
    if best < MIN_SHARE or best < MIN_LEAD * second:
        return None
    return name
