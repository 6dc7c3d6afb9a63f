"""A small BEIR-layout dataset on which dense and lexical retrieval each fail half the time.

``write(folder, seed)`` writes ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv``
(~300 documents, 60 queries, one relevant document each), for ``poolrag eval`` to compare
dense, sparse and hybrid retrieval; ``python benchmarks/hybrid_dataset.py OUT_DIR`` is its command.

Two kinds of query, 30 each, marked in the query's ``metadata.kind``:

- ``rare-term``: the answer hinges on an exact string — a part number or a person's made-up
  surname — in a catalogue or staff directory whose entries read alike apart from that string.
  A dense model sees near-identical sentences; BM25 sees the one document holding the string.
- ``paraphrase``: the answer says the same thing as the query in other words, and a decoy
  document reuses the query's words about something else. BM25 prefers the decoy; a dense model
  matches the meaning.

Filler notes on unrelated topics bring the corpus to ~300. Everything is drawn from a seeded
generator, so a seed always gives the same files byte for byte. It ships in poolrag.testing because
the tests of poolrag and of its partner packages tune hybrid fusion on it.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# (query, answer that shares no content word with it, decoy that shares its words but not its meaning)
PARAPHRASES: tuple[tuple[str, str, str], ...] = (
    (
        "How do I get back into my account after I forgot my login details?",
        (
            "Lost your password? Press the recovery link on the sign-in page and a reset "
            "email arrives within minutes."
        ),
        (
            "Login details for the shared account are printed on the back of the badge; "
            "staff who forgot them ask reception."
        ),
    ),
    (
        "What should I do when my car battery is dead?",
        (
            "If the vehicle will not start and the dashboard stays dark, jump-start it with "
            "cables from another automobile."
        ),
        "A dead phone battery left in a hot car can swell, so do not charge it and recycle it instead.",
    ),
    (
        "Which foods help lower cholesterol?",
        "Oats, beans, nuts and oily fish reduce LDL levels in the blood when eaten regularly.",
        (
            "Cholesterol tests help doctors judge which foods a patient ate; readings are "
            "lower before breakfast."
        ),
    ),
    (
        "How can I stop my laptop from overheating?",
        (
            "Keep the notebook on a hard surface, clean dust from the vents and raise its "
            "back so air circulates."
        ),
        "Overheating at the laptop repair desk: staff can stop a queue by booking slots online.",
    ),
    (
        "When is the best time to plant tulip bulbs?",
        "Put them in the ground in autumn, six to eight weeks before the soil freezes.",
        "Tulip bulbs are the best time of the year for the flower market; plant sellers open early.",
    ),
    (
        "Why does my baby cry at night?",
        "Infants often wake after dark because they are hungry, teething or need a fresh nappy.",
        "The night nurse explained why a baby monitor may cry out with static when batteries run low.",
    ),
    (
        "How much water should an adult drink each day?",
        "Grown-ups need roughly two to three litres of fluid daily, more in hot weather or during exercise.",
        "Each day the adult swimming class must drink from the fountain because bottles of water are banned.",
    ),
    (
        "What causes a headache after drinking coffee?",
        (
            "Caffeine narrows blood vessels in the brain and, when it wears off, the rebound "
            "can bring head pain."
        ),
        "Drinking coffee after the meeting causes a headache for the cleaners, who wash every mug by hand.",
    ),
    (
        "How do I remove a red wine stain from a carpet?",
        "Blot the spill at once, cover it with salt or baking soda, then dab with cold soapy water.",
        (
            "The red carpet at the wine festival had a stain, so organisers decided to "
            "remove it before the guests came."
        ),
    ),
    (
        "Can dogs eat chocolate safely?",
        (
            "No: cocoa contains theobromine, which pets cannot break down and which poisons "
            "them even in small amounts."
        ),
        (
            "Chocolate dogs made of marzipan are safely sold at the bakery, and children can "
            "eat them on holidays."
        ),
    ),
    (
        "How do I fix a leaking kitchen tap?",
        "Turn off the supply under the sink, unscrew the handle and replace the worn washer or cartridge.",
        "The kitchen staff fix the leaking dishwasher every week; the tap water bill keeps growing.",
    ),
    (
        "Why is the sky blue during the day?",
        (
            "Air molecules scatter short wavelengths of sunlight far more than long ones, so "
            "that colour fills the heavens."
        ),
        "Blue Sky Day is the name of the school festival held during the spring term.",
    ),
    (
        "What is the fastest way to learn a new language?",
        (
            "Daily conversation with native speakers plus spaced repetition of vocabulary "
            "brings fluency quickest."
        ),
        "The fastest new way to learn to drive is a language of signals the instructor taught on the track.",
    ),
    (
        "How do I get rid of ants in my house?",
        (
            "Seal the cracks they enter through, wipe away sugary spills and set bait "
            "stations along their trails."
        ),
        "My aunt wants to get rid of the old house, and the ants in the garden are the least of her worries.",
    ),
    (
        "How long should I boil an egg for a soft yolk?",
        "Simmer it for about six minutes, then cool it in iced water so the centre stays runny.",
        "The soft boil on my neck should heal before long, the doctor said, as long as I keep it clean.",
    ),
    (
        "What are the symptoms of a vitamin D deficiency?",
        (
            "Tiredness, aching bones, muscle weakness and frequent infections can mean too "
            "little sunshine nutrient."
        ),
        "Symptoms of boredom, said the teacher, are a deficiency of vitamin D jokes in the lesson plan.",
    ),
    (
        "How can I improve my sleep quality?",
        "Go to bed at a regular hour, avoid screens late in the evening and keep the bedroom cool and dark.",
        "Sleep quality scores improve when the mattress factory checks every spring twice.",
    ),
    (
        "What is the capital city of Australia?",
        "Canberra, not Sydney, hosts the federal parliament and the national government.",
        "The capital of the Australia fund grew fast as the city invested in mining shares.",
    ),
    (
        "How do I reduce stress at work?",
        (
            "Take short breaks, set clear priorities, talk to your manager early and keep "
            "evenings free of email."
        ),
        "Engineers reduce stress in steel beams at work sites by adding supports.",
    ),
    (
        "Why do leaves change colour in autumn?",
        (
            "As days shorten, trees stop making chlorophyll and the hidden yellow and orange "
            "pigments show through."
        ),
        (
            "The autumn collection changes colour every year, and the leaves printed on the "
            "scarves sell out first."
        ),
    ),
    (
        "How do I clean a cast iron pan?",
        "Scrub it with hot water and coarse salt, dry it over a flame and rub in a thin film of oil.",
        "Cast iron pan handles are made in the foundry; workers clean the moulds after each casting.",
    ),
    (
        "What is the boiling point of water at high altitude?",
        "Up in the mountains the air pressure drops, so kettles reach a rolling bubble below 100 degrees.",
        "The high point of the water polo final came at boiling speed when the altitude team scored.",
    ),
    (
        "How do I treat a bee sting?",
        "Scrape out the barb with a card, wash the spot, apply ice and take an antihistamine if it swells.",
        "The bee keeper's treat for the children was honey from the sting farm, as the sign read.",
    ),
    (
        "How can I save money on groceries?",
        "Plan meals for the week, shop with a list, buy store brands and compare unit prices.",
        "The groceries bank can save money for families, and volunteers help pack the boxes.",
    ),
    (
        "What helps a sore throat heal faster?",
        "Gargling with warm salty water, honey in tea and plenty of rest soothe the irritation.",
        "The sore losers of the throat singing contest wanted the judges to heal their pride faster.",
    ),
    (
        "How do I back up photos from my phone?",
        "Turn on automatic cloud sync in the gallery app, or copy the pictures to a computer over a cable.",
        "Photos of the phone booth from my trip back home are on the gallery wall.",
    ),
    (
        "Why does my bread not rise?",
        "Old yeast, water that was too hot or a cold kitchen stop the dough from puffing up.",
        "Bread prices rise every year, and my bakery does not know why.",
    ),
    (
        "How do I keep cut flowers fresh longer?",
        "Trim the stems at an angle, change the vase water every two days and add a little sugar.",
        "Fresh cut prices keep the flowers stall busy longer than the butcher next door.",
    ),
    (
        "What is the difference between a virus and bacteria?",
        (
            "Germs of the first kind need a host cell to copy themselves, while the others "
            "are single living cells."
        ),
        "The difference between the Virus and Bacteria bands is that one plays punk and the other jazz.",
    ),
    (
        "How do I unclog a bathroom drain?",
        (
            "Pour in baking soda followed by vinegar, wait fifteen minutes, then flush with "
            "boiling water or use a plunger."
        ),
        "The bathroom drain cover was chosen by the designer to match the tiles.",
    ),
)

DEVICES = (
    "pressure valve",
    "flow sensor",
    "relay module",
    "servo motor",
    "thermostat",
    "pump controller",
    "power supply",
    "limit switch",
)
CITIES = ("Leeds", "Lyon", "Porto", "Gdansk", "Tampere", "Graz", "Bilbao", "Utrecht", "Brno", "Aarhus")
ROLES = ("lead engineer", "project manager", "data analyst", "safety officer", "account director")
TEAMS = ("pumps", "sensors", "logistics", "firmware", "quality", "procurement")
FIRST_NAMES = (
    "Anna",
    "Ben",
    "Carla",
    "David",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Kira",
    "Luis",
)
SYLLABLES = (
    "zor",
    "qua",
    "vel",
    "tch",
    "ny",
    "brik",
    "osh",
    "drav",
    "ulm",
    "kes",
    "pyr",
    "wox",
    "jal",
    "thu",
)
FILLER_TOPICS = (
    ("the harbour", "ferry timetable", "summer", "tourists"),
    ("the library", "reading club", "winter", "students"),
    ("the stadium", "ticket office", "match days", "fans"),
    ("the museum", "sculpture hall", "weekends", "families"),
    ("the orchard", "apple harvest", "September", "pickers"),
    ("the railway", "night train", "holidays", "travellers"),
)

PRODUCTS = 75
PEOPLE = 75
FILLER = 90
RARE_TERM_QUERIES_EACH = 15
FAMILY = 12  # products (people) whose codes (surnames) share all but their last part


@dataclass
class HybridDataset:
    documents: list[dict[str, object]] = field(default_factory=list)
    queries: list[dict[str, object]] = field(default_factory=list)
    qrels: list[tuple[str, str, int]] = field(default_factory=list)

    def save(self, folder: Path) -> None:
        """The BEIR layout under ``folder`` (created if missing): corpus.jsonl, queries.jsonl and
        qrels/test.tsv."""
        (folder / "qrels").mkdir(parents=True, exist_ok=True)
        for name, rows in (("corpus.jsonl", self.documents), ("queries.jsonl", self.queries)):
            with (folder / name).open("w", encoding="utf-8") as out:
                out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        with (folder / "qrels" / "test.tsv").open("w", encoding="utf-8") as out:
            out.write("query-id\tcorpus-id\tscore\n")
            out.writelines(f"{query_id}\t{doc_id}\t{grade}\n" for query_id, doc_id, grade in self.qrels)


def _families(
    rng: random.Random,
    count: int,
    size: int,
    make_stem: Callable[[random.Random], str],
    make_tail: Callable[[random.Random], str],
) -> list[str]:
    """``count`` unique strings in families of ``size`` sharing a stem: near-twins for a dense model."""
    names: list[str] = []
    taken: set[str] = set()
    while len(names) < count:
        stem = make_stem(rng)
        family = 0
        for _ in range(20 * size):  # bounded: a stem may have fewer free tails than ``size``
            if family == size or len(names) == count:
                break
            name = stem + make_tail(rng)
            if name not in taken:
                taken.add(name)
                names.append(name)
                family += 1
    rng.shuffle(names)
    return names


def _code_stem(rng: random.Random) -> str:
    return f"{''.join(rng.choices(string.ascii_uppercase, k=2))}{rng.randint(2, 9)}-"


def _surname_stem(rng: random.Random) -> str:
    return "".join(rng.choices(SYLLABLES, k=2)).capitalize()


def build(seed: int = 0) -> HybridDataset:
    """The whole dataset in memory; ids are shuffled so relevance cannot be read off positions."""
    rng = random.Random(seed)
    texts: list[tuple[str, str, str]] = []  # (kind, title, text)
    questions: list[tuple[str, str, int]] = []  # (kind, query text, index of its answer in texts)

    codes = _families(rng, PRODUCTS, FAMILY, _code_stem, lambda r: str(r.randint(1000, 9999)))
    for i, code in enumerate(codes):
        device, city = rng.choice(DEVICES), rng.choice(CITIES)
        volts = rng.choice((12, 24, 48, 110, 230))
        texts.append(
            (
                "catalogue",
                f"{device.title()} {code}",
                f"The {device} {code} runs on {volts} volts and ships from our {city} warehouse "
                f"within {rng.randint(2, 9)} working days.",
            )
        )
        if i < RARE_TERM_QUERIES_EACH:
            questions.append(("rare-term", f"Which warehouse ships part {code}?", len(texts) - 1))

    surnames = _families(rng, PEOPLE, FAMILY, _surname_stem, lambda r: r.choice(SYLLABLES))
    for i, surname in enumerate(surnames):
        first = rng.choice(FIRST_NAMES)
        role, team, city = rng.choice(ROLES), rng.choice(TEAMS), rng.choice(CITIES)
        texts.append(
            (
                "directory",
                f"{first} {surname}",
                f"{first} {surname} is the {role} of the {team} team and works from the {city} office.",
            )
        )
        if i < RARE_TERM_QUERIES_EACH:
            questions.append(("rare-term", f"Which team is {surname} in?", len(texts) - 1))

    for query, answer, decoy in PARAPHRASES:
        texts.append(("answer", "", answer))
        questions.append(("paraphrase", query, len(texts) - 1))
        texts.append(("decoy", "", decoy))

    for _ in range(FILLER):
        place, thing, when, who = rng.choice(FILLER_TOPICS)
        texts.append(
            (
                "filler",
                "",
                f"At {place} the {thing} is busiest in {when}, when {who} arrive "
                f"{rng.choice(('early', 'late', 'in groups', 'by bus'))} and stay for "
                f"{rng.randint(1, 6)} hours.",
            )
        )

    order = list(range(len(texts)))
    rng.shuffle(order)
    doc_id = {index: f"doc-{position:04d}" for position, index in enumerate(order)}
    dataset = HybridDataset()
    for index in sorted(order, key=lambda i: doc_id[i]):
        kind, title, text = texts[index]
        dataset.documents.append(
            {"_id": doc_id[index], "title": title, "text": text, "metadata": {"kind": kind}}
        )
    query_order = list(range(len(questions)))
    rng.shuffle(query_order)
    for position, index in enumerate(query_order):
        kind, text, answer = questions[index]
        query_id = f"q-{position:03d}"
        dataset.queries.append({"_id": query_id, "text": text, "metadata": {"kind": kind}})
        dataset.qrels.append((query_id, doc_id[answer], 1))
    return dataset


def write(folder: Path, seed: int = 0) -> HybridDataset:
    """Write the dataset in the BEIR layout under ``folder`` (created if missing)."""
    dataset = build(seed)
    dataset.save(folder)
    return dataset
