"""Units to artifacts: reproducible bundles, OCI push and pull, Argo CD Applications, the cub plugin asset."""
