"""`openenv validate` support: the oracle script and probe plan, the resource measurement, the package-mode run."""
