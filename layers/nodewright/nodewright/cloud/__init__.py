"""Every AWS call of Nodewright lives in this package.

- ``aws.client(service, settings)``: the one place clients are built (adaptive retries, the
  settings' region and endpoint).
- ``provider.CloudProvider``: ``instance_types(nodeclass)``, ``create(LaunchRequest) -> LaunchResult``,
  ``delete``/``delete_by_nodeclaim``, ``get``, ``list``, ``find_by_nodeclaim``, ``mark_unavailable``,
  ``drift_inputs``/``drift_reason``, ``nodeclass_status``, ``cleanup_launch_templates``.
- ``state.DynamoDBStateStore`` (``pk``/``sk``/``expires_at``) and ``state.InMemoryStateStore``, both a
  ``nodewright.state.interfaces.StateStore``:
  unavailable offerings (3-minute TTL), the price table, markers; ``state.idempotency_persistence``.
- ``pricing.refresh(settings)``: the 12-hourly price refresh; ``pricetable.PriceTable`` and the
  documented estimate for types with no price.
- ``catalog.Catalog``: DescribeInstanceTypes/Offerings once per warm container (5 minutes).
- ``eks.describe_cluster``/``cluster_info``: endpoint, CA, version, service CIDR (cached).
- ``errors``: the typed errors (``NoSubnetError``, ``InsufficientCapacityError``, ``LaunchError``, ...).

Nothing is imported here, so ``from nodewright.cloud import errors`` stays cheap.
"""
