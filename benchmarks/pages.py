"""Pages/s of a ColPali-shaped page retriever: poolrag against the reference pipeline (transformers'
``ColPaliProcessor`` and ``ColPaliForRetrieval`` in batches of 4, as colpali-engine runs them) on the
same rendered PDF pages, interleaved passes, medians.

    python benchmarks/pages.py [--pages 8] [--passes 3] [--depth 2] [--size colpali|tiny] [--device cpu|cuda]

``colpali`` is ColPali v1.3's shape (PaliGemma: a Gemma-2B text model, 2048 wide, and a SigLIP
So400m vision tower, 1152 wide, reading 448 px pages in 14 px patches: 1,024 image tokens a page,
128-dim token vectors) with random weights: the cost is the real model's, no hub download.
``--depth`` keeps that many layers of each tower (the real model has 18 and 27): every layer costs
what the real one does, so the whole model's time scales by the layer count, and a CPU measures in
minutes rather than hours (``--depth 0`` keeps them all). The pages are a PDF written by matplotlib
(text, a chart, a photograph), rendered by poolrag's own renderer at 150 dpi. Also reported: the
share of poolrag's time spent preparing the pages (decode + the folder's processor), measured apart,
and the max |Δ| of the two engines' token vectors. On ``--device cuda`` poolrag runs at its GPU
default (bf16) and the reference in bf16 too. (sentence-transformers 6.2's ``MultiVectorEncoder``
loads the folder but cuts a 1,024-image-token page at 128 tokens and fails, so it is not the peer.)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from common import interleaved, preparation_seconds, print_image_run

SHAPES = {
    "colpali": {
        "text": {
            "hidden_size": 2048,
            "intermediate_size": 16384,
            "num_hidden_layers": 18,
            "num_attention_heads": 8,
            "num_key_value_heads": 1,
            "head_dim": 256,
        },
        "vision": {
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_hidden_layers": 27,
            "num_attention_heads": 16,
            "image_size": 448,
            "patch_size": 14,
        },
        "embedding_dim": 128,
    },
    "tiny": {
        "text": {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
        },
        "vision": {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 448,
            "patch_size": 14,
        },
        "embedding_dim": 128,
    },
}


def build(folder: Path, size: str, depth: int) -> Path:
    """A random ColPali of ``size``'s shape (``depth`` layers a tower, 0: all), saved by transformers
    with its ColPaliProcessor (SigLIP's image processor at 448 px) and the MiniLM tokenizer with
    ``<image>`` added."""
    import torch
    import transformers
    from common import minilm_path

    shape = SHAPES[size]
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_path())
    tokenizer.add_special_tokens({"bos_token": "[CLS]", "additional_special_tokens": ["<image>"]})
    tokenizer.model_max_length = 2048  # a page is 1,024 image tokens and its prompt
    text = shape["text"] | {"vocab_size": len(tokenizer), "max_position_embeddings": 2048, "pad_token_id": 0}
    text |= {"bos_token_id": 101, "eos_token_id": 102}
    vision = dict(shape["vision"]) | {"projection_dim": shape["text"]["hidden_size"]}
    if depth:
        text["num_hidden_layers"] = min(depth, text["num_hidden_layers"])
        vision["num_hidden_layers"] = min(depth, vision["num_hidden_layers"])
    vlm = transformers.PaliGemmaConfig(
        text_config=text,
        vision_config=vision,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        projection_dim=shape["text"]["hidden_size"],
    )
    torch.manual_seed(0)
    config = transformers.ColPaliConfig(vlm_config=vlm, embedding_dim=shape["embedding_dim"])
    transformers.ColPaliForRetrieval(config).eval().save_pretrained(folder)
    patches = (vision["image_size"] // vision["patch_size"]) ** 2
    size_px = {"height": vision["image_size"], "width": vision["image_size"]}
    images = transformers.SiglipImageProcessor(size=size_px, image_seq_length=patches)
    transformers.ColPaliProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(folder)
    return folder


def pages(count: int, folder: Path) -> list:
    """``count`` pages of a PDF matplotlib writes (prose, a chart, the sample photograph in turn),
    rendered by poolrag's renderer at 150 dpi: the RGB images both engines are given."""
    from poolrag.ingest.pdf_pages import PageRendering, render_page
    from poolrag.testing.page_corpus import write_pdf

    texts = [f"Section {i}: findings of the survey, table {i}, and notes on method." for i in range(count)]
    pdf = write_pdf(folder / "report.pdf", texts, photo_on=1)
    return [render_page(pdf, i, PageRendering()) for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--depth", type=int, default=2, help="layers kept per tower (0: all)")
    parser.add_argument("--size", choices=sorted(SHAPES), default="colpali")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    import torch
    import transformers

    from poolrag import Engine

    with tempfile.TemporaryDirectory() as tmp:
        folder = build(Path(tmp) / "colpali", args.size, args.depth)
        images = pages(args.pages, Path(tmp))
        engine = Engine(folder, tune="off", device=args.device)
        cuda = args.device.startswith("cuda")
        dtype = torch.bfloat16 if cuda else torch.float32
        model = transformers.ColPaliForRetrieval.from_pretrained(folder, dtype=dtype).to(args.device).eval()
        processor_ref = transformers.ColPaliProcessor.from_pretrained(folder)

        def ours() -> list[np.ndarray]:
            outputs = engine.encode(images, pooling_task="token_embed")
            return [np.asarray(o.outputs.data, np.float32) for o in outputs]

        def theirs() -> list[np.ndarray]:
            vectors = []
            for start in range(0, len(images), 4):
                inputs = processor_ref.process_images(images=images[start : start + 4]).to(args.device)
                with torch.inference_mode():
                    batch = model(**inputs).embeddings
                for row, mask in zip(batch, inputs["attention_mask"], strict=True):
                    vectors.append(row[mask.bool()].float().cpu().numpy())
            return vectors

        delta = max(float(np.abs(a - b).max()) for a, b in zip(ours(), theirs(), strict=True))
        times = interleaved({"poolrag": ours, "transformers": theirs}, passes=args.passes)
        prepare = preparation_seconds(engine, images, "token_embed")
    layers = "all layers" if not args.depth else f"{args.depth} layers a tower"
    header = (
        f"ColPali {args.size} ({layers}) on {args.device} ({args.pages} pages, {args.passes} interleaved "
        "passes, medians)"
    )
    print_image_run(header, "pages", args.pages, times, "transformers", prepare, delta)


if __name__ == "__main__":
    main()
