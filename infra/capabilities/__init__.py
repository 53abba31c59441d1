"""One construct per capability; ``infra.autoscaler.NodewrightAutoscaler`` composes them."""
