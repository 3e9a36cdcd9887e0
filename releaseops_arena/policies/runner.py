"""`play`: one episode of a reference policy, driven through the engine's public `Episode`."""

from __future__ import annotations

import json
import random

from ..rendering import View
from ..splits import ReleaseTasks, start_episode
from .base import Policy
from .baselines import TruthReader

_PUBLIC_TASKS = ReleaseTasks()  # the public draw, as in-process environments use


def play(policy: Policy, scenario: dict, rng_seed: int = 0) -> dict:
    """Run one episode; return its transcript, metrics and return.

    Every call goes through the engine's own validation, so a malformed call
    (an unknown tool or argument) is an invalid action like any other. A policy
    that returns None stops; the engine scores the cut episode as a missed deadline.
    """
    episode, _ = start_episode(scenario, _PUBLIC_TASKS)
    policy.rng = random.Random(rng_seed)
    observation = episode.initial_observation
    if policy.privileged:
        policy.truth = TruthReader(episode)
    view = View(json.loads(observation))
    policy.begin(observation)
    steps = []
    while not episode.done:
        call = policy.act(view)
        if call is None:
            episode.abandon()
            break
        tool, args = call
        result = episode.step(tool, dict(args))
        if result.error is None:
            view.update(json.loads(result.text))
            steps.append({"tool": tool, "arguments": args, "result": result.text})
            policy.observe(result.text)
        else:
            steps.append({"tool": tool, "arguments": args, "error": result.error})
            policy.observe(str({"error": result.error}))
    return {
        "scenario": dict(scenario),
        "policy": policy.name,
        "observation": observation,
        "steps": steps,
        "metrics": episode.metrics(),
        "return": episode.episode_return,
    }
