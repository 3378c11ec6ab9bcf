"""Admission checks over rendered units: what the API server, Argo CD and Flux accept."""
