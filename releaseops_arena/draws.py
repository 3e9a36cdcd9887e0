"""The scenario generator's random draws, on the public `getrandbits` and `random` of `random.Random`.

Each reproduces, draw for draw, what CPython's `random.Random` method it stands
for returns (`randrange`, `randint`, `choice`, `shuffle`, `choices(k=1)`): the worlds of
every split stay exactly as they were. They exist because the generator makes
dozens of draws per reset and phase change, and the library methods check
arguments the generator never gets wrong: on CPython 3.11, `randrange(100, 1000)`
took 0.26 us against 0.18 us for `between` (the `getrandbits` under both, 0.06 us).
They also pin the algorithm, which the `random` module does not promise to keep
across Python versions.
"""

from __future__ import annotations

import random
from bisect import bisect
from itertools import accumulate


def below(rng: random.Random, n: int) -> int:
    """An int in [0, n), n > 0: `rng.randrange(n)` (rejection sampling on n's bit length)."""
    k = n.bit_length()
    r = rng.getrandbits(k)
    while r >= n:
        r = rng.getrandbits(k)
    return r


def between(rng: random.Random, low: int, high: int) -> int:
    """An int in [low, high], both included: `rng.randint(low, high)`."""
    return low + below(rng, high - low + 1)


def one_of(rng: random.Random, options):
    """One item of a non-empty sequence: `rng.choice(options)`."""
    return options[below(rng, len(options))]


def shuffle(rng: random.Random, items: list) -> None:
    """Shuffle a list in place: `rng.shuffle(items)` (Fisher-Yates from the end)."""
    for i in range(len(items) - 1, 0, -1):
        j = below(rng, i + 1)
        items[i], items[j] = items[j], items[i]


# Cumulative weights by weight tuple: the tables are few and fixed, and
# `random.choices` would rebuild them on every draw (the hot spot of a phase change).
_CUMULATIVE: dict[tuple, tuple[list[float], float]] = {}
# The same, by the identity of a weight tuple (the tables are module constants). A timing side
# channel otherwise: hashing a float takes longer for some values than others (0.55 than 0.5), and
# the tables looked up differ by archetype and by whether a site is a shortcut.
_BY_ID: dict[int, tuple[object, list[float], float]] = {}
_BY_ID_MAX = 512  # a caller that builds a fresh tuple per draw must not grow it without end

# Draws made only so that one branch takes as long as the other (a timing side channel): their
# values are never used, so they come from here and every scenario's own stream stays as it was.
SHADOW = random.Random(0)


def pick(rng: random.Random, options, weights):
    """`rng.choices(options, weights=weights, k=1)[0]`, draw for draw (the same float and bisect)."""
    entry = _BY_ID.get(id(weights))
    if entry is None or entry[0] is not weights:
        key = tuple(weights)
        cum = _CUMULATIVE.get(key)
        if cum is None:
            acc = list(accumulate(key))
            if len(acc) != len(options) or not acc[-1] > 0.0:
                raise ValueError(f"{len(options)} options need as many positive weights, got {key}")
            cum = _CUMULATIVE[key] = (acc, acc[-1] + 0.0)
        entry = (weights, *cum)
        if type(weights) is tuple and len(_BY_ID) < _BY_ID_MAX:
            _BY_ID[id(weights)] = entry  # holds the tuple, so its id is not reused while cached
    _, acc, total = entry
    return options[bisect(acc, rng.random() * total, 0, len(acc) - 1)]
