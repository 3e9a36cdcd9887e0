"""Named evaluation and training splits with disjoint seed ranges.

`train` and `heldout_seeds` use the seen families and mixes on disjoint
seeds; `unseen_family` uses only the held-out families, `unseen_mix` only the
held-out mix. The held-out family and mix never appear in `train`.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import numbers
from typing import Iterator

from .catalog import (
    ARCHETYPE_MIXES,
    BENCHMARK_VERSION,
    DIFFICULTIES,
    FAMILIES,
    HELDOUT_FAMILIES,
    HELDOUT_MIXES,
    scenario_config,
)
from .episode import Episode

SPLITS: dict[str, dict] = {
    "train": {"families": FAMILIES, "mixes": ARCHETYPE_MIXES, "seed_base": 0},
    "heldout_seeds": {"families": FAMILIES, "mixes": ARCHETYPE_MIXES, "seed_base": 1_000_000},
    "unseen_family": {"families": HELDOUT_FAMILIES, "mixes": ARCHETYPE_MIXES, "seed_base": 2_000_000},
    "unseen_mix": {"families": FAMILIES, "mixes": HELDOUT_MIXES, "seed_base": 3_000_000},
}
SEEDS_PER_SPLIT = 1_000_000  # seeds of split s lie in [seed_base, seed_base + SEEDS_PER_SPLIT)


def scenarios(split: str, n: int, difficulty: str | None = None, start: int = 0) -> Iterator[dict]:
    """The first `n` scenarios of a split (cycling families, mixes and, unless fixed, difficulties)."""
    _check_split(split)
    if difficulty is not None and difficulty not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r}; valid: {', '.join(DIFFICULTIES)}")
    if start < 0 or start + n > SEEDS_PER_SPLIT:
        raise ValueError(
            f"scenarios {start}..{start + n - 1} leave the split: start + n must lie in 0..{SEEDS_PER_SPLIT}"
        )
    spec = SPLITS[split]
    fams, mixes = spec["families"], spec["mixes"]
    for i in range(start, start + n):
        yield {
            "family": fams[i % len(fams)],
            "seed": spec["seed_base"] + i,
            "difficulty": difficulty or DIFFICULTIES[(i // len(fams)) % len(DIFFICULTIES)],
            "archetype_mix": mixes[(i // (len(fams) * len(DIFFICULTIES))) % len(mixes)],
        }


# ----------------------------------------------------------------- tasks
# The same splits, seen as OpenEnv's Task API sees them: every index of a split
# is a task that fixes family, seed, difficulty and archetype mix (the i-th
# scenario of `scenarios`; with an evaluation secret, an evaluation split's
# scenarios in a keyed order, `private_task_scenario`). `difficulty` at reset
# re-targets a task at one level, as `scenarios(split, n, difficulty)` does; the
# evaluation harness, the dataset builder and the server all read tasks through
# `ReleaseTasks`.

EVALUATION_SPLITS = ("heldout_seeds", "unseen_family", "unseen_mix")
# Where a server (and the dataset builder) read the operator's evaluation secret.
SECRET_ENV = "RELEASEOPS_EVAL_SECRET"
TASKS_PER_SPLIT = SEEDS_PER_SPLIT
LIST_PREVIEW = 100  # list_tasks returns this many; num_tasks and get_task_range reach the rest
MAX_RANGE = 1000  # tasks per get_task_range call, so one request cannot ask for a million specs
SPLIT_DESCRIPTIONS = {
    "train": "seen families and mixes; the only split to train on",
    "heldout_seeds": "seen families and mixes on seeds train never uses",
    "unseen_family": "held-out families, each with a mechanism no train scenario has",
    "unseen_mix": "the worker mix train never uses",
}


def task_scenario(split: str, index: int, difficulty: str | None = None) -> dict:
    """The scenario arguments of task `index` of `split` (at `difficulty` if given)."""
    _check_split(split)
    if not _is_int(index) or not 0 <= index < TASKS_PER_SPLIT:
        raise IndexError(f"task index must be an int in 0..{TASKS_PER_SPLIT - 1}, not {index!r}")
    return next(scenarios(split, 1, difficulty, start=int(index)))


def _cycle(split: str) -> int:
    """The length of a split's public cycle: every family at every difficulty with every mix, once."""
    spec = SPLITS[split]
    return len(spec["families"]) * len(DIFFICULTIES) * len(spec["mixes"])


@functools.lru_cache(maxsize=256)
def _private_block(secret: str, split: str, block: int) -> tuple[int, ...]:
    """The keyed order of one block of `_cycle(split)` consecutive tasks: offset o plays the public
    draw's offset `order[o]`. Each offset's rank is an HMAC of the secret (apart from `task_token`'s
    messages, which start with a split's name), so the order needs no random generator's algorithm."""

    def rank(offset: int) -> bytes:
        return hmac.new(secret.encode(), f"draw/{split}/{block}/{offset}".encode(), hashlib.sha256).digest()

    return tuple(sorted(range(_cycle(split)), key=rank))


def private_task_scenario(secret: str, split: str, index: int, difficulty: str | None = None) -> dict:
    """The scenario arguments of task `index` of an evaluation `split` under `secret`.

    Tasks come in blocks of `_cycle(split)`, each holding every family at every difficulty with every
    mix exactly once, as the public draw's blocks do; within a block the secret shuffles which index
    plays which, so that the public arithmetic says nothing of an index's family or mix. The seed stays
    the index's (the secret salts the world itself), and `difficulty` re-targets the level as ever.
    """
    public = task_scenario(split, index, difficulty)  # checks split, index and difficulty
    block, offset = divmod(int(index), _cycle(split))
    drawn = next(scenarios(split, 1, difficulty, start=_private_block(secret, split, block)[offset]))
    return {**drawn, "seed": public["seed"]}


