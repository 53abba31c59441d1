"""The Karpenter controller settings the stack passes to the layer: ``MIN_VALUES_POLICY``
(Karpenter's ``--min-values-policy``) and its feature gates ``SPOT_TO_SPOT_CONSOLIDATION`` and
``NODE_OVERLAY``."""

from __future__ import annotations

import pytest
from nodewright.settings import Settings, SettingsError

BASE = {"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1"}


def test_karpenters_defaults_strict_min_values_and_no_spot_to_spot() -> None:
    settings = Settings.from_env(BASE)
    assert settings.min_values_policy == "Strict"
    assert not settings.relax_min_values
    assert not settings.spot_to_spot_consolidation
    assert not settings.node_overlay  # Karpenter v1.14's NodeOverlay gate defaults to false


def test_the_node_overlay_gate_turns_on() -> None:
    assert Settings.from_env({**BASE, "NODE_OVERLAY": "true"}).node_overlay


def test_best_effort_relaxes_min_values_and_the_gate_turns_spot_to_spot_on() -> None:
    settings = Settings.from_env(
        {**BASE, "MIN_VALUES_POLICY": "BestEffort", "SPOT_TO_SPOT_CONSOLIDATION": "true"}
    )
    assert settings.relax_min_values
    assert settings.spot_to_spot_consolidation


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("MIN_VALUES_POLICY", "bestEffort", "MIN_VALUES_POLICY='bestEffort': use 'Strict' or 'BestEffort'"),
        ("SPOT_TO_SPOT_CONSOLIDATION", "maybe", "SPOT_TO_SPOT_CONSOLIDATION='maybe': use 'true' or 'false'"),
        ("NODE_OVERLAY", "on!", "NODE_OVERLAY='on!': use 'true' or 'false'"),
    ],
)
def test_a_value_the_layer_cannot_read_is_refused_by_name(name: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({**BASE, name: value})
    assert str(refused.value) == message
