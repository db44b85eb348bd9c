"""Randomness of a release: record-keyed draws, plus named streams for non-record work.

A record's uniforms depend only on the seed and its own identity (a hash of ``input.id_column``
or of its non-key values), never on its position, so a record whose t_j, theta and PRB did not
change is released identically in every release of a series: move iff u1 < theta/t_j,
destination by trie rendezvous. Modules: :mod:`.hashing` (SipHash-2-4, fmix64, value hashing),
:mod:`.identity` (record and cell identities, tie-breaks), :mod:`.rendezvous` (destinations,
:class:`DrawPlan`), :mod:`.streams` (named streams); all importable from here. The
specification, byte for byte: docs/METHOD.md section 7.3.
"""

from __future__ import annotations

from sdc.method.draws.hashing import (
    draw_key,
    fmix64,
    keyed_hash,
    keyed_uniform,
    siphash24,
    value_hash,
)
from sdc.method.draws.identity import (
    all_identities,
    cell_identity,
    draw_tiebreak,
    drawing_identities,
    identity_columns,
    record_identity,
    unique_identities,
)
from sdc.method.draws.rendezvous import (
    DrawPlan,
    rendezvous,
    trie_order,
    trie_rendezvous,
    weighted_race,
)
from sdc.method.draws.streams import (
    key_words,
    stream,
)

__all__ = ["DrawPlan", "all_identities", "cell_identity", "draw_key", "draw_tiebreak",
           "drawing_identities", "fmix64", "identity_columns", "key_words",
           "keyed_hash", "keyed_uniform", "record_identity", "rendezvous", "siphash24",
           "stream", "trie_order", "trie_rendezvous", "unique_identities", "value_hash",
           "weighted_race"]
