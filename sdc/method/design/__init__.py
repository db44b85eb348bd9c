"""Design search (``sdc design``): the least-changed certified release over a lattice of
recodings.

The file is counted once; every lattice node (one recoding candidate per key) is evaluated on
the cell table only, through the release's own ``partition_cells`` and ``plan_release``, so its
certificate is the one ``sdc release`` computes. Objectives (minimised): expected share of
records changed, share of key-table entropy lost, a total-variation bound; Flash-style pruning
by the entropy floor; the recommended point keeps at least ``keep`` of the entropy and changes
the fewest records. docs/DESIGN.md, "The search".

Modules, one job each: :mod:`.candidates` (recodings per key), :mod:`.evaluate` (one node on
the cell table), :mod:`.rule` (figures, frontier, the recommendation), :mod:`.search` (the
lattice walk).
"""

from sdc.method.design.candidates import Candidate, candidates, entropy, key_kind
from sdc.method.design.evaluate import certify, node_data, partition_variant
from sdc.method.design.rule import (
    KEY_FLOOR,
    TARGET_CHANGED,
    WARN_CHANGED,
    DesignResult,
    Node,
    changes_of_key,
    displacement,
    pareto_front,
    recommend,
)
from sdc.method.design.search import search

__all__ = ["KEY_FLOOR", "TARGET_CHANGED", "WARN_CHANGED", "Candidate", "DesignResult", "Node",
           "candidates", "certify", "changes_of_key", "displacement", "entropy", "key_kind",
           "node_data", "pareto_front", "partition_variant", "recommend", "search"]
