"""The catalog's workload models by the suite they stand for, in one place for every
reproduction that sweeps a suite (tests/test_suites.py checks each name against the
core's catalog)."""

from __future__ import annotations

PARSEC_LIKE: tuple[str, ...] = (
    "blackscholes",
    "bodytrack",
    "canneal",
    "dedup",
    "facesim",
    "ferret",
    "fluidanimate",
    "freqmine",
    "raytrace",
    "streamcluster",
    "swaptions",
    "vips",
    "x264",
)
SPLASH_LIKE: tuple[str, ...] = (
    "cholesky",
    "lu_ncb",
    "volrend",
    "water_nsquared",
    "water_spatial",
)
NPB_LIKE: tuple[str, ...] = (
    "npb-bt",
    "npb-cg",
    "npb-ep",
    "npb-is",
    "npb-lu",
    "npb-mg",
    "npb-sp",
)
# Server and system models with a thread count (ebizzy and iperf are left out of the
# native-scaling study: their threads are not a fixed amount of work split over CPUs).
SERVER_LIKE: tuple[str, ...] = ("kernbench", "dbench", "mysql")
