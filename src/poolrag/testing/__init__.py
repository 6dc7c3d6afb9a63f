"""Test helpers shipped with poolrag, like ``numpy.testing``: tiny models, live servers, corpora and
pytest fixtures that poolrag's own tests and its partner packages' tests share.

Installed with poolrag so that a partner package's tests import them like any other module instead of
reaching into the repository's ``tests/`` folder. Each module is imported on its own; sentence-transformers
and the server's packages load only when a helper that needs them runs or is imported.
The engine's wiring is reached in one documented place, ``poolrag.testing.engine_internals``.
"""
