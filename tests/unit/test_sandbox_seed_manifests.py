"""The manifests the README's tour applies to ``nodewright sandbox up`` work there as written."""

from __future__ import annotations

import inspect

import yaml

from infra.config import created_node_role_name
from sandbox import Sandbox
from sandbox.shared_data import REPO_ROOT


def test_the_tour_nodeclass_names_the_node_role_the_stack_creates() -> None:
    """The functions may pass only the stack's node role (iam:PassRole, enforced in the sandbox): an
    EC2NodeClass naming another role leaves every pod pending."""
    documents = list(yaml.safe_load_all((REPO_ROOT / "sandbox" / "manifests" / "default.yaml").read_text()))
    (nodeclass,) = [d for d in documents if d["kind"] == "EC2NodeClass"]
    defaults = inspect.signature(Sandbox.__init__).parameters
    prefix = created_node_role_name(defaults["cluster_name"].default)
    assert prefix is not None
    assert nodeclass["spec"]["role"] == prefix + defaults["region"].default
