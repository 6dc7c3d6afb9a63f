"""The forward pass: token ids in, hidden states or logits out."""
