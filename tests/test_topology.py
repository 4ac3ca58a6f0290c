"""SMT and NUMA through the Python API: the example runs, the report names its
topology, SMT slows a shared core, and a scheduler that cannot honour SMT is refused."""

from __future__ import annotations

import pytest

import vcpulab
from conftest import ROOT, needs_core

SMT_HOST = ROOT / "scenarios/examples/smt-host.toml"


@needs_core
def test_the_smt_example_names_its_topology_and_shares_cores() -> None:
    smt = vcpulab.run(SMT_HOST)
    assert smt.scenario["topology"]["threads_per_core"] == 2
    # The same eight cores without SMT: 8 pCPUs, the 16 vCPUs over-committed 2:1.
    off = vcpulab.run(SMT_HOST, overrides=["host.pcpus=8", "host.topology.threads_per_core=1"])
    assert "topology" not in off.scenario
    # Sixteen real cores: the bound SMT's shared cores stay above.
    cores = vcpulab.run(SMT_HOST, overrides=["host.topology.threads_per_core=1"])
    assert cores.end_ns < smt.end_ns < off.end_ns


@needs_core
def test_smt_under_xen_credit_is_refused_naming_the_key() -> None:
    with pytest.raises(vcpulab.ScenarioError, match=r"host\.topology\.threads_per_core"):
        vcpulab.run(SMT_HOST, overrides=["host.scheduler.kind=credit"])
    with pytest.raises(vcpulab.ScenarioError, match="whole LLCs"):
        vcpulab.run(SMT_HOST, overrides=["host.topology.numa_nodes=2"])
