"""The oracle of `openenv validate` (openenv.yaml: validation.capabilities.oracle, form `script`).

It shows that the served reward reaches the declared maximum: the privileged
`releaseops_arena.policies.Oracle` plays a public `train` task in-process (its `TruthReader`
reads that process's own `Episode`), then its calls are replayed on a server
over `/ws` and the server's rewards are checked. The hidden truth never
crosses the wire: the server has no oracle hook to switch on or off, and a
policy talking to it cannot reach the oracle. It plays the train split, the
public draw that any copy of the source rebuilds; with RELEASEOPS_EVAL_SECRET
set, the evaluation splits' worlds are ones it cannot rebuild, by design.

The chosen task is the first `train` index whose oracle return is RETURN_MAX
(three violations revealed, as many as a release holds), the kind of task on which the
reward's upper bounds are reached: the last step pays SAFE_SHIP - OPENING_REWARD +
3 * DISCOVERY = STEP_REWARD_MAX, the declared top of the reward range, and the return is RETURN_MAX.
The same line is the validator's runtime probe (tools/validation/runtime.json).

    python tools/validation/oracle.py --write-plan           # regenerate tools/validation/runtime.json
    python tools/validation/oracle.py --url http://127.0.0.1:8000   # replay on a server, check
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from releaseops_arena import rewards
from releaseops_arena.policies import Oracle, play
from releaseops_arena.splits import task_scenario

PLAN = Path(__file__).with_name("runtime.json")
SEARCH = 2000  # train indices scanned for a task that reaches the bounds (the first is well inside)
EPISODE_ID = "validation-oracle"


def oracle_task() -> tuple[int, dict, dict]:
    """(index, scenario, transcript) of the first train task whose oracle return is RETURN_MAX."""
    for index in range(SEARCH):
        scenario = task_scenario("train", index, "easy")
        run = play(Oracle(), scenario)
        if run["return"] == rewards.RETURN_MAX:
            return index, scenario, run
    raise RuntimeError(f"no train task in 0..{SEARCH - 1} lets the oracle reach RETURN_MAX {rewards.RETURN_MAX}")


def plan() -> dict:
    """The runtime plan (OpenEnv's runtime-plan schema 1): the oracle's line on that task."""
    index, scenario, run = oracle_task()
    options = {key: value for key, value in scenario.items() if key != "seed"}
    return {
        "plan_schema_version": "1",
        "reset": {"episode_id": EPISODE_ID, "seed": scenario["seed"], "options": options},
        "actions": [{"tool_name": s["tool"], "arguments": s["arguments"]} for s in run["steps"]],
    }


def replay(base_url: str, runtime_plan: dict, timeout_s: float = 30.0) -> list[float]:
    """Play the plan on a server over /ws; return the step rewards it served."""
    from websockets.sync.client import connect

    ws_url = base_url.rstrip("/").replace("http://", "ws://").replace("https://", "wss://") + "/ws"
    reset = {
        **runtime_plan["reset"]["options"],
        "seed": runtime_plan["reset"]["seed"],
        "episode_id": runtime_plan["reset"]["episode_id"],
    }
    served = []
    with connect(ws_url, proxy=None, open_timeout=timeout_s, max_size=2**24) as ws:
        for message in [{"type": "reset", "data": reset}] + [
            {"type": "step", "data": a} for a in runtime_plan["actions"]
        ]:
            ws.send(json.dumps(message))
            reply = json.loads(ws.recv(timeout=timeout_s))
            if reply.get("type") != "observation":
                raise RuntimeError(f"{message['type']} was answered with {reply}")
            if message["type"] == "step":
                served.append(reply["data"]["reward"])
            if reply["data"]["done"]:
                break
        ws.send(json.dumps({"type": "close"}))
    return served


def check(served: list[float], n_actions: int) -> list[str]:
    """What is wrong with the served rewards of the oracle's line (empty: it reached the bounds)."""
    problems = []
    if len(served) != n_actions:
        problems.append(f"the episode ended after {len(served)} of {n_actions} oracle calls")
    if not served or served[-1] != rewards.STEP_REWARD_MAX:
        problems.append(f"last step reward {served[-1] if served else None} != range top {rewards.STEP_REWARD_MAX}")
    total = round(rewards.OPENING_REWARD + sum(served), 6)  # the reset's reward, then every step's
    if total != rewards.RETURN_MAX:
        problems.append(f"return {total} != RETURN_MAX {rewards.RETURN_MAX}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write-plan", action="store_true", help=f"write {PLAN.name} from the oracle's line")
    action.add_argument("--url", help="replay the committed plan on this server and check its rewards")
    args = parser.parse_args(argv)
    if args.write_plan:
        PLAN.write_text(json.dumps(plan(), indent=1) + "\n")
        print(f"wrote {PLAN}")
        return 0
    runtime_plan = json.loads(PLAN.read_text())
    served = replay(args.url, runtime_plan)
    problems = check(served, len(runtime_plan["actions"]))
    print(
        json.dumps(
            {
                "served_rewards": served,
                "last": served[-1] if served else None,
                "return": round(
                    rewards.OPENING_REWARD + sum(served), 6
                ),  # the reset's reward too "range_top": rewards.STEP_REWARD_MAX,
                "return_max": rewards.RETURN_MAX,
                "problems": problems,
            }
        )
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
