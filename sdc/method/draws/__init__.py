"""Randomness of a release: record-keyed draws, plus named streams for non-record work.

Public functions (the contract other engines build on; ``released_cells`` is in
:mod:`sdc.method.apply`)::

    record_identity(frame: pd.DataFrame, config: ReleaseConfig) -> np.ndarray   # (n,) uint64
    unique_identities(identity: np.ndarray, tiebreak: np.ndarray) -> np.ndarray # (n,) uint64
    cell_identity(key_codes: np.ndarray, config: ReleaseConfig) -> np.ndarray   # (C,) uint64
    keyed_hash(seed: int, purpose: str, a: np.ndarray, b=0) -> np.ndarray       # uint64
    keyed_uniform(seed: int, purpose: str, a: np.ndarray, b=0) -> np.ndarray    # [0, 1)
    rendezvous(seed, purpose, identity, own, candidate_id) -> np.ndarray        # local index
    trie_order(seed, purpose, candidate_id, group, n_groups) -> (order, sorted_hash, bounds)
    trie_rendezvous(seed, purpose, identity, own, group, sorted_hash, bounds)  # position
    draw_tiebreak(cell_id: np.ndarray, in_prb: np.ndarray) -> np.ndarray      # (n,) uint64
    DrawPlan(cell_prb, cell_frequency, cell_id, prb_theta)      # .dest_trie(seed)
    stream(seed: int, key: str) -> np.random.Generator   # named streams (public row order,
                                                         # intruder simulation), not records

Why and how (design text in docs/METHOD.md section 7.3): a record's uniforms depend only on the
seed and the record's own *identity* (a hash of ``input.id_column``, or of its non-key,
non-dropped, non-perturbed values in sorted column order), so a record whose t_j, theta and PRB
did not change is released identically in every release of a series.

- ``keyed_hash`` is SipHash-2-4 of ``a || b`` (little-endian uint64 words) under the key
  ``SHA-256("sdc-draws-v1|<purpose>|<seed in decimal>")[:16]``, on uint64 numpy arrays
  (byte-identical on every platform; a test checks the paper's test vector); uniforms are
  ``(h >> 11) * 2**-53``.
- Value hashing (unkeyed): integers, integral floats, booleans and dates by ``fmix64``; other
  floats by their IEEE bits (-0.0 as 0, NaN as missing); strings by SipHash-2-4 under a fixed
  public key via ``pandas.util.hash_array`` (a test recomputes it with the reference SipHash).
- Move iff ``u1 < theta / t_j`` (monotone coupling); destination by trie rendezvous: the PRB's
  cells sorted by ``keyed_hash(seed, "dest:cell", cell_id)`` are the leaves of a 16-ary trie and
  the record runs an exponential race with rates n_c at every node, so P(l) = 1/(k - 1).
- The flat rendezvous (highest random weight, O(k) per record) is kept for DP-PRAM
  (``perturb:``), whose k is a declared category count; its weight matrix is built in chunks of
  at most ``_CHUNK`` entries (:mod:`.rendezvous`).

Modules: :mod:`.hashing` (fmix64, SipHash, value hashing), :mod:`.identity` (record and cell
identities), :mod:`.rendezvous` (destinations, :class:`DrawPlan`), :mod:`.streams` (named
streams); everything is importable from ``sdc.method.draws``.
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
)
from sdc.method.draws.streams import (
    key_words,
    stream,
)

__all__ = ["DrawPlan", "all_identities", "cell_identity", "draw_key", "draw_tiebreak",
           "drawing_identities", "fmix64", "identity_columns", "key_words",
           "keyed_hash", "keyed_uniform", "record_identity", "rendezvous", "siphash24",
           "stream", "trie_order", "trie_rendezvous", "unique_identities", "value_hash"]
