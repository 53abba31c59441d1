"""Fixtures shared by the integration modules."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws
from nodewright.cloud.catalog import CatalogData, fetch_catalog


@pytest.fixture(scope="session")
def moto_catalog() -> CatalogData:
    """moto's ~1,400 instance types, described once per test process through the production reader
    (one DescribeInstanceTypes takes 5-7 s, 25 s on a loaded machine). Here rather than in a module:
    a session fixture imported into several modules is computed once per module."""
    with mock_aws():
        return fetch_catalog(boto3.client("ec2", region_name="us-east-1"))
