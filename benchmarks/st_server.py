"""sentence-transformers behind a minimal FastAPI: the server a team writes in ten lines when it
serves a model itself, the peer of ``poolrag serve`` in ``serve_vs_servers.py --servers st``.

    python benchmarks/st_server.py MODEL --port 8000 [--device cuda]

One ``SentenceTransformer`` (fp16 on a GPU, its usual setting there), an OpenAI-shaped
``/v1/embeddings``; each request is encoded on its own in FastAPI's thread pool, with no batching
across requests: what such a server does.
"""

from __future__ import annotations

import argparse

import torch
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel
from sentence_transformers import SentenceTransformer


class EmbeddingRequest(BaseModel):
    input: str | list[str]
    model: str = "m"


def app_for(model: SentenceTransformer) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/embeddings")
    def embeddings(request: EmbeddingRequest) -> dict[str, object]:
        texts = [request.input] if isinstance(request.input, str) else request.input
        vectors = model.encode(texts, batch_size=32, convert_to_numpy=True)
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        return {"object": "list", "model": request.model, "data": data}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    half = {"dtype": torch.float16} if args.device.startswith("cuda") else {}
    model = SentenceTransformer(args.model, device=args.device, model_kwargs=half)
    uvicorn.run(app_for(model), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
