"""Exact quartiles per group out of core: a radix select on the order-preserving image of floats.

pandas' linear quantile of n values at q interpolates between two order statistics,
``x_(lo)`` and ``x_(hi)`` with ``pos = q (n - 1)``, ``lo = floor(pos)``, ``hi = min(lo + 1,
n - 1)``: ``a + (b - a) * (pos - lo)``. The order statistics are exact values, whatever
algorithm finds them, so a batch engine can find them without holding a column: only the
2 x 3 ranks per group matter.

The image
---------
``float_image`` maps a float64 to a uint64 whose unsigned order is the float order (sign bit
flipped for x >= 0, all bits flipped for x < 0); ``-0.0`` is first made ``+0.0`` (they compare
equal, and pandas' interpolation ``a + (b - a) * frac`` returns ``+0.0`` for either, so the
sign of a zero never reaches a figure). NaN is excluded as pandas excludes it.

When a column's range is known before the first pass (a Parquet file's statistics),
:class:`ImageMap` shifts the images to start at 0 (``float_image(x) - float_image(low)``, or
``x - low`` for an integer-typed column), so their leading bits are known zeros and the first
digit is spent on the bits in which the values differ.

Rounds (a most-significant-digit radix select)
----------------------------------------------
:class:`QuantileSelect` keeps *slots* (a group and a known prefix of the image of its target
order statistics, the same number of known bits for every slot of a round) and, per round,
either

* ``hist``: counts per slot of the next ``d`` bits of the image of every value whose prefix
  matches the slot; the target's rank then falls in one bin, whose digit extends the prefix.
  The first round has one slot per group and an empty prefix; ``d = clamp(floor(log2(
  hist_bins / slots)), 1, 16)``, so the histogram never exceeds ``hist_bins`` counters however
  many groups there are (10 keys x 500 levels x 2 sides = 10,000 groups: d = 9). From the
  second round on, the smallest and largest image per slot are kept too: a slot whose values
  are all equal (heavy ties, e.g. 60 % zeros) is resolved at once. A prefix of 64 bits is the
  value itself.
* ``collect``: when the values in all remaining slots number at most ``collect_values``, the
  next pass keeps them (slot, image) and a sort per slot gives the exact order statistics.

Counts, minima and maxima add up over batches, so any batching gives the same result, and
:meth:`QuantileSelect.merge` adds the partial results of Dask tasks. The values are then
interpolated with pandas' formula (:func:`interpolate`), so the floats are bit-identical to
pandas' ``groupby(...).quantile`` (``tests/reports/test_quantiles.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["COLLECT_VALUES", "HIST_BINS", "LUT_MAX", "QUARTILES", "ImageMap", "QuantileSelect",
           "float_image", "image_float", "images", "interpolate"]

#: Histogram counters per select (int64: 64 MB) - bounds the first round's memory.
HIST_BINS = 1 << 23
#: Values a collect round may keep (image + slot: 16 bytes each, 256 MB).
COLLECT_VALUES = 1 << 24
#: Largest (group, prefix) -> slot lookup table (int64: 128 MB).
LUT_MAX = 1 << 24
#: Longest known prefix the prefilter looks up in a table (2^22 int32: 16 MB) instead of by
#: binary search.
PREFIX_LUT_BITS = 22
QUARTILES = (0.25, 0.5, 0.75)
_SIGN = np.uint64(1 << 63)
_ONES = np.uint64((1 << 64) - 1)


def float_image(x: np.ndarray) -> np.ndarray:
    """The order-preserving uint64 image of non-NaN float64 values (``-0.0`` as ``+0.0``)."""
    u = (np.asarray(x, dtype=np.float64) + 0.0).view(np.uint64)
    # x < 0: all bits flipped (~u = u ^ ones); x >= 0: the sign bit set (u ^ sign); the
    # arithmetic shift of the sign gives ones or zeros: two passes, one temporary
    flip = (u.view(np.int64) >> 63).view(np.uint64)
    flip |= _SIGN
    flip ^= u
    return flip


def image_float(u: np.ndarray) -> np.ndarray:
    """Inverse of :func:`float_image`."""
    u = np.asarray(u, dtype=np.uint64)
    return np.where(u & _SIGN, u & ~_SIGN, ~u).view(np.float64)


def images(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(keep, image)``: the mask of non-NaN values and their images."""
    x = np.asarray(values, dtype=np.float64)
    keep = ~np.isnan(x)
    return keep, float_image(x[keep])


