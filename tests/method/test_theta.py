"""h(theta), solve_theta and kmin against docs/METHOD.md section 4 and the paper's example."""

import math

import numpy as np
import pytest

from sdc import h, kmin, solve_theta


def test_both_branches_equal_three_sevenths_at_two_thirds():
    t = 2.0 / 3.0
    left = (1 - t) / (1 - t + t * t)  # (1/3) / (7/9) = 3/7
    right = (2 - t) / (4 - 2 * t + t * t)  # (4/3) / (28/9) = 3/7
    assert left == pytest.approx(3 / 7, abs=1e-15)
    assert right == pytest.approx(3 / 7, abs=1e-15)
    assert h(t) == pytest.approx(3 / 7, abs=1e-15)


def test_endpoints_and_monotone():
    assert h(0.0) == 1.0
    assert h(1.0) == pytest.approx(1 / 3)
    grid = np.linspace(0, 1, 2001)
    assert np.all(np.diff(h(grid)) < 0)


def test_paper_example():
    theta = solve_theta(0.395)
    assert theta == pytest.approx(0.7990, abs=1e-4)
    assert 1 / (1 - theta) == pytest.approx(4.98, abs=0.01)
    assert kmin(theta) == 5


@pytest.mark.parametrize("xi", np.linspace(1 / 3 + 1e-6, 1 - 1e-6, 97))
def test_h_inverts_solve_theta(xi):
    theta = solve_theta(xi)
    assert 0 < theta < 1
    assert h(theta) == pytest.approx(xi, abs=1e-12)


def test_branch_boundary():
    assert solve_theta(3 / 7) == pytest.approx(2 / 3, abs=1e-12)


def test_kmin_exact_integers():
    # 1/(1 - 0.8) is 5.000000000000001 in floating point; kmin must still be 5.
    assert kmin(0.8) == 5
    assert kmin(0.5) == 2
    assert kmin(0.0) == 1
    assert kmin(0.81) == math.ceil(1 / 0.19)


@pytest.mark.parametrize("bad", [1 / 3, 1.0, 0.2, 1.5, float("nan"), float("inf"), "high", None, True])
def test_xi_out_of_range_is_a_value_error_saying_why(bad):
    with pytest.raises(ValueError) as err:
        solve_theta(bad)
    msg = str(err.value)
    assert "between 1/3 and 1" in msg and "got" in msg
