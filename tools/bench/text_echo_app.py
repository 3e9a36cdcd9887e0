"""The payload floor: an echo environment on the same OpenEnv + uvicorn stack that answers every reset
and step with exactly the `text` our server sends there, and does no engine work.

    BENCH_TEXT_ECHO=/tmp/texts.json PYTHONPATH=. .venv/bin/python -m uvicorn tools.bench.text_echo_app:app --port 8003

The model's text is payload no design can drop; everything else in our replies is ours
to design, so this is the floor our server is held to. At start-up it loads the texts
of the transcripts the load client will replay (`write_texts`, a JSON file named by
$BENCH_TEXT_ECHO). A reset's scenario picks the episode (a dict lookup) and step i
returns that episode's texts[i], in the same observation shape (a `text` field). The
client sends exactly the messages it sends ours, so requests stay as small as ours.
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import Any, Optional

from openenv.core import Environment, Observation, State, create_app

from tools.bench.echo_app import EchoAction, dispatched, guarded

TEXTS_ENV = "BENCH_TEXT_ECHO"


class TextEchoObservation(Observation):
    text: str = ""


def scenario_key(scenario: dict) -> str:
    return json.dumps(scenario, sort_keys=True)


def texts_of(episodes: list[dict]) -> dict[str, dict]:
    """The texts our server sends for each recorded episode (`tools.bench.common.record`), keyed by scenario:
    the reset's initial observation, then each step's result or error message."""
    return {
        scenario_key(ep["scenario"]): {
            "reset": ep["observation"],
            "steps": [r if r is not None else e for r, e in zip(ep["results"], ep["errors"])],
        }
        for ep in episodes
    }


def write_texts(episodes: list[dict], path: Path) -> None:
    Path(path).write_text(json.dumps(texts_of(episodes)))


def load_texts(path: Optional[str]) -> dict[str, dict]:
    if not path:
        raise SystemExit(
            f"tools.bench.text_echo_app needs ${TEXTS_ENV}: the path of a file written by "
            "tools.bench.text_echo_app.write_texts"
        )
    return json.loads(Path(path).read_text())


class TextEchoEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    texts: dict[str, dict] = {}  # set once by `build_app`; OpenEnv builds one instance per session

    def __init__(self, texts: Optional[dict[str, dict]] = None):
        super().__init__()
        self._texts = self.texts if texts is None else texts
        self._steps: list[str] = []
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> TextEchoObservation:
        scenario = {**kwargs, **({"seed": seed} if seed is not None else {})}
        episode = self._texts.get(scenario_key(scenario))
        if episode is None:
            raise ValueError(
                f"no recorded texts for scenario {scenario}; the load client replays only the "
                "episodes written by write_texts"
            )
        self._steps = episode["steps"]
        self._state = State(episode_id=episode_id or "text-echo", step_count=0)
        return TextEchoObservation(text=episode["reset"], done=False, reward=0.0)

    def step(
        self,
        action: EchoAction,
        timeout_s: Optional[float] = None,  # type: ignore[override]
        **kwargs: Any,
    ) -> TextEchoObservation:
        i = self._state.step_count
        self._state.step_count += 1
        return TextEchoObservation(text=self._steps[i] if i < len(self._steps) else "", done=False, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


def build_app(path: Optional[str]):
    TextEchoEnvironment.texts = load_texts(path)
    app = guarded(
        create_app(
            dispatched(TextEchoEnvironment),
            EchoAction,
            TextEchoObservation,
            env_name="text_echo",
            max_concurrent_envs=64,
        )
    )
    # As server/app.py does: the start-up heap leaves the collector's view, so neither
    # side of the comparison pays full collections over gradio's objects.
    gc.collect()
    gc.freeze()
    return app


def __getattr__(name: str):
    """`tools.bench.text_echo_app:app` loads the texts when uvicorn asks for the app (at start-up), so the
    tests can import the environment without a texts file."""
    if name == "app":
        globals()["app"] = build_app(os.environ.get(TEXTS_ENV))
        return globals()["app"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