class ReleaseTasks:
    """OpenEnv's `TaskProvider` protocol over the four splits.

    `secret` is the operator's evaluation secret (empty: the public draw). It
    salts the worlds of the evaluation splits only, and shuffles which of their
    indices plays which family, difficulty and mix (`private_task_scenario`), so
    the train split stays reproducible everywhere while a private evaluation
    cannot be rebuilt, or its tasks' families and mixes named, from the public
    generator.
    """

    def __init__(self, secret: str = ""):
        self._secret = secret

    @property
    def private(self) -> bool:
        """Whether the evaluation splits are salted with a secret (else the public draw)."""
        return bool(self._secret)

    def scenario(self, split: str, index: int, difficulty: str | None = None) -> dict:
        """The scenario arguments task `index` of `split` really plays (at `difficulty` if given)."""
        if self._secret and split in EVALUATION_SPLITS:
            return private_task_scenario(self._secret, split, index, difficulty)
        return task_scenario(split, index, difficulty)

    def list_splits(self) -> list[dict]:
        return [
            {
                "name": name,
                "type": "train" if name == "train" else "test",
                "num_tasks": TASKS_PER_SPLIT,
                "description": SPLIT_DESCRIPTIONS[name],
            }
            for name in SPLITS
        ]

    def num_tasks(self, split: str) -> int:
        _check_split(split)
        return TASKS_PER_SPLIT

    def get_task(self, split: str, index: int) -> dict:
        # A task's world depends on the benchmark version: the spec says which, so that results
        # of different versions are never mixed (a reset ignores the key).
        return {
            "id": f"{split}/{index}",
            "split": split,
            "index": index,
            **self.scenario(split, index),
            "benchmark_version": BENCHMARK_VERSION,
        }

    def list_tasks(self, split: str) -> list[dict]:
        """A preview of the first LIST_PREVIEW tasks: a split holds TASKS_PER_SPLIT."""
        return self.get_task_range(split, 0, LIST_PREVIEW)

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict]:
        _check_split(split)
        indices = range(TASKS_PER_SPLIT)[slice(start, stop)]  # Python slice semantics, as the protocol says
        if len(indices) > MAX_RANGE:
            raise ValueError(
                f"at most {MAX_RANGE} tasks per range; asked for {len(indices)} ({indices.start}..{indices.stop - 1})"
            )
        return [self.get_task(split, i) for i in indices]

    def episode(self, split: str, index: int, difficulty: str | None = None, token: str | None = None) -> Episode:
        """A new `Episode` for one task, salted with the secret on an evaluation split.

        With a secret, an evaluation task is played only with its `token`
        (`task_token`): otherwise anyone reaching the server could replay the
        very task another session is playing, search it for a winning line in
        scratch episodes, and play that line for real.
        """
        scenario = self.scenario(split, index, difficulty)
        if not self._secret or split not in EVALUATION_SPLITS:
            return Episode(**scenario)
        expected = task_token(self._secret, split, index, difficulty)
        if not isinstance(token, str) or not hmac.compare_digest(token, expected):
            raise ValueError(
                f"this server's evaluation splits are private: a reset of a {split} task needs its "
                "token, which the operator derives from the secret (splits.task_token)"
            )
        return Episode(**scenario, salt=self._secret)


def task_token(secret: str, split: str, index: int, difficulty: str | None = None) -> str:
    """The operator's credential for one evaluation task (split, index, difficulty) under `secret`."""
    message = f"{split}/{int(index)}/{difficulty or ''}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()[:32]


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLITS)}")


def reset_arguments(columns: dict) -> dict:
    """The reset arguments a dataset row (or a caller's keywords) asks for, in-process or remote.

    With `index`: the task, `split` and `index` (and `difficulty` and the
    operator's `token` when given).
    Otherwise the explicit scenario (`family`, `seed`, `difficulty`,
    `archetype_mix`, each defaulting from the catalogue). Other columns, such as
    `prompt`, are dropped; asking for both a task and a scenario is refused. A
    `seed` beside a task is dropped too: the task fixes its world, and generic
    OpenEnv clients (verifiers' taskset) send a reset seed with every task.
    """
    if columns.get("index") is None:
        return scenario_config(columns)
    explicit = [key for key in ("family", "archetype_mix") if columns.get(key) is not None]
    if explicit:
        raise ValueError(
            f"pass a task (split, index, optional difficulty) or a scenario (family, seed, "
            f"difficulty, archetype_mix), not both: got index and {', '.join(explicit)}"
        )
    if columns.get("split") is None:
        raise ValueError(f"index needs a split; valid: {', '.join(SPLITS)}")
    index = columns["index"]
    task = {"split": columns["split"], "index": int(index) if _is_int(index) else index}  # numpy ints from a dataset
    for key in ("difficulty", "token"):
        if columns.get(key) is not None:
            task[key] = columns[key]
    return task


def start_episode(columns: dict, tasks: ReleaseTasks) -> tuple[Episode, bool]:
    """The episode a reset asks for (see `reset_arguments`), and whether it is a task."""
    args = reset_arguments(columns)
    if "index" not in args:
        return Episode(**args), False
    return tasks.episode(args["split"], args["index"], args.get("difficulty"), args.get("token")), True


def _is_int(value: object) -> bool:
    return type(value) is int or isinstance(value, numbers.Integral) and not isinstance(value, bool)
