"""Dependence of the released non-key columns on the key variables, from aggregates of the count
pass (:class:`DependenceCounter`, mergeable over batches), never record by record.

A column that is (nearly) a function of the keys shows which records moved. Per value v of a
column the counter keeps its count and, per key, the interval of key codes it confines the key
to, plus (cell, value) counts of the small cells. The filter intruder keeps the records
released in the target's cell whose value is compatible with it:
``R_c(j) = (1 - theta/t_j) / (t_j - theta + I_c(j))``; a column fails when in some PRB the
record-weighted mean exceeds xi and the same intruder's success without the column by more
than ``MARGIN``. docs/METHOD.md section 7.5, "Dependence of non-key columns".

Modules, one job each: :mod:`.columns` (what is measured), :mod:`.tables` (mergeable tables),
:mod:`.order` (the ordered table), :mod:`.counting` (the count pass's counter),
:mod:`.pairs` (synthetic columns: relations an intruder computes from pairs of columns
and from one column), :mod:`.dates` (text read as dates), :mod:`.relations` (relations between
rows: a numeric column sorted), :mod:`.members` (a household
file's person columns against its household keys), :mod:`.measure` (the filter
intruder's figure), :mod:`.compatible` (its compatibility sums), :mod:`.verdict` (the refusal),
:mod:`.check` (a whole frame at once).
"""

from sdc.method.dependence.check import frame_dependence
from sdc.method.dependence.columns import checked_columns, key_sizes, small_limit
from sdc.method.dependence.counting import PAIR_VALUES, DependenceCounter
from sdc.method.dependence.measure import (
    ALPHA,
    MARGIN,
    ColumnDependence,
    MeasureContext,
    measure_dependence,
    order_inform,
)
from sdc.method.dependence.members import (
    PERSON_LEVEL,
    HouseholdMembers,
    member_columns,
    member_rows,
    person_level,
)
from sdc.method.dependence.order import MixedBins, order_image
from sdc.method.dependence.pairs import (
    PAIR_COLUMNS,
    PairPlan,
    SyntheticColumn,
    frame_kinds,
    pair_plan,
    schema_kinds,
)
from sdc.method.dependence.tables import HASH_BITS
from sdc.method.dependence.verdict import (
    DependenceError,
    dependence_error,
    raise_if_dependent,
    visible_error,
    visibly_moved,
)

__all__ = ["ALPHA", "HASH_BITS", "MARGIN", "PAIR_COLUMNS", "PAIR_VALUES", "PERSON_LEVEL",
           "ColumnDependence", "MixedBins", "DependenceCounter", "DependenceError", "HouseholdMembers",
           "MeasureContext", "PairPlan", "SyntheticColumn", "member_columns", "member_rows",
           "person_level",
           "checked_columns", "dependence_error", "frame_dependence", "frame_kinds", "key_sizes",
           "measure_dependence", "order_image", "order_inform", "pair_plan", "raise_if_dependent",
           "schema_kinds", "small_limit", "visible_error", "visibly_moved"]
