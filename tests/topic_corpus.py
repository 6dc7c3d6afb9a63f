"""Ten sentences on four topics for the sparse and hybrid tests of the stores and the retriever.

One sentence holds a part number (``XK-4471``) and one a surname (``Okonkwo``) that no other sentence
shares, so a lexical leg has rare terms to find; the topics share words such as *boiler*, *pump* and
*yeast*, so the dense and the sparse rankings differ. ``TOPICS[i]`` is sentence ``i``'s topic, the
metadata the filter tests select on.
"""

from __future__ import annotations

CORPUS = [
    "The part number XK-4471 fits the pump housing of the old boiler.",
    "Replace the boiler pump every ten years to avoid leaks.",
    "Honeybees tell each other where flowers are with a waggle dance.",
    "The Moon's gravity pulls the oceans into two tidal bulges.",
    "Sourdough rises thanks to wild yeast and lactic acid bacteria.",
    "The pump of a heating system moves hot water through the radiators.",
    "Dr. Okonkwo described the waggle dance of bees in 1998.",
    "Tides are highest when the sun and the moon line up.",
    "Yeast turns sugar into carbon dioxide, which makes bread rise.",
    "Leaking radiators often need their valves replaced, not the boiler.",
]
TOPICS = ["heating", "heating", "bees", "sea", "bread", "heating", "bees", "sea", "bread", "heating"]
