"""moto's bundled copy of the real EC2 catalog, for the sandbox's prices.

The one reader of moto's data files is ``nodewright.cli._offline`` (it locates them without
importing moto and hands them to the production ``CatalogData``/``Catalog``); ``nodewright plan``,
the scheduling benchmark and the sandbox all go through it.
"""

from __future__ import annotations

from nodewright.cloud.catalog import CatalogData


def bundled_catalog(region: str) -> CatalogData:
    """The types offered in ``region`` and the zones of each, as ``fetch_catalog`` would return them."""
    from nodewright.cli._offline import catalog_data

    return catalog_data(region)
