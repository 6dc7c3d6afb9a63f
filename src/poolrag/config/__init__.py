"""What a model folder says about how to pool it."""
