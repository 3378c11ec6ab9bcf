"""Talking to Kubernetes: the client, kubeconfigs, and an ephemeral local control plane."""
