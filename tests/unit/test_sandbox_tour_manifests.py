"""The README's tour applies ``sandbox/manifests/`` to ``nodewright sandbox up``: its EC2NodeClass must
name the node role that sandbox has (the stack's, since the sandbox enforces IAM), or every launch is
refused ``iam:PassRole`` and the tour never gets a node."""

from __future__ import annotations

import yaml
from infra.config import created_node_role_name

from sandbox.shared_data import REPO_ROOT


def test_the_tour_nodeclass_names_the_node_role_sandbox_up_creates() -> None:
    documents = list(yaml.safe_load_all((REPO_ROOT / "sandbox" / "manifests" / "default.yaml").read_text()))
    (nodeclass,) = [d for d in documents if d["kind"] == "EC2NodeClass"]
    assert nodeclass["spec"]["role"] == f"{created_node_role_name('demo')}us-east-1"
