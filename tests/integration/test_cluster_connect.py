"""``nodewright.cluster.connect``: one client per container, one ``Cluster`` per caller.

The call deadline a handler's invocation sets must bind that handler's Context only: the demo,
the CLI and the tests hold the same connection in the same process, and a deadline left over
from an ended invocation would refuse every call they make.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from nodewright import cluster as cluster_module
from nodewright.settings import Settings

from sandbox.apiserver import ApiServer


@pytest.fixture
def settings(tmp_path) -> Iterator[Settings]:
    with ApiServer() as server:
        kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
        cluster_module.reset_connections()
        yield Settings(cluster_name="c", region="us-east-1", kubeconfig=kubeconfig)
        cluster_module.reset_connections()


def test_callers_share_the_client_but_not_the_call_deadline(settings: Settings) -> None:
    handler = cluster_module.connect(settings)
    other = cluster_module.connect(settings)
    assert handler.api_client is other.api_client  # built once: no second DescribeCluster or pool
    handler.set_call_deadline(time.monotonic() - 1)  # an invocation that has ended
    with pytest.raises(cluster_module.ApiUnavailable, match="not started"):
        handler.list_nodes()
    assert other.list_nodes() == []  # the other holder is not bound by it
