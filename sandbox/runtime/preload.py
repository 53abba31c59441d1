"""The imports every Lambda container of the product makes before its handler module, made once by
the runtime's fork server (``multiprocessing``'s forkserver, ``set_forkserver_preload``): a cold
start forks from that process instead of starting an interpreter and importing them again.

Why. On AWS each container has CPU of its own; here every container shares the machine's cores
with the others, the API emulator and moto. In an AZ-wide spot reclaim the SQS mapping starts
dozens of containers at once (37 in the 100-node storm bench), and each spent about a CPU second
importing the same libraries: 44 of the 60 CPU seconds of the storm's first 30 s went to the
containers, their imports most of it. That contention is the sandbox's, not the product's, and it
made the storm's figures about the machine rather than about the product.

What is kept. A cold start is not made faster than one that imports for itself: the forked
container waits out ``IMPORT_SECONDS`` (what these imports took here, in one process, before any
container started) in its Init phase before it says it is ready, then imports the product itself.

What is imported: libraries and the sandbox's container code only. The product's modules (the
layer the function's ``app.py`` imports, and ``app.py``) are imported by each container after it
has taken its function's environment, as before; the few product modules the sandbox's own code
names (``nodewright.spec``, ``nodewright.settings``, ``nodewright.cloud``, ``nodewright.observability``)
read no environment and make no client when imported, and were imported the same way, before the
environment changed, when each container unpickled its entry point. A module that cannot be
imported here is imported by the container itself (the fork server skips an ``ImportError``).
"""

from __future__ import annotations

import importlib
import time

# The libraries the layer imports (grep its imports), the deepest module named so its parents come
# with it; then the container's own entry point, which each container imported to unpickle it.
MODULES = (
    "aws_lambda_powertools.metrics",
    "aws_lambda_powertools.utilities.batch",
    "aws_lambda_powertools.utilities.data_classes.sqs_event",
    "aws_lambda_powertools.utilities.idempotency",
    "aws_lambda_powertools.utilities.parser.models",
    "boto3",
    "botocore.session",
    "croniter",
    "cryptography.hazmat.primitives.asymmetric",
    "cryptography.x509.oid",
    "kubernetes.client",
    "kubernetes.utils.quantity",
    "pydantic",
    "urllib3",
    "yaml",
    "sandbox.runtime.lambdas",
    "sandbox.runtime.stack",
)

_started = time.perf_counter()
for _name in MODULES:
    importlib.import_module(_name)
# The time a container would have spent on these imports itself, on a core of its own.
IMPORT_SECONDS = time.perf_counter() - _started
