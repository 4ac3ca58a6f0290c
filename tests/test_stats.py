import math

import pytest

from vcpulab.stats import mean_ci, student_t_cdf, student_t_ppf

# Two-sided 95% critical values of Student's t from standard tables.
TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 9: 2.262, 19: 2.093, 29: 2.045}


@pytest.mark.parametrize("df,expected", sorted(TABLE.items()))
def test_t_quantile_matches_tables(df: int, expected: float) -> None:
    assert student_t_ppf(0.975, df) == pytest.approx(expected, abs=1e-3)


def test_t_quantile_tends_to_normal() -> None:
    assert student_t_ppf(0.975, 1e6) == pytest.approx(1.95996, abs=1e-4)
    assert student_t_ppf(0.5, 3) == 0.0
    assert student_t_ppf(0.025, 4) == pytest.approx(-2.776, abs=1e-3)


def test_t_cdf_symmetry() -> None:
    for df in (1, 3, 10):
        for t in (0.3, 1.0, 2.5):
            assert student_t_cdf(t, df) + student_t_cdf(-t, df) == pytest.approx(1.0)


def test_mean_ci() -> None:
    mean, half, n = mean_ci([1, 2, 3, 4])
    assert (mean, n) == (2.5, 4)
    # s = 1.29099, t(0.975, 3) = 3.18245 -> 3.18245 * 1.29099 / 2
    assert half == pytest.approx(2.05426, abs=1e-4)
    mean, half, n = mean_ci([5.0])
    assert mean == 5.0 and math.isnan(half) and n == 1
    mean, half, n = mean_ci([])
    assert math.isnan(mean) and n == 0
    assert mean_ci([2.0, 2.0, 2.0])[1] == 0.0


def test_summary_shows_median_range_and_flags_bimodal_seeds() -> None:
    import pandas as pd

    from vcpulab.sweeps import format_summary, summarize

    frame = pd.DataFrame(
        {
            "window": [512, 512, 512, 4096, 4096, 4096],
            "vm": ["a"] * 6,
            "seed": [1, 2, 3, 1, 2, 3],
            "ops": [387_000.0, 149_000.0, 74_000.0, 100.0, 101.0, 99.0],
        }
    )
    s = summarize(frame, ["window"], metrics=["ops"], confidence=0.99)
    assert "ops_ci99" in s.columns and "ops_ci95" not in s.columns
    row = s[s["window"] == 512].iloc[0]
    assert row["ops_median"] == 149_000.0
    assert (row["ops_min"], row["ops_max"]) == (74_000.0, 387_000.0)
    assert bool(row["seeds_disagree"]) is True
    assert bool(s[s["window"] == 4096].iloc[0]["seeds_disagree"]) is False
    text = format_summary(s)
    assert "seeds disagree" in text and "74000" in text.replace(",", "")


def test_ci_suffix_names_the_level() -> None:
    import pytest

    from vcpulab.errors import UsageError
    from vcpulab.sweeps import ci_suffix

    assert ci_suffix(0.95) == "ci95"
    assert ci_suffix(0.999) == "ci99.9"
    with pytest.raises(UsageError):
        ci_suffix(1.5)
