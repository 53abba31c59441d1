"""boto3 clients for tests under moto's ``mock_aws``, from one session per process.

``mock_aws`` drops boto3's default session each time it starts, so a test's ``boto3.client(...)``
builds a new session, which parses botocore's endpoint data and the service's model again: about
a third of a short moto test. Clients from :func:`session` share one parse. The product's own
clients are not made here (``nodewright.cloud.aws`` keeps its own session)."""

from __future__ import annotations

import functools
from typing import Any

import boto3
import pytest


@functools.cache
def session() -> boto3.session.Session:
    return boto3.session.Session()


def client(service: str, region: str) -> Any:
    return session().client(service, region_name=region)


def share_with_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's EKS checks a role ARN's partition against a boto3 Session it builds per CreateCluster
    (botocore's endpoint data parsed again); give it this session, whose partitions are the same."""
    monkeypatch.setattr("moto.eks.utils.Session", session)
