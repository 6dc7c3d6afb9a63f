#!/usr/bin/env bash
# The GPU checks and figures in one pass, for a lent GPU machine with a short lease: the CUDA tests,
# then images.py, serve_vs_servers.py and gpu.py on the GPU, each bounded in time so that one that
# runs long leaves the others their turn. Logs go to $OUT (default /tmp/gpu-checks).
#
#   POOLRAG_MINILM_DIR=<all-MiniLM-L6-v2 folder> PYTHONPATH=$PWD/src bash benchmarks/gpu_checks.sh
#
# Needs torch with CUDA, transformers, sentence-transformers, pytest, Pillow, matplotlib, the server
# extra's packages and wrk on PATH.
set -u
OUT=${OUT:-/tmp/gpu-checks}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
python3 -c "import torch, transformers, sentence_transformers as st; print(torch.__version__, transformers.__version__, st.__version__)" | tee -a "$OUT/machine.txt"
POOLRAG_TEST_CUDA=1 timeout 170 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_cuda.py tests/decoders/test_decoder_cuda.py >"$OUT/tests.log" 2>&1
tail -20 "$OUT/tests.log"
cd benchmarks || exit 1
timeout 100 python3 images.py --device cuda --images 512 --passes 3 2>&1 | grep -v -e Writing -e "Loading weights" | tee "$OUT/images.log"
timeout 260 python3 serve_vs_servers.py --device cuda --servers poolrag,st --models tiny,base,large \
  --rounds 1 --seconds 4 --warmup 1 >"$OUT/serve.log" 2>&1
grep -v "^  \|round 1" "$OUT/serve.log"
timeout 120 python3 gpu.py --n 1000 --passes 2 --models bert-base,bert-large 2>&1 | tee "$OUT/gpu.log" | grep -v -e Writing -e "Loading weights"
timeout 150 python3 ingest_vs_embed.py --sinks qdrant qdrant-edge --docs 60 --rounds 2 --model "$POOLRAG_MINILM_DIR" 2>&1 | tee "$OUT/ingest.log" | tail -12
