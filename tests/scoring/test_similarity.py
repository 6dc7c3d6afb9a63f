"""Bi-encoder scores follow the folder's `similarity_fn_name`; MaxSim sums best matches."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from poolrag import Engine, ModelLoadError
from poolrag.scoring.similarity import maxsim, similarity_by_name


def test_named_similarities_are_higher_for_closer_vectors() -> None:
    a, near, far = np.array([1.0, 0.0]), np.array([0.9, 0.1]), np.array([-1.0, 0.5])
    for name in ("cosine", "dot", "euclidean", "manhattan"):
        sim = similarity_by_name(name)
        assert sim(a, near) > sim(a, far), name
    assert similarity_by_name(None)(a, 2 * a) == pytest.approx(1.0)
    with pytest.raises(ModelLoadError, match="unknown similarity"):
        similarity_by_name("jaccard")


def test_maxsim_is_the_sum_over_query_tokens_of_the_best_document_token() -> None:
    query = np.array([[1.0, 0.0], [0.0, 1.0]])
    document = np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 0.2]])
    assert maxsim(query, document) == pytest.approx(1.0 + 0.5)
    assert maxsim(query, np.zeros((0, 2))) == 0.0


@pytest.mark.parametrize("name", ["dot", "euclidean"])
def test_engine_score_uses_the_similarity_of_the_folder(minilm_path, tmp_path, name: str) -> None:
    folder = tmp_path / "model"
    shutil.copytree(minilm_path, folder)
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"similarity_fn_name": name}))
    docs = ["a cat sits on the mat", "quarterly revenue grew", "kittens are young cats"]
    st = SentenceTransformer(str(folder), device="cpu")
    reference = st.similarity(st.encode(["cats"]), st.encode(docs))[0].numpy()
    ours = [s.outputs.score for s in Engine(folder).score("cats", docs)]
    np.testing.assert_allclose(ours, reference, atol=1e-5)
