"""The reproductions' suite lists name models the core's catalog has, once each."""

from __future__ import annotations

import vcpulab
from vcpulab.experiments import suites


def test_every_suite_model_is_in_the_catalog_once() -> None:
    catalog = {name for name, _ in vcpulab.workloads()}
    listed = suites.PARSEC_LIKE + suites.SPLASH_LIKE + suites.NPB_LIKE + suites.SERVER_LIKE
    assert len(listed) == len(set(listed))
    assert set(listed) <= catalog, sorted(set(listed) - catalog)
