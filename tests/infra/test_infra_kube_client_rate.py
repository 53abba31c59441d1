"""The API server request rate limit flows from the stack's context to every function that calls Kubernetes.

``-c kubeClientQPS`` / ``-c kubeClientBurst`` become ``KUBE_CLIENT_QPS`` / ``KUBE_CLIENT_BURST`` in each
cluster-calling function's environment (the removal's cleanup included), which ``Settings`` reads;
absent, they are the layer's documented defaults.
"""

from __future__ import annotations

from typing import Any

import pytest
from infra_synth import Synth
from nodewright.settings import KUBE_CLIENT_BURST, KUBE_CLIENT_QPS, Settings

from infra.config import ConfigError, NodewrightConfig

# Logical-id prefixes of the functions that talk to the API server (nodewright.spec.iam.CLUSTER_CLIENTS
# and the removal's cleanup).
CLUSTER_FUNCTIONS = (
    "AutoscalerFunctionsprovisioner",
    "AutoscalerFunctionsdisruption",
    "AutoscalerFunctionsinterruption",
    "AutoscalerFunctionsspotevents",
    "AutoscalerRemoval",
)


def _cluster_function_envs(synth: Synth) -> dict[str, dict[str, Any]]:
    envs = {
        prefix: function["Properties"]["Environment"]["Variables"]
        for logical_id, function in synth.resources("AWS::Lambda::Function").items()
        for prefix in CLUSTER_FUNCTIONS
        if logical_id.startswith(prefix)
    }
    assert sorted(envs) == sorted(CLUSTER_FUNCTIONS)
    return envs


# The interruption functions' containers (up to 55 at once in an AZ-wide reclaim) get their share of
# the rate (infra/capabilities/functions.py INTERRUPTION_KUBE_CLIENT_QPS/BURST), never more than the stack's.
INTERRUPTION_PREFIXES = ("AutoscalerFunctionsinterruption", "AutoscalerFunctionsspotevents")


def test_every_cluster_function_gets_the_default_rate_limit_its_settings_read(default_synth: Synth) -> None:
    for name, env in _cluster_function_envs(default_synth).items():
        wanted = ("5", "50") if name in INTERRUPTION_PREFIXES else ("50", "100")
        assert (env["KUBE_CLIENT_QPS"], env["KUBE_CLIENT_BURST"]) == wanted, name
        settings = Settings.from_env({"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1", **env})
        if name not in INTERRUPTION_PREFIXES:
            assert (settings.kube_client_qps, settings.kube_client_burst) == (
                KUBE_CLIENT_QPS,
                KUBE_CLIENT_BURST,
            )


def test_the_context_sets_the_rate_limit_of_every_cluster_function(variant_synth: Synth) -> None:
    for name, env in _cluster_function_envs(variant_synth).items():
        wanted = ("5", "40") if name in INTERRUPTION_PREFIXES else ("20", "40")
        assert (env["KUBE_CLIENT_QPS"], env["KUBE_CLIENT_BURST"]) == wanted, name
        settings = Settings.from_env({"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1", **env})
        assert (settings.kube_client_qps, settings.kube_client_burst) == tuple(map(float, wanted))


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"kubeClientQPS": "fast"}, "kubeClientQPS 'fast' is not a number"),
        ({"kubeClientQPS": "0"}, "kubeClientQPS 0: use requests a second above zero"),
        ({"kubeClientBurst": "0"}, "kubeClientBurst 0: use a whole number of requests, 1 or more"),
        ({"kubeClientBurst": "2.5"}, "kubeClientBurst '2.5' is not a whole number of requests"),
    ],
)
def test_a_rate_limit_the_functions_cannot_use_is_refused_at_synth(
    context: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        NodewrightConfig.from_context({"clusterName": "demo", **context}.get)
