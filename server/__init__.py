"""OpenEnv server for ReleaseOps Arena (installed as `releaseops_arena.server`)."""
