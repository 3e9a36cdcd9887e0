"""The `openai:` policy against a real `transformers serve` process serving the tiny checkpoint.

No mock server: the checkpoint the training tests build is served on 127.0.0.1, and
the endpoint policy must make the same calls as the in-process `hf:` policy. One test
stops a request just before it is sent, to read the endpoint settings it would carry.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("fastapi")

from releaseops_arena.policies import play  # noqa: E402
from releaseops_arena.splits import scenarios  # noqa: E402
from tests.live_server import free_port, http_get  # noqa: E402
from tests.train.test_training import tiny_sft  # noqa: E402,F401  (session fixture: the warmed-up tiny checkpoint)
from training import evaluate as ev  # noqa: E402
from training.openai_policy import OpenAIPolicy, serving_copy  # noqa: E402

HEALTH_TIMEOUT_S = 120.0
EPISODES = 3


def serve(checkpoint: str, log: Path):
    """`transformers serve <checkpoint>` on a free port; yields its /v1 base URL; stopped by PID."""
    cli = Path(sys.executable).with_name("transformers")
    if not cli.exists():
        pytest.skip(f"no transformers CLI next to {sys.executable}")
    port = free_port()
    out = log.open("w")
    proc = subprocess.Popen(
        [
            str(cli),
            "serve",
            checkpoint,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--device",
            "cpu",
            "--log-level",
            "warning",
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited ({proc.returncode}): {log.read_text()[-2000:]}")
            try:
                status, body = http_get(f"{base}/health", timeout=2.0)
                if status == 200 and json.loads(body).get("status") == "ok":
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{base}/health did not answer in {HEALTH_TIMEOUT_S}s")
            time.sleep(0.2)
        yield f"{base}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.close()


@pytest.fixture(scope="module")
def served(tiny_sft, tmp_path_factory):  # noqa: F811
    """The checkpoint, with the chat template it was trained with, behind a live OpenAI-compatible server."""
    root = tmp_path_factory.mktemp("served")
    model = str(serving_copy(tiny_sft, root / "model"))
    for url in serve(model, root / "serve.log"):
        yield model, url


def calls(run: dict) -> list:
    return [(s["tool"], s["arguments"], "error" in s) for s in run["steps"]]


def test_served_checkpoint_makes_the_same_calls_as_the_in_process_policy(served, tiny_sft, monkeypatch):  # noqa: F811
    model, url = served
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # local server: the key defaults to "EMPTY"
    hf = ev.make_policy(f"hf:{tiny_sft}")
    remote = OpenAIPolicy(model, base_url=url)
    answered = 0
    try:
        for i, scenario in enumerate(scenarios("heldout_seeds", EPISODES, "easy")):
            a, b = play(hf, scenario, i * 7919), play(remote, scenario, i * 7919)
            assert calls(b) == calls(a), f"episode {i}"
            assert b["return"] == pytest.approx(a["return"])
            assert b["metrics"]["invalid_actions"] == a["metrics"]["invalid_actions"]
            # Every turn is one request: answered (with token usage), or a 500 on a malformed call.
            assert remote.usage["requests"] + remote.usage["endpoint_errors"] >= 1
            if remote.usage["requests"]:
                assert remote.usage["prompt_tokens"] > 0 and remote.usage["completion_tokens"] > 0
            answered += remote.usage["requests"]
        assert answered >= 1  # the server answered some turns: a comparison of calls, not of errors
    finally:
        remote.close()


def test_evaluate_cli_path_runs_concurrent_episodes_and_reports_tokens(served, tiny_sft):  # noqa: F811
    model, url = served
    local = ev.evaluate(f"hf:{tiny_sft}", "heldout_seeds", EPISODES, "easy", progress=False)
    remote = ev.evaluate(f"openai:{model}", "heldout_seeds", EPISODES, "easy", workers=2, progress=False, base_url=url)
    assert [e["episode_return"] for e in remote["episodes"]] == [e["episode_return"] for e in local["episodes"]]
    assert remote["metrics"]["invalid_action"] == local["metrics"]["invalid_action"]
    usage = remote["metrics"]["usage"]
    assert usage["requests"] == sum(e["usage"]["requests"] for e in remote["episodes"])
    assert usage["prompt_tokens"] > usage["completion_tokens"] > 0
    assert "| openai:" in ev.markdown([remote])


def test_the_api_key_comes_from_the_environment_and_is_never_shown(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-test")
    policy = OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1")
    assert policy.client._client.api_key == "sk-secret-test"
    assert "sk-secret" not in repr(policy) + policy.name + json.dumps(policy.usage)
    monkeypatch.delenv("OPENAI_API_KEY")
    assert OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1").client._client.api_key == "EMPTY"


def test_429_and_5xx_are_retried_with_backoff_and_bad_arguments_reach_the_env():
    """The retry loop, through the SDK's real HTTP stack with a scripted transport (not a server)."""
    import httpx
    from openai import AsyncOpenAI

    answers = [
        httpx.Response(429, headers={"retry-after": "0"}, json={"error": {"message": "slow down"}}),
        httpx.Response(503, json={"error": {"message": "busy"}}),
        httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": "",
                            "tool_calls": [
                                {
                                    "id": "c0",
                                    "type": "function",
                                    "function": {"name": "approve_proposal", "arguments": "{not json"},
                                },
                                {
                                    "id": "c1",
                                    "type": "function",
                                    "function": {"name": "launch_rocket", "arguments": "{}"},
                                },
                            ],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
            },
        ),
        # then a reply without a tool call: the episode ends, as with `hf:`
        httpx.Response(
            200,
            json={
                "id": "y",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "done"}}],
            },
        ),
    ]
    seen = []

    def handler(request):
        seen.append(json.loads(request.content))
        return answers[min(len(seen), len(answers)) - 1]

    policy = OpenAIPolicy("m", base_url="http://127.0.0.1:9/v1", backoff=0.01)
    policy.client._client = AsyncOpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="EMPTY",
        max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
    )
    scenario = next(iter(scenarios("heldout_seeds", 1, "easy")))
    run = play(policy, scenario, 0)
    assert policy.client.retries == 2
    assert len(seen) >= 3 and [t["function"]["name"] for t in seen[0]["tools"]][0] == "approve_proposal"
    # Both malformed calls were passed to the env and penalised as invalid actions.
    assert [s["tool"] for s in run["steps"][:2]] == ["approve_proposal", "launch_rocket"]
    assert all("error" in s for s in run["steps"][:2])
    assert run["metrics"]["invalid_actions"] == 2 and len(run["steps"]) == 2 and len(seen) == 4
    assert run["metrics"]["truncated"]  # abandoned: the model stopped calling tools
    assert policy.usage["prompt_tokens"] >= 11
    policy.close()


