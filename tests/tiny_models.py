"""The tiny random models of :mod:`poolrag.testing.tiny_models`, under the name the test modules import.

The builders moved into poolrag so the partner packages' tests can build the same models; this
re-export spares rewriting the imports of every test module that builds one.
"""

from poolrag.testing.tiny_models import (
    ENCODER_ARCHS,
    HIDDEN,
    SENTENCES,
    build_bge_m3,
    build_clip,
    build_colmodernvbert,
    build_colpali,
    build_colqwen2,
    build_encoder,
    build_siglip,
    build_siglip2,
    build_splade,
    copy_tokenizer,
    write_legacy_sentence_transformers_names,
    write_sentence_transformers,
)

__all__ = [
    "ENCODER_ARCHS",
    "HIDDEN",
    "SENTENCES",
    "build_bge_m3",
    "build_clip",
    "build_colmodernvbert",
    "build_colpali",
    "build_colqwen2",
    "build_encoder",
    "build_siglip",
    "build_siglip2",
    "build_splade",
    "copy_tokenizer",
    "write_legacy_sentence_transformers_names",
    "write_sentence_transformers",
]
