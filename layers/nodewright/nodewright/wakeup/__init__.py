"""The API server's bell: a webhook on a Lambda function URL that wakes the provisioner.

kube-apiserver calls the URL (a ValidatingWebhookConfiguration on the CREATE of Events whose CEL
``matchConditions`` let only a scheduler's ``FailedScheduling`` Event about a Pod through: written by
kube-scheduler's asynchronous event broadcaster, so the call never holds its scheduling loop);
the webhook answers ``allowed`` at once and, at most once a second per container, invokes the
provisioner's wake-up alias asynchronously. It never trusts what the review says beyond "something
may be pending": the provisioner reads the truth from the API server, as on every tick. The same
URL serves the CRDs' conversion webhook (``api.conversion_review``).

* ``events``: the wake-up event (what the webhook sends, what the provisioner parses);
* ``webhook``: the HTTP side (secret path and its rotation, limits, rate limit, coalescing, the
  two reviews).
"""
