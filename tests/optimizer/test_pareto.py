"""Pareto filtering, knee and hypervolume against hand-computed cases and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.pareto import hypervolume, knee_index, non_dominated, to_minimisation


def test_non_dominated_hand_case() -> None:
    points = np.array([[1, 3], [2, 2], [3, 1], [3, 3], [2, 2]], dtype=float)
    assert non_dominated(points) == [0, 1, 2, 4]


def test_to_minimisation_negates_maximised_columns() -> None:
    out = to_minimisation([[1.0, 5.0, 2.0]], ["minimize", "maximize", "minimize"])
    assert out.tolist() == [[1.0, -5.0, 2.0]]


def test_hypervolume_2d_staircase() -> None:
    points = np.array([[1, 3], [2, 2], [3, 1]], dtype=float)
    assert hypervolume(points, [4, 4]) == pytest.approx(6.0)


def test_hypervolume_ignores_points_beyond_reference() -> None:
    points = np.array([[1, 1], [5, 0.5]], dtype=float)
    assert hypervolume(points, [2, 2]) == pytest.approx(1.0)


def _grid_volume(points: np.ndarray, ref: np.ndarray, cells: int = 40) -> float:
    """Brute force on a lattice: points have integer coordinates in [0, cells)."""
    count = 0
    for cell in itertools.product(range(int(ref[0])), range(int(ref[1])), range(int(ref[2]))):
        corner = np.array(cell, dtype=float)
        if np.any(np.all(points <= corner, axis=1)):
            count += 1
    del cells
    return float(count)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(*[st.integers(0, 5)] * 3), min_size=1, max_size=6))
def test_hypervolume_3d_matches_lattice_count(raw: list[tuple[int, int, int]]) -> None:
    points = np.array(raw, dtype=float)
    ref = np.array([6.0, 6.0, 6.0])
    assert hypervolume(points, ref) == pytest.approx(_grid_volume(points, ref))


def test_knee_is_balanced_point() -> None:
    front = np.array([[0, 10], [4, 4], [10, 0]], dtype=float)
    assert knee_index(front) == 1
