"""Score templates written the way vLLM ships them (its examples' .jinja files): the pair arrives as
``messages``, a ``query`` turn then a ``document`` turn, each with ``content``; an ``instruction``
may come from the template's caller. Written here from that contract, to check poolrag takes such
files as they are."""

from __future__ import annotations

_QUERY = 'messages | selectattr("role", "eq", "query") | map(attribute="content") | first'
_DOCUMENT = 'messages | selectattr("role", "eq", "document") | map(attribute="content") | first'
_DEFAULT_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"

QWEN3_RERANKER = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
    'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
    f'<Instruct>: {{{{ instruction | default("{_DEFAULT_INSTRUCTION}", true) }}}}\n'
    f"<Query>: {{{{ {_QUERY} }}}}\n"
    f"<Document>: {{{{ {_DOCUMENT} }}}}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n"
)

BGE_RERANKER_V2_GEMMA = (
    'A: {{ (messages | selectattr("role", "eq", "query") | first).content }}\n'
    'B: {{ (messages | selectattr("role", "eq", "document") | first).content }}\n'
    "Given a query A and a passage B, determine whether the passage contains an answer to the query "
    "by providing a prediction of either 'Yes' or 'No'."
)

BY_POSITION = 'Query: {{ messages[0]["content"] }}\nDocument: {{ messages[1]["content"] }}'
