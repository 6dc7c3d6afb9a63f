"""The options ``ingest``, ``search`` and ``eval`` share, so the three spell them the same way: where
the vector store is, how BM25 splits words, which embedding cache to use."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from poolrag.cache_location import poolrag_cache_dir
from poolrag.engine_args import non_negative_float, positive_float, positive_int
from poolrag.errors import InvalidInputError
from poolrag.stores.registry import store_kinds

if TYPE_CHECKING:
    from poolrag.cache import EmbeddingCache
    from poolrag.sparse.words import WordAnalyzer
    from poolrag.stores.address import StoreAddress

#: the store's API key when ``--api-key`` is not given
STORE_API_KEY_ENV = "POOLRAG_STORE_API_KEY"


def add_store_arguments(
    parser: argparse.ArgumentParser,
    collection: str | None = "poolrag",
    collection_help: str = "collection name (default: poolrag)",
) -> None:
    group = parser.add_argument_group("vector store")
    kinds = store_kinds()  # the store registry, read when the parser is built
    group.add_argument("--store", choices=kinds, default=kinds[0], help=f"default: {kinds[0]}")
    group.add_argument("--uri", help="milvus: a Milvus Lite file (default ./poolrag_milvus.db) or server URL")
    group.add_argument(
        "--path", help="qdrant / qdrant-edge: local folder (default ./poolrag_qdrant, ./poolrag_edge)"
    )
    group.add_argument("--url", help="qdrant: server URL, e.g. http://localhost:6333")
    group.add_argument(
        "--api-key",
        help=f"server API key / token (qdrant url, milvus server; default: ${STORE_API_KEY_ENV}, which keeps "
        "it off the command line others and Ray's job table can read)",
    )
    group.add_argument("--collection", default=collection, help=collection_help)
    group.add_argument(
        "--retries", type=positive_int, default=5, help="attempts while the database is down (default 5)"
    )
    group.add_argument(
        "--retry-delay",
        type=non_negative_float,
        default=0.5,
        help="first backoff in seconds, doubling up to 8 (default 0.5)",
    )


def add_analyzer_arguments(group: Any) -> None:
    """``--analyzer`` and ``--language``: how BM25 splits text into terms (choices from fixed tables)."""
    from poolrag.sparse.words import ANALYZERS, DEFAULT_ANALYZER, DEFAULT_LANGUAGE, LANGUAGES

    group.add_argument(
        "--analyzer",
        choices=ANALYZERS,
        default=DEFAULT_ANALYZER,
        help="BM25 terms: 'words' (Unicode words, lower-cased, stop words out, stemmed, as search engines "
        f"do) or 'wordpiece' (the model tokenizer's pieces); recorded in the collection (default: "
        f"{DEFAULT_ANALYZER})",
    )
    group.add_argument(
        "--language",
        choices=sorted(LANGUAGES),
        metavar="LANGUAGE",
        help=f"the collection's language: stemmer and stop words of --analyzer words (default: the "
        f"language a new collection's first batch is written in, else {DEFAULT_LANGUAGE}), and, "
        "recorded with the model card's languages, what lets the hybrid default "
        f"lean on BM25 when the model was not trained on it (one of {', '.join(sorted(LANGUAGES))})",
    )


def analyzer_from_args(args: argparse.Namespace) -> WordAnalyzer | None:
    """The word analyzer the flags name, or ``None`` for word pieces."""
    from poolrag.sparse.words import DEFAULT_LANGUAGE, WORDS, WordAnalyzer

    return WordAnalyzer(args.language or DEFAULT_LANGUAGE) if args.analyzer == WORDS else None


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("embedding cache")
    group.add_argument(
        "--cache",
        metavar="FILE",
        # where this run's default is: $POOLRAG_CACHE_DIR or $XDG_CACHE_HOME move it
        help=f"cache file (default: {poolrag_cache_dir() / 'embeddings.sqlite'})",
    )
    group.add_argument("--no-cache", action="store_true", help="embed everything, store nothing")
    group.add_argument(
        "--cache-max-gb",
        type=positive_float,
        default=None,
        help="size bound of the cached vectors in GiB (the file is larger: 1.1-1.4x, 2x at 512 "
        "dimensions), recorded in the file for later runs (default: the file's recorded bound, else 1)",
    )


def store_address_from_args(args: argparse.Namespace) -> StoreAddress:
    from poolrag.stores import RetryPolicy
    from poolrag.stores.address import StoreAddress

    retry = RetryPolicy(attempts=args.retries, base_delay=args.retry_delay)
    location = {"uri": args.uri, "path": args.path, "url": args.url}
    api_key = args.api_key if args.api_key is not None else os.environ.get(STORE_API_KEY_ENV) or None
    return StoreAddress(args.store, args.collection, **location, api_key=api_key, retry=retry)


def refuse_missing_database(args: argparse.Namespace) -> None:
    """A reader's check: an embedded store's file or folder must exist, since opening one creates it
    (a search with a mistyped ``--uri`` left an empty database behind and then said the collection
    was missing). A qdrant-edge database is the ``--path`` folder, each collection a folder in it:
    one that holds other collections is there, and the store says the collection does not exist,
    as Milvus and Qdrant say it. Qdrant's local mode writes its ``meta.json`` into any folder it
    opens, so a folder without one (a Milvus Lite database given to ``--store qdrant``) is no Qdrant
    database either, and is left as it was."""
    from poolrag.stores.names import check_collection_name
    from poolrag.stores.qdrant_local_points import QDRANT_LOCAL_META

    check_collection_name(args.collection)  # a bad name is that error, not a missing database
    data = store_address_from_args(args).local_data()
    database = data.parent if data is not None and args.store == "qdrant-edge" else data
    if database is None:  # a server's
        return
    held = (database / QDRANT_LOCAL_META).is_file() if args.store == "qdrant" else database.exists()
    if not held:
        where = f"--uri {data}" if args.store == "milvus" else f"--path {args.path or database}"
        raise InvalidInputError(
            f"no {args.store} database at {database}: nothing was ingested there "
            f"(poolrag ingest ... --store {args.store} {where} --collection {args.collection})"
        )


def open_cache_from_args(args: argparse.Namespace) -> EmbeddingCache | None:
    if args.no_cache:
        return None
    from poolrag.cache import EmbeddingCache

    bound = None if args.cache_max_gb is None else int(args.cache_max_gb * (1 << 30))
    return EmbeddingCache(args.cache, max_bytes=bound)
