"""The product running as AWS runs it, over a started sandbox: the stack's runtime (``stack``: one
worker process per function container, the triggers, the spot market), the wake-up's function URL
and load balancer (``wakeup``), the events the functions receive (``events``), the one place that
loads and invokes a handler (``lambdas``), and ``sandbox up``'s live log (``livelog``)."""