def test_endpoint_settings_reach_the_policy_and_each_setting_gets_its_own(monkeypatch):
    monkeypatch.setattr(ev, "OPENAI_ENDPOINT", {**ev.OPENAI_ENDPOINT, "base_url": "http://127.0.0.1:9/v1"})
    plain = ev.make_policy("openai:some-model")
    assert ev.make_policy("openai:some-model") is plain and plain.extra == {}
    # `--chat-template-kwargs '{"enable_thinking": false}' --max-new-tokens 1024` (Qwen3 on vLLM).
    ev.OPENAI_ENDPOINT.update(chat_template_kwargs={"enable_thinking": False}, max_new_tokens=1024)
    qwen = ev.make_policy("openai:some-model")
    assert qwen is not plain and qwen.client.max_tokens == 1024
    assert qwen.extra == {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
    captured = {}

    async def create(**kwargs):  # the request as it would be sent
        captured.update(kwargs)
        raise RuntimeError("not sent")

    monkeypatch.setattr(qwen.client, "_create", create)
    with pytest.raises(RuntimeError, match="not sent"):
        asyncio.run(qwen.client.complete_with_tools([{"role": "user", "content": "x"}], qwen.tools, **qwen.extra))
    assert captured["extra_body"] == {"chat_template_kwargs": {"enable_thinking": False}}
    assert captured["max_tokens"] == 1024 and [t["function"]["name"] for t in captured["tools"]] == sorted(
        t["function"]["name"] for t in captured["tools"]
    )  # TRL's order
