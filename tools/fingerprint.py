"""The behaviour fingerprint: one hash over every reference policy's episodes.

Every reference policy plays the first N tasks of each split at each difficulty,
and the hash covers each episode's observation, calls, results, errors, metrics
and return. A refactor that must not change behaviour keeps this hash.

    .venv/bin/python -m tools.fingerprint            # 100 tasks per slice
    .venv/bin/python -m tools.fingerprint -n 20
"""

from __future__ import annotations

import argparse
import hashlib
import json

from releaseops_arena.catalog import DIFFICULTIES
from releaseops_arena.policies import POLICIES, play
from releaseops_arena.splits import SPLITS, task_scenario


def fingerprint(n: int) -> tuple[int, str]:
    """(episodes played, sha256 of their transcripts)."""
    digest, episodes = hashlib.sha256(), 0
    for name in sorted(POLICIES):
        for split in SPLITS:
            for difficulty in DIFFICULTIES:
                for index in range(n):
                    episode = play(POLICIES[name](), task_scenario(split, index, difficulty), rng_seed=index)
                    digest.update(json.dumps(episode, sort_keys=True).encode())
                    episodes += 1
    return episodes, digest.hexdigest()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100, help="tasks per split and difficulty")
    episodes, digest = fingerprint(parser.parse_args(argv).n)
    print(f"{episodes} episodes  sha256 {digest}")


if __name__ == "__main__":
    main()
