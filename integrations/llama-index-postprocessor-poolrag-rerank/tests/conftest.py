"""The engines, servers and corpus shared with poolrag's own tests and the other partner packages, from
the installed :mod:`poolrag.testing` (the real-weight models need ``python scripts/build_test_assets.py``
run once in a poolrag checkout)."""

pytest_plugins = ["poolrag.testing.partner_fixtures"]
