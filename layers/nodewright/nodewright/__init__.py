"""Nodewright: a Karpenter-compatible node autoscaler for EKS that runs as Lambda functions.

This package is the shared Lambda layer. The flows (provisioning, disruption,
interruption, termination) compose three lower packages: ``scheduling`` (pure),
``cloud`` (every AWS call) and ``cluster`` (every Kubernetes call).
"""

__version__ = "0.1.0"
