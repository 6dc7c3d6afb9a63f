"""Score templates: the shipped ones render each model's documented prompt, byte for byte."""

from __future__ import annotations

import pytest
from reranker_prompts import bge_gemma_prompt, mxbai_v2_prompt, qwen3_reranker_prompt

from poolrag.errors import InvalidInputError
from poolrag.tokenization.score_template import ScoreTemplate, load_score_template, shipped_score_templates

QUERY = "What is a panda?"
DOC = "The giant panda is a bear species endemic to China."


def test_three_templates_ship_with_the_package():
    assert shipped_score_templates() == ("bge_reranker_v2_gemma", "mxbai_rerank_v2", "qwen3_reranker")


def test_qwen3_reranker_template_renders_the_model_card_prompt():
    template = load_score_template("qwen3_reranker")
    default = "Given a web search query, retrieve relevant passages that answer the query"
    assert template.render(QUERY, DOC) == qwen3_reranker_prompt(QUERY, DOC, default)
    custom = template.with_variables(instruction="Find the legal clause")
    assert custom.render(QUERY, DOC) == qwen3_reranker_prompt(QUERY, DOC, "Find the legal clause")


def test_bge_reranker_v2_gemma_template_renders_the_flagembedding_prompt():
    assert load_score_template("bge_reranker_v2_gemma").render(QUERY, DOC) == bge_gemma_prompt(QUERY, DOC)


def test_mxbai_rerank_v2_template_renders_with_and_without_instruction():
    template = load_score_template("mxbai_rerank_v2")
    assert template.render(QUERY, DOC) == mxbai_v2_prompt(QUERY, DOC)
    with_instruction = template.with_variables(instruction="Rank recipes")
    assert with_instruction.render(QUERY, DOC) == mxbai_v2_prompt(QUERY, DOC, "Rank recipes")


def test_template_text_and_files_are_accepted(tmp_path):
    inline = load_score_template("Q={{ query }} D={{ document }}")
    assert inline.render("a", "b") == "Q=a D=b"
    path = tmp_path / "mine.jinja"
    path.write_text("{{ query }} | {{ document }}\n")
    from_file = load_score_template(str(path))
    assert from_file.name == "mine" and from_file.render("a", "b") == "a | b"
    assert load_score_template(inline) is inline


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("no_such_template", "unknown score template"),
        ("{{ query }} only", "missing \\['document'\\]"),
        ("{{ query } {{ document }}", "not valid Jinja"),
        ("/nowhere/x.jinja", "does not exist"),
        ("", "score_template must be"),
    ],
)
def test_bad_templates_are_refused_with_a_clear_error(value, message):
    with pytest.raises(InvalidInputError, match=message):
        load_score_template(value)


def test_templates_render_in_a_sandbox():
    template = ScoreTemplate("{{ query.__class__.__mro__ }}{{ document }}")
    with pytest.raises(InvalidInputError, match="failed to render"):
        template.render("a", "b")
    with pytest.raises(InvalidInputError, match="per pair"):
        template.with_variables(query="x")
