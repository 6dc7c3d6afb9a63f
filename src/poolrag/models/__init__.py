"""poolrag's own implementations of the most used encoder families (BERT, RoBERTa, XLM-RoBERTa).

Why our own: the forward pass is almost all of an embedding job, and transformers' generic
modules pay for padding, unfused GELU and residual adds, and a slow import. These modules take
packed rows (no padding anywhere but inside attention), fuse bias + GELU and the residual add into
the matmul on CPU (oneDNN post-ops), and load straight from safetensors. Any model they do not
cover exactly runs through transformers instead (see :mod:`poolrag.loading.native_loader`).
"""
