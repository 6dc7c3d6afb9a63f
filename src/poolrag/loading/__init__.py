"""Loading weights onto a device: the only layer that builds torch modules from files."""
