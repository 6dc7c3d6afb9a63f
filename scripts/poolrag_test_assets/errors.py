"""The one error of the asset builder: a wheel that cannot be fetched or a model that cannot be
converted faithfully."""

from __future__ import annotations


class AssetBuildError(RuntimeError):
    """Raised when a wheel cannot be fetched or a model cannot be converted faithfully."""
