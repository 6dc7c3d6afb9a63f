"""The activations a sentence-transformers folder may name, by the class path its config writes.

A ``Dense`` module's ``activation_function`` and a CrossEncoder's ``activation_fn`` are class paths
(``torch.nn.modules.activation.Tanh``). Importing whatever path a folder names would let a file pick
code to import, so a path is only ever matched against this list of torch.nn activations and
poolrag builds the module itself.
"""

from __future__ import annotations

#: torch.nn activations a Dense layer may apply: the element-wise ones without weights of their own
#: (a Dense module saves only its linear layer, so an activation with parameters could not load)
DENSE_ACTIVATIONS = (
    "Identity",
    "Tanh",
    "ReLU",
    "ReLU6",
    "GELU",
    "Sigmoid",
    "SiLU",
    "LeakyReLU",
    "ELU",
    "SELU",
    "CELU",
    "Softplus",
    "Softsign",
    "Mish",
    "Hardtanh",
    "Hardswish",
    "Hardsigmoid",
    "LogSigmoid",
    "Tanhshrink",
)

_PREFIXES = ("torch.nn.modules.activation.", "torch.nn.modules.linear.", "torch.nn.")


def activation_class(path: str, allowed: tuple[str, ...] = DENSE_ACTIVATIONS) -> str | None:
    """The torch.nn class name a config's class path names, when it is one of ``allowed``; else
    None. ``torch.nn.Tanh`` and ``torch.nn.modules.activation.Tanh`` both name ``Tanh``."""
    for prefix in _PREFIXES:
        if path.startswith(prefix):
            name = path[len(prefix) :]
            return name if name in allowed else None
    return None
