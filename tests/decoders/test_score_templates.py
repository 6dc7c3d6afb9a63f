"""Score templates: the shipped ones render each model's documented prompt, byte for byte."""

from __future__ import annotations

import numpy as np
import pytest
import transformers
import vllm_templates
from reranker_prompts import bge_gemma_prompt, mxbai_v2_prompt, qwen3_reranker_prompt
from tiny_decoders import TEXTS, build

from poolrag import LLM, Engine
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


def test_a_template_typed_as_text_keeps_its_last_newlines(tmp_path):
    """The Qwen3-Reranker card's prefix + body + suffix typed as one template: its suffix ends
    ``"</think>\\n\\n"``, and Jinja's default would drop the last newline and move the score. A
    file's own final newline is its editor's and is dropped, as before."""
    card = qwen3_reranker_prompt("{{ query }}", "{{ document }}", "{{ instruction }}")
    typed = load_score_template(card).with_variables(instruction="Find the clause")
    assert typed.render(QUERY, DOC) == qwen3_reranker_prompt(QUERY, DOC, "Find the clause")
    path = tmp_path / "card.jinja"
    path.write_text(card + "\n")
    from_file = load_score_template(str(path)).with_variables(instruction="Find the clause")
    assert from_file.render(QUERY, DOC) == typed.render(QUERY, DOC)


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


def test_vllm_template_files_are_taken_as_they_are(tmp_path):
    """Issue 30, item 2: "vLLM's own ``qwen3_reranker.jinja`` is refused as ``--score-template``
    ("must use {{ query }} and {{ document }})"": a template reading vLLM's ``messages`` renders the
    same prompt as poolrag's shipped template of that name."""
    path = tmp_path / "qwen3_reranker.jinja"
    path.write_text(vllm_templates.QWEN3_RERANKER + "\n")  # a file's last newline, dropped as vLLM does
    from_vllm = load_score_template(str(path))
    default = "Given a web search query, retrieve relevant passages that answer the query"
    assert from_vllm.render(QUERY, DOC) == qwen3_reranker_prompt(QUERY, DOC, default)
    assert from_vllm.render(QUERY, DOC) == load_score_template("qwen3_reranker").render(QUERY, DOC)
    custom = from_vllm.with_variables(instruction="Find the legal clause")
    assert custom.render(QUERY, DOC) == qwen3_reranker_prompt(QUERY, DOC, "Find the legal clause")
    gemma = load_score_template(vllm_templates.BGE_RERANKER_V2_GEMMA)
    assert gemma.render(QUERY, DOC) == bge_gemma_prompt(QUERY, DOC)
    assert load_score_template(vllm_templates.BY_POSITION).render("q", "d") == "Query: q\nDocument: d"
    with pytest.raises(InvalidInputError, match="per pair"):
        from_vllm.with_variables(messages="x")


def test_vllm_templates_render_as_vllm_renders_them():
    """vLLM renders with block tags trimmed (transformers' chat-template settings); so does poolrag
    for a template that reads ``messages``."""
    looped = "{% for turn in messages %}\n{{ turn.role }}={{ turn.content }}\n{% endfor %}"
    assert load_score_template(looped).render("q", "d") == "query=q\ndocument=d\n"


def test_llm_score_takes_vllms_chat_template(tmp_path):
    """Issue 30, item 2: "``llm.score(..., chat_template=...)`` is a TypeError"."""
    folder = tmp_path / "qwen3-reranker"
    build(folder, "qwen3", transformers.AutoModelForCausalLM, tokenizer_kwargs={"add_bos": False})
    options = {"convert": "classify", "hf_overrides": {"classifier_from_token": ["no", "yes"]}}
    shipped = Engine(folder, score_template="qwen3_reranker", **options)
    expected = [s.outputs.score for s in shipped.score(QUERY, TEXTS)]
    llm = LLM(str(folder), runner="pooling", **options)
    got = llm.score(QUERY, TEXTS, chat_template=vllm_templates.QWEN3_RERANKER + "\n")
    np.testing.assert_allclose([s.outputs.score for s in got], expected, rtol=1e-6, atol=1e-7)
    assert np.ptp(expected) > 1e-4  # the documents are told apart, so equal scores mean the same prompt
    with pytest.raises(InvalidInputError, match="not both"):
        llm.score(QUERY, TEXTS, chat_template=vllm_templates.BY_POSITION, score_template="qwen3_reranker")
