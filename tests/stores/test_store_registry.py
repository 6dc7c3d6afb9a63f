"""Issue 28, item 4: one store registry that ``open_store``, the CLI's ``--store`` choices and the
extras check all read; a new store is one file plus one registry line (``process_store.py``, added
by ``conftest.py``), and the CLI ingests into it and searches it like a built-in store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import process_store
import pytest

from poolrag.cli import build_parser, main
from poolrag.cli.extras import extra_modules, require_store_extra
from poolrag.errors import InvalidInputError
from poolrag.stores import STORES, InMemoryStore, StoreEntry, open_store, store_kinds

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
#: the shipped kinds in registry order (a new store's kind goes here); the test-only one comes last
BUILT_IN = ("milvus", "qdrant", "qdrant-edge")
REGISTERED = (*BUILT_IN, process_store.KIND)


def test_the_registry_lists_the_kinds_in_order_with_the_registered_one_last() -> None:
    assert store_kinds() == REGISTERED
    assert [STORES[k].extra for k in BUILT_IN] == list(BUILT_IN)
    assert STORES["milvus"].pip_hint == 'pip install "poolrag[milvus]"'


def test_open_store_opens_the_class_the_entry_names() -> None:
    store = open_store(process_store.KIND, "docs", path="somewhere")
    assert type(store) is process_store.ProcessStore
    assert open_store(process_store.KIND, "docs", path="somewhere") is store  # kept, as a database is
    with pytest.raises(InvalidInputError, match="process takes --path"):
        open_store(process_store.KIND, "docs", uri="x.db")


#: An unknown kind opened in a fresh interpreter: whether it was refused, and the modules it imported.
#: In the test's own process an earlier test file has imported ``poolrag.stores.milvus`` (and this
#: folder's conftest ``process_store``), so an import of either would have gone unseen there.
OPEN_IN_A_FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    from poolrag.errors import InvalidInputError
    from poolrag.stores import open_store

    before = set(sys.modules)
    try:
        open_store(sys.argv[1], "docs")
    except InvalidInputError:
        refused = True
    else:
        refused = False
    print(json.dumps([refused, sorted(set(sys.modules) - before)]))
    """
)


@pytest.mark.parametrize("kind", ["redis", "os", "poolrag.stores.milvus", "process_store:ProcessStore", ""])
def test_a_kind_outside_the_registry_is_one_line_naming_the_registered_ones(kind: str) -> None:
    """A kind only selects an entry: a module or class name given as a kind imports nothing."""
    with pytest.raises(InvalidInputError) as err:
        open_store(kind, "docs")
    assert str(err.value) == f"unknown store {kind!r}; choose one of {', '.join(REGISTERED)}"
    importable = os.pathsep.join(
        filter(None, [str(Path(process_store.__file__).parent), os.environ.get("PYTHONPATH")])
    )
    done = subprocess.run(
        [sys.executable, "-c", OPEN_IN_A_FRESH_PROCESS, kind],
        env={**os.environ, "PYTHONPATH": importable},  # process_store as importable as it is here
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, []]


def test_the_cli_store_choices_are_the_registry(capsys) -> None:
    args = build_parser().parse_args(["search", "a question", "--store", process_store.KIND])
    assert args.store == process_store.KIND
    assert build_parser().parse_args(["search", "a question"]).store == "milvus"  # the first entry
    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "a question", "--store", "redis"])
    err = capsys.readouterr().err
    assert ", ".join(map(repr, REGISTERED)) in err and len(err.strip().splitlines()) == 1


def test_the_store_key_comes_from_the_environment_unless_given(monkeypatch) -> None:
    """A key on the command line is readable by other users (``ps``) and kept in Ray's job table
    with ``--ray``: ``$POOLRAG_STORE_API_KEY`` keeps it off; ``--api-key`` still wins."""
    from poolrag.cli.store_options import store_address_from_args

    line = ["search", "a question", "--store", "qdrant", "--url", "http://127.0.0.1:6333"]
    monkeypatch.setenv("POOLRAG_STORE_API_KEY", "from-env")
    assert store_address_from_args(build_parser().parse_args(line)).api_key == "from-env"
    given = build_parser().parse_args([*line, "--api-key", "given"])
    assert store_address_from_args(given).api_key == "given"
    monkeypatch.setenv("POOLRAG_STORE_API_KEY", "")
    assert store_address_from_args(build_parser().parse_args(line)).api_key is None


def test_the_extras_check_reads_the_registry(monkeypatch, capsys) -> None:
    assert {k: extra_modules()[k] for k in BUILT_IN} == {k: STORES[k].client_modules for k in BUILT_IN}
    assert require_store_extra("ingest", process_store.KIND)  # an entry without an extra needs none
    missing = StoreEntry(process_store.__name__, "ProcessStore", "faraway", ("no_such_module_here",))
    monkeypatch.setitem(STORES, "faraway", missing)
    assert not require_store_extra("ingest", "faraway")
    err = capsys.readouterr().err
    assert err.startswith(
        'poolrag ingest needs the faraway extra: pip install "poolrag[faraway]" '
        "(missing: no_such_module_here)"
    )
    # a forgotten --store is the likely mistake: the stores this environment has are named
    assert "; or use a store installed here: --store milvus, --store qdrant" in err
    assert len(err.splitlines()) == 1


def test_the_cli_ingests_into_a_registered_store_and_searches_it(
    tmp_path: Path, minilm_path: Path, capsys
) -> None:
    common = ["--store", process_store.KIND, "--path", str(tmp_path / "kept"), "--collection", "nature"]
    cache = ["--cache", str(tmp_path / "c.sqlite")]
    assert main(["ingest", str(SAMPLES / "nature"), "--model", str(minilm_path), *common, *cache]) == 0
    out = capsys.readouterr().out
    documents = sum(1 for p in (SAMPLES / "nature").rglob("*") if p.suffix in (".md", ".txt"))
    assert f"ingested {documents} documents into process collection 'nature'" in out
    query = ["search", "why do corals turn white", "-k", "1", "--json", "--model", str(minilm_path)]
    assert main([*query, *common, *cache]) == 0
    assert json.loads(capsys.readouterr().out)["source"].endswith("nature/coral-reefs.md")


def test_a_store_without_a_location_takes_the_template_open(monkeypatch) -> None:
    monkeypatch.setitem(STORES, "memory", StoreEntry("poolrag.stores.memory", "InMemoryStore"))
    store = open_store("memory", "docs")
    assert type(store) is InMemoryStore and store.collection == "docs"
    with pytest.raises(InvalidInputError, match="memory keeps its chunks in this process"):
        open_store("memory", "docs", path="somewhere")
