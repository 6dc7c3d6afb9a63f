"""Images/s of a CLIP ViT-B/32-sized dual encoder: poolrag against sentence-transformers 6.2 (which
loads the same CLIP folder itself) on the same photograph files, interleaved passes, medians.

    python benchmarks/images.py [--images 64] [--passes 3] [--size base|tiny] [--device cpu|cuda]

``base`` is CLIP ViT-B/32's shape (12 vision and 12 text layers of 768 / 512, 224 px, 32 px
patches) with random weights: the cost is the real model's, no hub download. The photographs are
matplotlib's sample data (real JPEG/PNG files), cut into ``--images`` distinct crops. Also reported: the share
of poolrag's time spent preparing the images (decode + the folder's image processor), measured
apart, and the max |Δ| of the two engines' image vectors. On ``--device cuda`` poolrag runs at its
GPU default (bf16) and sentence-transformers in fp16, its usual GPU setting.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from common import interleaved, preparation_seconds, print_image_run

SHAPES = {
    "base": {
        "text": {
            "hidden_size": 512,
            "intermediate_size": 2048,
            "num_hidden_layers": 12,
            "num_attention_heads": 8,
        },
        "vision": {
            "hidden_size": 768,
            "intermediate_size": 3072,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "image_size": 224,
            "patch_size": 32,
        },
        "projection_dim": 512,
    },
    "tiny": {
        "text": {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
        },
        "vision": {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 224,
            "patch_size": 32,
        },
        "projection_dim": 64,
    },
}


def build(folder: Path, size: str) -> Path:
    """A random CLIP of ``size``'s shape, saved by transformers with its CLIPImageProcessor and the
    MiniLM tokenizer (the text side only needs a vocabulary)."""
    import torch
    import transformers
    from common import minilm_path

    from poolrag.testing.tiny_models import copy_tokenizer

    shape = SHAPES[size]
    text = shape["text"] | {
        "vocab_size": 30522,
        "max_position_embeddings": 77,
        "pad_token_id": 0,
        "eos_token_id": 102,
    }
    torch.manual_seed(0)
    config = transformers.CLIPConfig(
        text_config=text, vision_config=shape["vision"], projection_dim=shape["projection_dim"]
    )
    transformers.CLIPModel(config).eval().save_pretrained(folder)
    transformers.CLIPImageProcessor().save_pretrained(folder)  # 224 px, as the published checkpoints
    copy_tokenizer(minilm_path(), folder)
    return folder


def photos(count: int, folder: Path) -> list[Path]:
    """``count`` different pictures cut from the sample photographs (each a distinct crop, so no
    engine can reuse one image's answer for another), written as JPEG / PNG files."""
    import matplotlib
    from PIL import Image

    samples = Path(matplotlib.get_data_path()) / "sample_data"
    sources = [samples / "grace_hopper.jpg", samples / "Minduka_Present_Blue_Pack.png", samples / "logo2.png"]
    images = [Image.open(f).convert("RGB") for f in sources]
    files = []
    for i in range(count):
        image = images[i % len(images)]
        width, height = image.size
        step = i // len(images) + 1
        box = (step % 17, step % 13, width - step % 11, height - step % 7)
        file = folder / f"photo{i:04d}.{'jpg' if i % 2 else 'png'}"
        image.crop(box).save(file)
        files.append(file)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--size", choices=sorted(SHAPES), default="base")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    import torch
    from PIL import Image
    from sentence_transformers import SentenceTransformer

    from poolrag import Engine

    with tempfile.TemporaryDirectory() as tmp:
        folder = build(Path(tmp) / "clip", args.size)
        files = photos(args.images, Path(tmp))
        engine = Engine(folder, tune="off", device=args.device)
        half = {"dtype": torch.float16} if args.device.startswith("cuda") else {}
        reference = SentenceTransformer(str(folder), device=args.device, model_kwargs=half)

        def st_encode() -> np.ndarray:  # both start from the files: decoding is part of the work
            return reference.encode([Image.open(f).convert("RGB") for f in files], normalize_embeddings=True)

        delta = float(np.abs(engine.embed_array(files) - st_encode()).max())
        times = interleaved(
            {"poolrag": lambda: engine.embed_array(files), "sentence-transformers": st_encode},
            passes=args.passes,
        )
        prepare = preparation_seconds(engine, files, "embed")
    header = (
        f"CLIP {args.size} on {args.device} ({args.images} images, {args.passes} interleaved passes, medians)"
    )
    print_image_run(header, "images", args.images, times, "sentence-transformers", prepare, delta)


if __name__ == "__main__":
    main()
