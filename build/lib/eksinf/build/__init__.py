"""Sources to units: the pinned charts and manifests, the Helm engine, render, guard, verify and validate."""
