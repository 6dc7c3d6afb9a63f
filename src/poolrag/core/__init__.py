"""The engine core: the one place that owns the model and runs batches."""
