"""eksinf: render, guard, link, bundle and deploy a GPU-inference stack on Amazon EKS."""

__version__ = "0.1.0"
