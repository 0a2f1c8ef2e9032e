"""sanitize_input_output_names (exact)."""
from __future__ import annotations

import re

from .registry import register

_VALID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@register("sanitize_input_output_names", exact=True)
def sanitize_input_output_names(graph) -> int:
    """Make program input and output names valid identifiers, [A-Za-z_][A-Za-z0-9_]*: other
    characters become `_`, a leading digit gets a `_` in front, and a clash gets `_1`, `_2`...

        before                                   after
        main(%input.1: ...) {                    main(%input_1: ...) {
          ...  -> (%out:0)                         ...  -> (%out_0)
    """
    f = graph.program.main
    n = 0
    for v in list({id(v): v for v in list(f.inputs) + list(f.outputs)}.values()):
        if _VALID.match(v.name):
            continue
        base = re.sub(r"[^A-Za-z0-9_]", "_", v.name)
        base = base if _VALID.match(base) else "_" + base
        v.name = graph.fresh(base, plain_first=True)
        n += 1
    return n