class ImageMap:
    """An order-preserving map of a column's non-NaN values onto ``0..span`` (uint64).

    The select learns ``64 - span.bit_length()`` leading bits for free (they are zero), so a
    column whose range is known before the first pass (Parquet statistics) spends the first
    round's digit on the bits that differ between its values:

    * ``kind="float"``: ``float_image(x) - float_image(low)``; a lognormal income from 50 to
      10^7 spans about 2^57 images, so a 13-bit first digit splits every binade in 256 bins
      instead of 2;
    * ``kind="int"`` (integer-typed column, ``|low|, |high| <= 2^52``): ``x - low`` exactly, so
      hours 0..79 span 7 bits and the first round resolves every order statistic.

    The identity map (``ImageMap()``) is :func:`float_image` itself. Values outside
    ``[low, high]`` (statistics that do not bound the data) are reported by :meth:`images`
    (``inside=False``); the caller must then not count them (see
    :class:`sdc.reports.accumulate.ReleaseAccumulator`, which starts that column over with the
    identity map).
    """

    def __init__(self, low: float | None = None, high: float | None = None,
                 integral: bool = False) -> None:
        self.low, self.high = low, high
        if low is None or high is None:
            self.kind, self.base, self.span = "float", 0, (1 << 64) - 1
        elif integral:
            self.kind, self.base, self.span = "int", 0, int(high) - int(low)
        else:
            lo, hi = float_image(np.array([low, high], dtype=np.float64)).tolist()
            self.kind, self.base, self.span = "float", int(lo), int(hi) - int(lo)
        if self.span < 0:
            raise ValueError(f"low={low} is above high={high}")

    @classmethod
    def of_range(cls, low: float, high: float, integral: bool) -> ImageMap:
        """The map for a column whose non-NaN values lie in ``[low, high]`` (``integral``:
        integer-typed); the identity map when the range is not usable."""
        ok = np.isfinite(low) and np.isfinite(high) and low <= high
        if not ok:
            return cls()
        integral = bool(integral and float(low).is_integer() and float(high).is_integer()
                        and max(abs(low), abs(high)) <= 2.0**52)
        return cls(float(low), float(high), integral)

    @property
    def identity(self) -> bool:
        return self.low is None

    @property
    def known_bits(self) -> int:
        """Leading bits every image has as zero (at most 63: one digit is always counted)."""
        return 64 - max(self.span.bit_length(), 1)

    def images(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """``(keep, image, inside)``: the non-NaN mask, the images of the kept values, and
        whether every kept value lies in ``[low, high]`` (the images are meaningless if not)."""
        x = np.asarray(values, dtype=np.float64)
        keep = ~np.isnan(x)
        xk = x[keep]
        if self.identity:
            return keep, float_image(xk), True
        if self.kind == "int":
            d = xk - self.low  # exact: integers below 2^53
            inside = bool(d.size == 0 or (d.min() >= 0 and d.max() <= self.span))
            return keep, (d.astype(np.uint64) if inside else np.zeros(0, np.uint64)), inside
        u = float_image(xk)
        u -= np.uint64(self.base)  # a value below low wraps around above span
        inside = bool(u.size == 0 or int(u.max()) <= self.span)
        return keep, u, inside

    def values(self, image: np.ndarray) -> np.ndarray:
        """The float64 values of images (inverse of :meth:`images`)."""
        u = np.asarray(image, dtype=np.uint64)
        if self.identity:
            return image_float(u)
        if self.kind == "int":
            return u.astype(np.float64) + self.low
        return image_float(u + np.uint64(self.base))

    def __repr__(self) -> str:
        return f"ImageMap(low={self.low}, high={self.high}, kind={self.kind!r})"


def _ranks(n: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pandas' (lo, hi, frac) for quantile q of groups of n values ."""
    pos = q * (np.maximum(n, 1) - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, np.maximum(n, 1) - 1)
    return lo, hi, pos - lo


def interpolate(a: np.ndarray, b: np.ndarray, frac: np.ndarray) -> np.ndarray:
    """``a + (b - a) * frac``: pandas' linear interpolation (group_quantile)."""
    return a + (b - a) * frac


class QuantileSelect:
    """Exact order statistics for the quartiles of ``n_groups`` groups, fed in batches.

    Use: ``add(groups, image)`` for every batch of a pass, then ``end_round()``; while it
    returns True, make another pass calling ``add`` with the same records (any batching,
    any order), then ``end_round()`` again. :meth:`quartiles` gives n and the three quartiles.
    """

    def __init__(self, n_groups: int, *, hist_bins: int | None = None,
                 collect_values: int | None = None, mirror: int | None = None,
                 image_map: ImageMap | None = None) -> None:
        self.n_groups = int(n_groups)
        #: how values become images (:class:`ImageMap`): the caller's images must be its
        self.image_map = ImageMap() if image_map is None else image_map
        #: groups ``mirror..2 mirror - 1`` start the first round with the counts of groups
        #: ``0..mirror - 1`` (added at its end): a caller whose second half of groups differs
        #: from the first for few values counts the first half and only the differences
        #: (:meth:`add_signed`) into the second
        self.mirror = None if mirror is None else int(mirror)
        if self.mirror is not None and 2 * self.mirror != self.n_groups:
            raise ValueError(f"mirror={mirror} must be half of n_groups={n_groups}")
        self.hist_bins = int(HIST_BINS if hist_bins is None else hist_bins)
        self.collect_values = int(COLLECT_VALUES if collect_values is None else collect_values)
        self.count = np.zeros(self.n_groups, dtype=np.int64)
        self.round = 1
        self.known = self.image_map.known_bits
        self.mode = "hist"
        self.slot_group = np.arange(self.n_groups, dtype=np.int64)
        self.slot_prefix = np.zeros(self.n_groups, dtype=np.uint64)
        self._index_slots(lut=False)  # the first round needs no lookup (slot = group)
        self.bits = self._digit_bits(self.n_groups)
        self._reset_accumulators()
        # targets: (group, rank in the group, rank left in its slot, slot, value, done)
        self.t_group = self.t_rank = self.t_left = self.t_slot = np.zeros(0, np.int64)
        self.t_value = np.zeros(0, np.float64)
        self.t_done = np.zeros(0, bool)

    # -- state ---------------------------------------------------------------------------------
    def _digit_bits(self, n_slots: int) -> int:
        # later rounds keep a minimum and a maximum per bin too: a quarter of the counters
        bins = self.hist_bins if self.round == 1 else self.hist_bins // 4
        d = int(np.floor(np.log2(max(bins, 2) / max(n_slots, 1))))
        return int(min(max(d, 1), 16, 64 - self.known))

    def _index_slots(self, lut: bool = True) -> None:
        """Slots are sorted by (group, prefix); ``prefixes`` are their distinct prefixes and
        ``slot_key = group * len(prefixes) + rank of the prefix`` is sorted too."""
        self.prefixes = np.unique(self.slot_prefix)
        # prefix -> its rank (or -1) for the prefilter, when the prefixes are short
        self.prefix_lut = None
        if lut and self.known <= PREFIX_LUT_BITS:
            self.prefix_lut = np.full(1 << self.known, -1, dtype=np.int32)
            self.prefix_lut[self.prefixes.astype(np.int64)] = np.arange(self.prefixes.size,
                                                                       dtype=np.int32)
        self.slot_key = (self.slot_group * max(self.prefixes.size, 1)
                         + np.searchsorted(self.prefixes, self.slot_prefix))
        # a dense (group, prefix rank) -> slot table when small: one gather per value
        size = self.n_groups * max(self.prefixes.size, 1)
        self.slot_lut = None
        if lut and size <= LUT_MAX:
            self.slot_lut = np.full(size, -1, dtype=np.int64)
            self.slot_lut[self.slot_key] = np.arange(self.slot_key.size, dtype=np.int64)

    def _reset_accumulators(self) -> None:
        n_slots = self.slot_group.size
        finished = self.round > 1 and bool(getattr(self, "t_done", np.zeros(0, bool)).all())
        if self.mode == "hist" and not finished:
            self.hist = np.zeros(n_slots << self.bits, dtype=np.int64)
            # smallest / largest image per bin from the second round on: a target's bin
            # holding one distinct value resolves it (ties, integer-valued columns)
            m = self.hist.size if self.round > 1 else 0
            self.smin = np.full(m, _ONES, dtype=np.uint64)
            self.smax = np.zeros(m, dtype=np.uint64)
        else:
            self.hist = np.zeros(0, np.int64)
            self.smin = np.zeros(0, np.uint64)
            self.smax = np.zeros(0, np.uint64)
        self.c_slot: list[np.ndarray] = []
        self.c_image: list[np.ndarray] = []

    def spawn(self) -> QuantileSelect:
        """An empty copy of this round's state (a Dask task fills it; :meth:`merge` adds it)."""
        new = object.__new__(QuantileSelect)
        new.__dict__.update(self.__dict__)
        new.count = np.zeros_like(self.count)
        new._reset_accumulators()
        return new

    def merge(self, other: QuantileSelect) -> None:
        """Add the counts of a partial select of the same round (see :meth:`spawn`)."""
        if self.done:
            return
        if self.mode == "hist":
            self.hist += other.hist
            np.minimum(self.smin, other.smin, out=self.smin)
            np.maximum(self.smax, other.smax, out=self.smax)
        else:
            self.c_slot += other.c_slot
            self.c_image += other.c_image

    def __getstate__(self) -> dict[str, Any]:  # histograms travel sparse (Dask results)
        state = dict(self.__dict__)
        h, lo, hi = state.pop("hist"), state.pop("smin"), state.pop("smax")
        nz = np.flatnonzero(h)
        state["_sparse"] = (h.size, nz, h[nz], lo.size, lo[nz] if lo.size else lo,
                            hi[nz] if hi.size else hi)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        size, nz, val, m, lo, hi = state.pop("_sparse")
        self.__dict__.update(state)
        self.hist = np.zeros(size, dtype=np.int64)
        self.hist[nz] = val
        self.smin = np.full(m, _ONES, dtype=np.uint64)
        self.smax = np.zeros(m, dtype=np.uint64)
        if m:  # a bin without values keeps the identities of min and max
            self.smin[nz], self.smax[nz] = lo, hi

    @property
    def done(self) -> bool:
        return self.round > 1 and bool(self.t_done.all())

    # -- a pass --------------------------------------------------------------------------------
    def prefilter(self, image: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """``(positions, prefix rank)`` of the values whose prefix is some slot's (None in
        the first round: every value counts). One binary search per value, shared by all
        groupings of the same values; :meth:`add` then takes ``prefix_rank``."""
        if self.round == 1 or self.done:
            return None
        p = self.prefixes
        if p.size == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        prefix = image >> np.uint64(64 - self.known)
        if self.prefix_lut is not None:  # short prefixes: one gather per value
            r = self.prefix_lut[prefix]
            idx = np.flatnonzero(r >= 0)
            return idx, r[idx].astype(np.int64)
        r = np.minimum(np.searchsorted(p, prefix), p.size - 1)
        idx = np.flatnonzero(p[r] == prefix)
        return idx, r[idx]

    def _match(self, groups: np.ndarray, image: np.ndarray,
               prefix_rank: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The slot of every value whose group has a slot with its prefix (others dropped)."""
        if self.round == 1:
            return groups, image
        if prefix_rank is None:
            idx, prefix_rank = self.prefilter(image)
            groups, image = groups[idx], image[idx]
        if self.slot_key.size == 0:
            return np.zeros(0, np.int64), image[:0]
        key = groups * max(self.prefixes.size, 1) + prefix_rank
        if self.slot_lut is not None:
            s = self.slot_lut[key]
            keep = s >= 0
            return s[keep], image[keep]
        s = np.minimum(np.searchsorted(self.slot_key, key), self.slot_key.size - 1)
        keep = self.slot_key[s] == key
        return s[keep], image[keep]

    def first_digits(self, image: np.ndarray) -> np.ndarray:
        """The first round's digit of every image (shared by :meth:`add` calls on the same
        values; the map's leading ``known`` bits are zero)."""
        return (image >> np.uint64(64 - self.known - self.bits)).astype(np.int64)

    def add_signed(self, groups: np.ndarray, image: np.ndarray, sign: int) -> None:
        """First round only: add (``sign=1``) or remove (``sign=-1``) single values (few:
        ``np.add.at``), e.g. the differences between mirrored groups."""
        if self.round != 1:
            raise RuntimeError("add_signed is for the first round (counts per group) only")
        groups = np.asarray(groups, dtype=np.int64)
        if groups.size == 0:
            return
        np.add.at(self.hist, (groups << self.bits) + self.first_digits(image), sign)

    def add_first(self, local: np.ndarray, digit: np.ndarray, group_range: tuple[int, int]
                  ) -> None:
        """First round, the fast form of :meth:`add`: ``local`` = group - a of every value
        (groups in ``group_range = (a, b)``), ``digit`` = :meth:`first_digits` of its image."""
        if self.round != 1:
            raise RuntimeError("add_first is for the first round only")
        if local.size == 0:
            return
        a, b = group_range
        flat = local.astype(np.int64)  # codes may come in a small integer type
        flat <<= self.bits
        flat += digit
        lo, hi = a << self.bits, b << self.bits
        self.hist[lo:hi] += np.bincount(flat, minlength=hi - lo)

    def add(self, groups: np.ndarray, image: np.ndarray,
            group_range: tuple[int, int] | None = None,
            prefix_rank: np.ndarray | None = None, digit: np.ndarray | None = None) -> None:
        """Count (or keep) the values with images ``image`` of groups ``groups`` (0..G-1).

        ``group_range = (a, b)``: every group is in ``a..b-1`` (then the first round counts
        into that part of the histogram only: no full-size temporary per call).
        ``prefix_rank``: the values were already passed through :meth:`prefilter` (only its
        positions given, with its ranks). ``digit``: first round, :meth:`first_digits` of
        ``image``.
        """
        groups = np.asarray(groups, dtype=np.int64)
        a, b = group_range if group_range is not None else (0, self.n_groups)
        if self.done or groups.size == 0:
            return
        slot, u = self._match(groups, image, prefix_rank)
        if slot.size == 0:
            return
        if self.mode == "collect":
            self.c_slot.append(slot)
            self.c_image.append(u)
            return
        if self.round == 1:
            digit = self.first_digits(u) if digit is None else digit
        else:
            shift = np.uint64(64 - self.bits)
            digit = ((u << np.uint64(self.known)) >> shift).astype(np.int64)
        if self.round == 1:  # slot = group: only the groups' part of the histogram
            lo, hi = a << self.bits, b << self.bits
            self.hist[lo:hi] += np.bincount(((slot - a) << self.bits) + digit,
                                            minlength=hi - lo)
        else:
            flat = (slot << self.bits) + digit
            # the slots of groups a..b-1 are consecutive: count into their part only
            lo, hi = (np.searchsorted(self.slot_group, [a, b]) << self.bits).tolist()
            self.hist[lo:hi] += np.bincount(flat - lo, minlength=hi - lo)
            np.minimum.at(self.smin, flat, u)
            np.maximum.at(self.smax, flat, u)

    def end_round(self) -> bool:
        """Resolve what this pass decided; True when another pass is needed."""
        if self.round == 1:
            if self.mirror is not None:
                m = self.mirror
                self.hist[m << self.bits:] += self.hist[:m << self.bits]
            # values per group: the first round's histogram summed over the digits
            self.count = self.hist.reshape(self.n_groups, 1 << self.bits).sum(axis=1)
            self._make_targets()
        open_ = np.flatnonzero(~self.t_done)
        slot = self.t_slot[open_]
        left = self.t_left[open_]
        if self.mode == "collect":
            s = np.concatenate(self.c_slot) if self.c_slot else np.zeros(0, np.int64)
            u = np.concatenate(self.c_image) if self.c_image else np.zeros(0, np.uint64)
            low = 64 - self.known  # the bits below the slots' common prefix length
            if self.slot_group.size <= (1 << self.known) >> 1:
                # one uint64 key per value: slot above the bits below the prefix
                mask = np.uint64((1 << low) - 1)
                key = (s.astype(np.uint64) << np.uint64(low)) | (u & mask)
                key.sort()
                s = (key >> np.uint64(low)).astype(np.int64)
                u = (self.slot_prefix[s] << np.uint64(low)) | (key & mask)
            else:
                order = np.lexsort((u, s))
                s, u = s[order], u[order]
            first = np.searchsorted(s, slot)
            self.t_value[open_] = self.image_map.values(u[first + left])
            self.t_done[open_] = True
        else:
            cum = np.cumsum(self.hist)
            base = np.concatenate(([0], cum))[slot << self.bits]
            flat = np.searchsorted(cum, base + left, side="right")
            if self.round > 1:
                same = self.smin[flat] == self.smax[flat]  # one distinct value in the bin
                self.t_value[open_[same]] = self.image_map.values(self.smin[flat[same]])
                self.t_done[open_[same]] = True
            below = np.concatenate(([0], cum))[flat]
            digit = (flat - (slot << self.bits)).astype(np.uint64)
            in_bin = self.hist[flat]
            self.known += self.bits
            prefix = (self.slot_prefix[slot] << np.uint64(self.bits)) | digit
            self.t_left[open_] = base + left - below
            live = ~self.t_done[open_]
            if self.known >= 64:
                self.t_value[open_[live]] = self.image_map.values(prefix[live])
                self.t_done[open_[live]] = True
            else:
                self._next_slots(open_[live], self.t_group[open_[live]], prefix[live],
                                 in_bin[live])
        self.c_slot, self.c_image = [], []
        self.round += 1
        return not bool(self.t_done.all())

    def _make_targets(self) -> None:
        """The distinct ranks each non-empty group's quartiles need (at most 6 per group)."""
        groups, ranks = [], []
        for q in QUARTILES:
            lo, hi, _ = _ranks(self.count, q)
            for r in (lo, hi):
                ok = np.flatnonzero(self.count > 0)
                groups.append(ok)
                ranks.append(r[ok])
        g, r = np.concatenate(groups), np.concatenate(ranks)
        key = np.unique(np.stack([g, r], axis=1), axis=0) if g.size else np.zeros((0, 2),
                                                                                    np.int64)
        self.t_group = key[:, 0].astype(np.int64)
        self.t_rank = key[:, 1].astype(np.int64)
        self.t_left = self.t_rank.copy()
        self.t_slot = self.t_group.copy()  # round 1: slot = group
        self.t_value = np.full(self.t_group.size, np.nan)
        self.t_done = np.zeros(self.t_group.size, bool)

    def _next_slots(self, targets: np.ndarray, group: np.ndarray, prefix: np.ndarray,
                    in_bin: np.ndarray) -> None:
        """Slots of the next round: distinct (group, prefix) of the open targets."""
        order = np.lexsort((prefix, group))
        g, p, c = group[order], prefix[order], in_bin[order]
        new = np.ones(g.size, bool)
        new[1:] = (g[1:] != g[:-1]) | (p[1:] != p[:-1])
        slot_of = np.cumsum(new) - 1
        self.t_slot[targets[order]] = slot_of
        self.slot_group, self.slot_prefix = g[new], p[new]
        self._index_slots()
        total = int(c[new].sum())
        self.mode = "collect" if total <= self.collect_values else "hist"
        self.round += 1  # the accumulators below are the next round's
        if self.mode == "hist":
            self.bits = self._digit_bits(self.slot_group.size)
        self._reset_accumulators()
        self.round -= 1

    # -- result --------------------------------------------------------------------------------
    def quartiles(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """``(n, [q1, median, q3])`` per group (NaN for empty groups), pandas' interpolation."""
        if not self.done and self.t_group.size:
            raise RuntimeError("quartiles() before every order statistic was resolved")
        # one sorted int64 key per (group, rank): the group's first position among all values
        # plus the rank (< the group's count), at most the number of values (no overflow,
        # whatever the number of groups)
        start = np.concatenate(([0], np.cumsum(self.count)[:-1])).astype(np.int64)
        key = start[self.t_group] + self.t_rank
        out = []
        for q in QUARTILES:
            lo, hi, frac = _ranks(self.count, q)
            ok = self.count > 0
            a = np.full(self.n_groups, np.nan)
            b = np.full(self.n_groups, np.nan)
            if key.size:
                a[ok] = self.t_value[np.searchsorted(key, start[ok] + lo[ok])]
                b[ok] = self.t_value[np.searchsorted(key, start[ok] + hi[ok])]
            out.append(np.where(ok, interpolate(a, b, frac), np.nan))
        return self.count, out
