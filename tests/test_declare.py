"""The declarative reproduction parts on a hand-made frame (no core needed): each
reducer gives the value worked out by hand, so a wrong reducer fails here."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from vcpulab.experiments import PLANNED_POINTS, POINT_COLUMN, Point
from vcpulab.experiments.declare import (
    POINT,
    Col,
    Combine,
    Each,
    Fn,
    Mean,
    Over,
    Pooled,
    Pub,
    RankCorr,
    Ratio,
    Repro,
    Sim,
    row,
)

# Per point and seed, one VM's work: "base" 10/20, "a" 15/20, "b" 30/60, "c" 5 (one seed).
WORK: dict[str, tuple[float, ...]] = {
    "base": (10.0, 20.0),
    "a": (15.0, 20.0),
    "b": (30.0, 60.0),
    "c": (5.0,),
}


def _frame(points: dict[str, tuple[float, ...]] = WORK) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {POINT_COLUMN: label, "seed": seed, "vm": "v", "work": value, "cpu": 2.0}
            for label, values in points.items()
            for seed, value in enumerate(values)
        ]
    )


WORK_Q = Col("work")


def _repro(**kwargs: object) -> Repro:
    base: dict[str, object] = {
        "id": "t",
        "system": "t",
        "title": "t",
        "source": "hand-made",
        "published": Each(1.0, "above"),
        "simulated": None,
        "points": tuple(Point(label, "none.toml") for label in WORK),
    }
    return Repro(**{**base, **kwargs})  # type: ignore[arg-type]


def _by_x(table: pd.DataFrame) -> dict[object, dict[str, object]]:
    return {r["x"]: r for r in table.to_dict("records")}


def test_paired_ratio_and_its_ci_on_explicit_rows() -> None:
    rep = _repro(rows=[row("a/base", Ratio(WORK_Q, of="a", to="base", paired=True))])
    out = _by_x(rep._simulate(_frame()))["a/base"]
    # Per seed 1.5 and 1.0: mean 1.25, and a CI from two values.
    assert out["simulated"] == pytest.approx(1.25)
    assert float(out["simulated_ci95"]) > 0  # type: ignore[arg-type]
    # Unpaired: mean(a) / mean(base) = 17.5 / 15.
    rep = _repro(rows=[row("a/base", Ratio(WORK_Q, of="a", to="base"))])
    assert _by_x(rep._simulate(_frame()))["a/base"]["simulated"] == pytest.approx(17.5 / 15)


def test_over_reducers_drop_nan_and_take_the_first_on_ties() -> None:
    means = {k: Mean(WORK_Q, at=k) for k in WORK}  # base 15, a 17.5, b 45, c 5 (one seed)
    ties = {"first": Mean(WORK_Q, at="base"), "second": Mean(WORK_Q, at="base")}
    rep = _repro(
        rows=[
            row("mean", Over(list(means.values()))),
            row("max", Over(means, "max")),
            row("min", Over(means, "min")),
            row("argmax", Over(means, "argmax")),
            row("argmin", Over(means, "argmin")),
            row("tie", Over(ties, "argmax")),
            row("spread", Over(means, lambda vs: max(vs) - min(vs))),
            row("none", Over([Sim("missing")], "max")),
        ]
    )
    out = _by_x(rep._simulate(_frame()))
    assert out["mean"]["simulated"] == pytest.approx((15 + 17.5 + 45 + 5) / 4)
    assert out["max"]["simulated"] == 45.0
    assert out["min"]["simulated"] == 5.0
    assert out["argmax"]["simulated"] == "b"
    assert out["argmin"]["simulated"] == "c"
    assert out["tie"]["simulated"] == "first"
    assert out["spread"]["simulated"] == 40.0
    assert math.isnan(float(out["none"]["simulated"]))  # type: ignore[arg-type]


def test_sim_combine_and_extra_columns_in_order() -> None:
    rep = _repro(
        rows=[
            row("a", Mean(WORK_Q, at="a"), kind="point"),
            row("b", Mean(WORK_Q, at="b"), kind="point"),
            row("b/a", Combine(lambda x, y: x / y, (Sim("b"), Sim("a"))), kind="derived"),
        ]
    )
    table = rep._simulate(_frame())
    assert list(table.columns) == ["x", "simulated", "simulated_ci95", "simulated_seeds", "kind"]
    assert _by_x(table)["b/a"]["simulated"] == pytest.approx(45 / 17.5)
    assert math.isnan(_by_x(table)["b/a"]["simulated_ci95"])  # type: ignore[arg-type]


def test_rows_naming_points_that_did_not_run_are_left_out() -> None:
    rep = _repro(rows=[row("a", Mean(WORK_Q, at="a")), row("gone", Mean(WORK_Q, at="not run"))])
    assert list(rep._simulate(_frame())["x"]) == ["a"]


def test_a_planned_point_without_rows_gives_nan_not_a_missing_row() -> None:
    frame = _frame()
    frame.attrs[PLANNED_POINTS] = [*WORK, "no epochs"]
    rep = _repro(
        rows=[row("empty", Mean(WORK_Q, at="no epochs")), row("gone", Mean(WORK_Q, at="x"))]
    )
    table = rep._simulate(frame)
    assert list(table["x"]) == ["empty"]
    assert math.isnan(float(table["simulated"][0]))


def test_pooled_is_over_all_runs_together() -> None:
    ratio = Fn(lambda runs: float(runs["work"].sum() / runs["cpu"].sum()))
    rep = _repro(rows=[row("b", Pooled(ratio, at="b"))], simulated_ci=True)
    out = _by_x(rep._simulate(_frame()))["b"]
    # (30 + 60) / (2 + 2), not the mean of 15 and 30 per seed (the same here) - and
    # with unequal CPU it would differ; the value is the pooled one.
    assert out["simulated"] == pytest.approx(90 / 4)
    assert "simulated_ci95" in out


def test_rank_correlation_summary_first_and_points_as_rows() -> None:
    rep = _repro(
        rows=POINT,
        columns={"work": Mean(WORK_Q), "double": Mean(Col("work", per=0.5))},
        summary=[row("corr", RankCorr("work", "double"))],
        summary_first=True,
    )
    table = rep._simulate(_frame())
    assert list(table["x"]) == ["corr", "base", "a", "b", "c"]
    assert _by_x(table)["corr"]["simulated"] == pytest.approx(1.0)


def test_published_values_computed_from_the_simulation_and_filtered() -> None:
    rep = _repro(
        rows=POINT,
        simulated=Mean(WORK_Q),
        published=[
            Pub("a", Over([Sim("base"), Sim("c")], "max"), "above"),
            Pub("b", Sim("a"), "above", when=lambda v: v > 100),
            Pub("c", 3.0, "above", extra={"note": "n"}),
            Pub("base", 1.0, extra={"note": "m"}, extra_after=True),
        ],
    )
    pub = rep._published(_frame())
    assert list(pub["x"]) == ["a", "c", "base"]
    assert pub.iloc[0]["published"] == 15.0
    # Extra columns go before `published` unless `extra_after`.
    assert list(Pub("x", 1.0, extra={"k": 1}).row(1.0, True)) == ["x", "k", "published", "bound"]
    assert list(Pub("x", 1.0, extra={"k": 1}, extra_after=True).row(1.0, False)) == [
        "x",
        "published",
        "k",
    ]


def test_unknown_over_reducer_is_refused() -> None:
    with pytest.raises(ValueError, match=r"Over\.how: 'median' \(allowed: mean, max, min"):
        Over([Mean(WORK_Q, at="a")], "median")


def test_split_takes_each_subset_once_and_the_same_rows() -> None:
    from vcpulab.experiments.declare import _Split

    frame = _frame()
    labels = frame[POINT_COLUMN].astype(str)
    split = _Split(frame, labels)
    at_a = split.at("a")
    # The rows a mask gives, in the same order, and the same object when asked again.
    pd.testing.assert_frame_equal(at_a, frame[labels == "a"])
    assert split.at("a") is at_a and split.at(None) is frame
    seeds = split.seeds("b")
    assert [s for s, _ in seeds] == [0, 1]
    for seed, run in seeds:
        want = frame[(labels == "b") & (frame["seed"] == seed)]
        pd.testing.assert_frame_equal(run, want)
    assert split.seeds("b") is seeds
    assert split.seeds("nowhere") == []


def test_figure_titles_wrap_to_the_figure_width() -> None:
    from vcpulab.experiments import figure_title, get

    exp = get("apple-window-epochs")
    long = len(f"{exp.id}: {exp.title}")
    narrow = figure_title(exp, "partly", 6.6).split("\n")
    assert narrow[-1] == "verdict: partly"
    assert len(narrow) >= 3 and all(len(line) <= 6.6 * 11 for line in narrow)
    wide = figure_title(exp, "partly", 12.0).split("\n")
    assert long > 6.6 * 11
    assert wide == [f"{exp.id}: {exp.title}", "verdict: partly"]


def test_each_seeds_judged_value_goes_beside_the_mean() -> None:
    from vcpulab.experiments import SEED_VALUES, compare

    rep = _repro(
        rows=[
            row("a/base", Ratio(WORK_Q, of="a", to="base")),
            row("b", Mean(WORK_Q, at="b")),
            row("c", Mean(WORK_Q, at="c")),
        ]
    )
    table = rep._simulate(_frame())
    out = _by_x(table)
    # Per seed 15/10 and 20/20; b's runs 30 and 60; c ran one seed: no list.
    assert out["a/base"][SEED_VALUES] == "1.5 1"
    assert out["b"][SEED_VALUES] == "30 60"
    assert not isinstance(out["c"].get(SEED_VALUES), str)
    # A missed bound says in how many seeds, each on its own, the value was past it.
    merged = table.assign(published=[1.2, 50.0, 1.0], bound=["above", "above", "above"])
    _, detail = compare(merged, (0.05, 0.2))
    assert "a/base not above 1.2 (simulated 1.167; above it in 1 of 2 seeds)" in detail
    assert "b not above 50 (simulated 45; above it in 1 of 2 seeds)" in detail
