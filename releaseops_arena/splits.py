"""Named evaluation and training splits with disjoint seed ranges.

`train` and `heldout_seeds` use the seen families and mixes on disjoint
seeds; `unseen_family` uses only the held-out families, `unseen_mix` only the
held-out mix. The held-out family and mix never appear in `train`.
"""

from __future__ import annotations

from typing import Iterator

from .catalog import ARCHETYPE_MIXES, DIFFICULTIES, FAMILIES, HELDOUT_FAMILIES, HELDOUT_MIXES

SPLITS: dict[str, dict] = {
    "train": {"families": FAMILIES, "mixes": ARCHETYPE_MIXES, "seed_base": 0},
    "heldout_seeds": {"families": FAMILIES, "mixes": ARCHETYPE_MIXES, "seed_base": 1_000_000},
    "unseen_family": {"families": HELDOUT_FAMILIES, "mixes": ARCHETYPE_MIXES, "seed_base": 2_000_000},
    "unseen_mix": {"families": FAMILIES, "mixes": HELDOUT_MIXES, "seed_base": 3_000_000},
}
SEEDS_PER_SPLIT = 1_000_000  # seeds of split s lie in [seed_base, seed_base + SEEDS_PER_SPLIT)


def scenarios(split: str, n: int, difficulty: str | None = None, start: int = 0) -> Iterator[dict]:
    """The first `n` scenarios of a split (cycling families, mixes and, unless fixed, difficulties)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLITS)}")
    if difficulty is not None and difficulty not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r}; valid: {', '.join(DIFFICULTIES)}")
    if start < 0 or start + n > SEEDS_PER_SPLIT:
        raise ValueError(f"scenarios {start}..{start + n - 1} leave the split: start + n must lie in 0..{SEEDS_PER_SPLIT}")
    spec = SPLITS[split]
    fams, mixes = spec["families"], spec["mixes"]
    for i in range(start, start + n):
        yield {
            "family": fams[i % len(fams)],
            "seed": spec["seed_base"] + i,
            "difficulty": difficulty or DIFFICULTIES[(i // len(fams)) % len(DIFFICULTIES)],
            "archetype_mix": mixes[(i // (len(fams) * len(DIFFICULTIES))) % len(mixes)],
        }
