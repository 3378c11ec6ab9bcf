"""The foundation every layer stands on: files written atomically, reads that stay inside the stack,
YAML read as Kubernetes reads it, the cache, the run lock, the loopback rule."""
