"""Pooling = a *method* (which rows) + a *head* (what to do with them), one pooler per task."""
