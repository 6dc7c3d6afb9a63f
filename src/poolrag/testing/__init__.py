"""Helpers for tests of poolrag and of code built on it, shipped with the library (like ``numpy.testing``).

Import the modules themselves (``poolrag.testing.engine_internals``); nothing is re-exported here.
"""
