"""The prompt formats the reranker families document, written out by hand (the references the
shipped templates and the LLM reranker tests are checked against)."""

from __future__ import annotations


def qwen3_reranker_prompt(query: str, doc: str, instruction: str) -> str:
    """The format of the Qwen3-Reranker model card (prefix + body + suffix)."""
    prefix = (
        "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
        'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
    )
    suffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    return f"{prefix}<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {doc}{suffix}"


BGE_PROMPT = (
    "Given a query A and a passage B, determine whether the passage contains an answer to the query "
    "by providing a prediction of either 'Yes' or 'No'."
)


def bge_gemma_prompt(query: str, doc: str) -> str:
    """FlagEmbedding's LLM reranker input without the <bos> the tokenizer adds: A, sep, B, sep, prompt."""
    return f"A: {query}\nB: {doc}\n{BGE_PROMPT}"


def mxbai_v2_prompt(query: str, doc: str, instruction: str | None = None) -> str:
    """mxbai-rerank-v2: chat prefix, [instruction], query, sep, document, sep, task prompt, suffix."""
    prefix = (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n"
    )
    task = (
        "You are a search relevance expert who evaluates how well documents match search queries. For each "
        "query-document pair, carefully analyze the semantic relationship between them, then provide your "
        "binary relevance judgment (0 for not relevant, 1 for relevant).\nRelevance:"
    )
    head = f"instruction: {instruction}\n" if instruction else ""
    return f"{prefix}{head}query: {query}\ndocument: {doc}\n{task}<|im_end|>\n<|im_start|>assistant\n"
