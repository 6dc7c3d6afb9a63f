"""Text to token ids: prompts, pairs, truncation and ColBERT markers."""
