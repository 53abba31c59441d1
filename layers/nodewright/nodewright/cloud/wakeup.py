"""The wake-up webhook's two AWS calls, and the secret the installer reads.

* ``wake``: an asynchronous invocation (``InvocationType=Event``) of the provisioner's wake-up
  alias, whose event-invoke configuration has no retries and a 60 s maximum event age: a wake-up
  throttled while the provisioner loops (reserved concurrency 1) waits in Lambda's queue at most a
  minute, then is dropped, never sent to a failure destination.
* ``read_secret``: the function URL's secret path segment (Secrets Manager, ``AWSCURRENT``), read
  by ``nodewright install-webhooks`` with the operator's credentials;
* ``read_path_secrets``: what the webhook accepts: ``AWSCURRENT``, and ``AWSPREVIOUS`` with the
  current version's creation time, so a rotation has a window in which both work
  (``nodewright.wakeup.webhook``).

All use the quick client (1 s connect, 2 s read, one retry): the API server waits at most 1 s for
the webhook's answer (and writes its Event anyway; the invocation goes on and still wakes).
"""

from __future__ import annotations

import json
from typing import Any

from nodewright.cloud import aws
from nodewright.settings import Settings, SettingsError
from nodewright.wakeup.webhook import PathSecrets

PREVIOUS = "AWSPREVIOUS"  # the staging label PutSecretValue moves the replaced version to


def wake(settings: Settings, event: dict[str, Any]) -> None:
    """Send ``event`` to the wake-up alias; raises when Lambda did not accept it."""
    if not settings.wake_function:
        raise SettingsError("WAKE_FUNCTION is not set; the stack sets it to the provisioner's wake-up alias")
    answer = aws.client("lambda", settings, quick=True).invoke(
        FunctionName=settings.wake_function,
        InvocationType="Event",
        Payload=json.dumps(event).encode(),
    )
    if answer.get("StatusCode") != 202:
        raise RuntimeError(f"Lambda answered {answer.get('StatusCode')} to an asynchronous invocation")


def read_path_secrets(settings: Settings) -> PathSecrets:
    """The webhook's secret: the current version, and the previous one when there is one."""
    from botocore.exceptions import ClientError

    name = settings.webhook_secret
    if not name:
        raise SettingsError("WEBHOOK_SECRET_ARN is not set; the stack sets it to the webhook's secret")
    secrets = aws.client("secretsmanager", settings, quick=True)
    current = secrets.get_secret_value(SecretId=name)
    try:
        previous = str(secrets.get_secret_value(SecretId=name, VersionStage=PREVIOUS)["SecretString"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
        previous = None  # never rotated, or the rotation window was closed by removing the label
    return PathSecrets(str(current["SecretString"]), previous, current.get("CreatedDate"))


def read_secret(settings: Settings, secret_id: str | None = None) -> str:
    """The SecretString of ``secret_id`` (default: the webhook's ``WEBHOOK_SECRET_ARN``)."""
    name = secret_id or settings.webhook_secret
    if not name:
        raise SettingsError("WEBHOOK_SECRET_ARN is not set; the stack sets it to the webhook's secret")
    value = aws.client("secretsmanager", settings, quick=True).get_secret_value(SecretId=name)
    return str(value["SecretString"])
