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

The private wake-up's certificate (``-c wakeup=private``; ``nodewright.wakeup.certificate``), with
the default client: ``import_certificate`` and ``delete_certificate`` (the stack's custom resource,
``functions/wakeup_certificate``), ``certificate_pem`` (what ``install-webhooks`` renders as the
``caBundle``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
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


# ACM refuses to delete a certificate a listener still uses; CloudFormation deletes the listener
# first, and ACM notices within seconds to minutes.
CERTIFICATE_IN_USE_RETRY_SECONDS = 10.0


def import_certificate(settings: Settings, certificate: str, private_key: str, tags: dict[str, str]) -> str:
    """Import a PEM certificate and its key into ACM, tagged; its ARN."""
    answer = aws.client("acm", settings).import_certificate(
        Certificate=certificate.encode(),
        PrivateKey=private_key.encode(),
        Tags=[{"Key": key, "Value": value} for key, value in tags.items()],
    )
    return str(answer["CertificateArn"])


def delete_certificate(
    settings: Settings,
    certificate_arn: str,
    seconds: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> bool:
    """Delete an ACM certificate, waiting up to ``seconds`` while ACM still sees it in use; False
    when it was already gone. Raises the last ``ResourceInUseException`` past the deadline."""
    from botocore.exceptions import ClientError

    acm = aws.client("acm", settings)
    deadline = monotonic() + seconds
    while True:
        try:
            acm.delete_certificate(CertificateArn=certificate_arn)
            return True
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code == "ResourceNotFoundException":
                return False
            if code != "ResourceInUseException" or monotonic() + CERTIFICATE_IN_USE_RETRY_SECONDS > deadline:
                raise
        sleep(CERTIFICATE_IN_USE_RETRY_SECONDS)


def certificate_pem(settings: Settings, certificate_arn: str) -> str:
    """The PEM certificate ACM holds under ``certificate_arn`` (an imported one: its own)."""
    return str(aws.client("acm", settings).get_certificate(CertificateArn=certificate_arn)["Certificate"])
