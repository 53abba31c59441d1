"""The AWS side of the sandbox: a moto server (``server``) and what it is taught so EC2 answers as EC2
does (fleet allocation, placement, capacity reservations, network and storage of fleet instances,
faults), with the EKS-optimized AMIs SSM publishes and the prices AWS's APIs answer."""
