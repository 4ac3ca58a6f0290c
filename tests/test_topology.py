"""SMT and NUMA through the Python API: the examples run, the report names its
topology, SMT slows a shared core, remote memory slows a vCPU away from it, and what
cannot be honoured is refused."""

from __future__ import annotations

import pytest

import vcpulab
from conftest import ROOT, needs_core

SMT_HOST = ROOT / "scenarios/examples/smt-host.toml"
NUMA_HOST = ROOT / "scenarios/examples/numa-host.toml"


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


@needs_core
def test_vcpus_away_from_their_memory_run_slower() -> None:
    home = vcpulab.run(NUMA_HOST)
    crossed = vcpulab.run(NUMA_HOST, overrides=["vm.0.pin=8-15", "vm.1.pin=0-7"])
    assert 1.3 < crossed.end_ns / home.end_ns < 1.4
    with pytest.raises(vcpulab.ScenarioError, match=r"vm\.0\.numa_node"):
        vcpulab.run(NUMA_HOST, overrides=["vm.0.numa_node=2"])
