"""Grouping requests into forward passes."""
