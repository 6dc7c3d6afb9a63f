"""Scaling out on Ray (the ``ray`` extra): ingestion on Ray Data, serving replicas on Ray Serve.

Both keep the single-machine contracts: ingestion writes the ids and vectors one process would
write, and every replica serves the same HTTP API as ``poolrag serve``. Import the submodules
(:mod:`poolrag.scaleout.ray_ingest`, :mod:`poolrag.scaleout.ray_serve`); this package itself
imports nothing, so ``import poolrag.scaleout`` works without Ray installed.
"""
