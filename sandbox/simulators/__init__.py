"""The parts of a cluster that are not the API server, each a loop that talks to it only through the
kubernetes client: a kube-scheduler, a kubelet per EC2 instance, and the controller-manager pieces."""

from sandbox.simulators.controllers import ControllerManager, ServiceAccounts
from sandbox.simulators.kube import Kube, api_client_from_kubeconfig
from sandbox.simulators.kubelet import Kubelet
from sandbox.simulators.loop import ReconcileLoop
from sandbox.simulators.scheduler import Scheduler

__all__ = [
    "ControllerManager",
    "Kube",
    "Kubelet",
    "ReconcileLoop",
    "Scheduler",
    "ServiceAccounts",
    "api_client_from_kubeconfig",
]
