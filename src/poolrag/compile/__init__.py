"""The runner's forward pass compiled by inductor in the background, cached on disk, and swapped
in between batches once it matches the eager outputs on the probe texts.

Nothing here is imported unless a caller asks for it (``Engine(..., compile="background")``):
torch's compiler stack costs seconds to import, and the engine must start at eager speed.
"""
