"""An LLM behind any OpenAI-compatible endpoint as a policy (`--policy openai:<model> --base-url URL`).

vLLM, TGI, Ollama, llama.cpp's server, `transformers serve` and hosted APIs all speak
the chat-completions protocol; OpenEnv's `openenv.core.llm_client.OpenAIClient`
talks it. The model sees the conversation the TRL loop and the in-process `hf:`
policy show it: the task brief as the system message, a user turn with the reset board, an
assistant `tool_calls` turn per call, a `tool` turn per result, and an invalid
call's result as `str({'error': message})`, with the same seven tool schemas.

    OPENAI_API_KEY=... python -m training.evaluate --policy openai:Qwen/Qwen3-8B \
        --base-url http://127.0.0.1:8001/v1 --split heldout_seeds -n 200 --workers 8

The key comes from the environment (`OPENAI_API_KEY`; "EMPTY" for local servers),
never from an argument, and is never logged. Requests time out, and 429, 5xx,
timeouts and dropped connections are retried with exponential backoff. Every
episode's token usage, when the endpoint reports it, is on `policy.usage`
(the evaluation harness copies it into each episode's result).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from pathlib import Path
from typing import Any

from openenv.core.llm_client import LLMResponse, OpenAIClient, ToolCall, _mcp_tools_to_openai

from releaseops_arena.brief import with_board
from releaseops_arena.policies import Policy
from releaseops_arena.rewards import MAX_TOOL_CALLS

from .tool_calls import tools_column

# Port 8001: 8000 is the environment server's (`make serve`); a model server runs beside it.
DEFAULT_BASE_URL = "http://127.0.0.1:8001/v1"
API_KEY_ENV = "OPENAI_API_KEY"
RETRY_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))


def serving_copy(checkpoint: str | Path, out: str | Path) -> Path:
    """A copy of a TRL-trained checkpoint whose chat template is the one it was trained and `hf:`-evaluated with.

    OpenAI-compatible servers render the tokenizer's own `chat_template`. TRL trains (and `hf:`
    evaluates) with `get_training_chat_template`, which for Qwen3 keeps an empty `<think></think>`
    block in every earlier assistant turn; the stock template drops it, so from the second turn on a
    served model would read a prompt it never saw. Serve this copy to reproduce `hf:` exactly.
    """
    import shutil

    from transformers import AutoTokenizer
    from trl.chat_template_utils import get_training_chat_template

    out = Path(out)
    shutil.copytree(checkpoint, out, dirs_exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(out)
    template = get_training_chat_template(tokenizer)
    if template is not None:
        tokenizer.chat_template = template
        tokenizer.save_pretrained(out)
    return out


def parse_arguments(raw: Any) -> dict:
    """A tool call's arguments as the env receives them; unparsable text is passed on (an invalid action)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return {"raw": raw}
    return raw if isinstance(raw, dict) else {"value": raw}


class ToolCallingClient(OpenAIClient):
    """`OpenAIClient` with a timeout, retries with backoff, tolerant tool-call parsing and token usage.

    `complete_with_tools` takes tools in OpenAI function format as well as MCP
    format, so the schemas the TRL path renders (with their `return` entry)
    reach the server unchanged. A tool call whose arguments are not JSON is
    kept (as `{"raw": text}`) rather than raising, so the env can penalise it.
    """

    def __init__(
        self,
        *args: Any,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        # The SDK's own retries are off: one retry policy, here, that the tests can see.
        self._client = self._client.with_options(timeout=timeout, max_retries=0)
        self.max_retries, self.backoff, self.max_backoff = max_retries, backoff, max_backoff
        self.retries = 0  # retried requests over this client's life (429, 5xx, timeouts, dropped connections)
        self._jitter = random.Random(0)

    def _delay(self, attempt: int, exc: Exception) -> float:
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
        try:
            after = float(headers.get("retry-after", ""))
        except ValueError:
            after = None
        base = min(self.max_backoff, self.backoff * 2**attempt)
        return (
            min(self.max_backoff, after) if after is not None and after >= 0 else base * (0.5 + self._jitter.random())
        )

    async def _create(self, **create_kwargs: Any):
        import openai

        for attempt in range(self.max_retries + 1):
            try:
                return await self._client.chat.completions.create(**create_kwargs)
            except (openai.APIConnectionError, openai.APIStatusError) as exc:  # APITimeoutError is a connection error
                status = getattr(exc, "status_code", None)
                if attempt == self.max_retries or (status is not None and status not in RETRY_STATUS):
                    raise
                self.retries += 1
                await asyncio.sleep(self._delay(attempt, exc))
        raise AssertionError("unreachable")

    async def complete_with_tools(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any
    ) -> LLMResponse:
        create_kwargs = self._chat_completion_kwargs(messages, **kwargs)
        if kwargs.get("extra_body"):  # OpenEnv's kwargs builder keeps only max_tokens and temperature
            create_kwargs["extra_body"] = kwargs["extra_body"]
        openai_tools = [t if t.get("type") == "function" else _mcp_tools_to_openai([t])[0] for t in tools]
        if openai_tools:
            create_kwargs["tools"] = openai_tools
        response = await self._create(**create_kwargs)
        msg = response.choices[0].message
        calls = [
            ToolCall(id=tc.id or f"call_{i}", name=str(tc.function.name), args=parse_arguments(tc.function.arguments))
            for i, tc in enumerate(msg.tool_calls or [])
        ]
        out = LLMResponse(content=msg.content or "", tool_calls=calls)
        usage = getattr(response, "usage", None)
        out.usage = (
            {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
            }
            if usage is not None
            else None
        )
        out.finish_reason = response.choices[0].finish_reason
        return out


class OpenAIPolicy(Policy):
    """Tool calls from a model behind an OpenAI-compatible endpoint; stops when the model stops calling tools.

    Mirrors `training.llm_policy.LLMPolicy` (`hf:`): greedy by default, at most
    `max_turns` model turns, the calls of one turn played in order, and a reply
    without a tool call ends (abandons) the episode.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        max_turns: int = MAX_TOOL_CALLS,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        api_key_env: str = API_KEY_ENV,
        chat_template_kwargs: dict | None = None,
    ):
        self.model = model
        self.name = f"openai:{model}"
        self.stochastic = temperature > 0
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.max_turns = max_turns
        # Key order as TRL's get_json_schema, tools in TRL's order: the template renders both, so this
        # is the prompt GRPO shows (and collected records' `tools`).
        self.tools = tools_column()
        self.client = ToolCallingClient(
            self.base_url,
            None,
            model,
            api_key=os.environ.get(api_key_env) or "EMPTY",
            temperature=temperature,
            max_tokens=max_new_tokens,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
        )
        self._loop: asyncio.AbstractEventLoop | None = None  # one loop per policy: the HTTP client is bound to it
        self.usage: dict = {}
        # Sent as the request's `chat_template_kwargs` (vLLM, SGLang): e.g. {"enable_thinking": false} for Qwen3,
        # whose reasoning would otherwise spend the turn's token budget before the tool call.
        self.extra = {"extra_body": {"chat_template_kwargs": chat_template_kwargs}} if chat_template_kwargs else {}

    def __repr__(self) -> str:  # never the key
        return f"OpenAIPolicy(model={self.model!r}, base_url={self.base_url!r})"

    def begin(self, observation: str) -> None:
        self.messages: list[dict] = with_board(observation)
        self.queue: list[tuple[str, str, dict]] = []
        self.turns = 0
        self.usage = {
            "requests": 0,
            "prompt_tokens": None,
            "completion_tokens": None,
            "total_tokens": None,
            "latency_s": 0.0,
            "finish_reasons": {},
            "endpoint_errors": 0,
        }

    def observe(self, text: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": self.last_id, "content": text})

    def _complete(self) -> LLMResponse | None:
        import openai

        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        start = time.monotonic()
        u = self.usage
        try:
            reply = self._loop.run_until_complete(
                self.client.complete_with_tools(self.messages, self.tools, **self.extra)
            )
        except openai.InternalServerError as exc:
            # A 5xx that outlived the retries. `transformers serve` answers 500 when the model's tool-call
            # markup is not valid JSON (its parser raises), which is deterministic under greedy decoding;
            # `hf:` treats the same unparsable reply as "no tool call" and stops. So does this policy, and
            # the harness counts these turns (`usage.endpoint_errors`) so a broken server cannot hide.
            u["endpoint_errors"] += 1
            u["last_error"] = f"HTTP {exc.status_code}"
            u["latency_s"] = round(u["latency_s"] + time.monotonic() - start, 4)
            return None
        u["requests"] += 1
        u["latency_s"] = round(u["latency_s"] + time.monotonic() - start, 4)
        u["finish_reasons"][str(reply.finish_reason)] = u["finish_reasons"].get(str(reply.finish_reason), 0) + 1
        for key, value in (reply.usage or {}).items():
            if value is not None:
                u[key] = (u[key] or 0) + value
        return reply

    def act(self, view):
        if not self.queue:
            if self.turns >= self.max_turns:
                return None
            self.turns += 1
            reply = self._complete()
            if reply is None:
                return None
            # The history holds the calls as the env received them (arguments re-serialised as JSON),
            # so an unparsable call cannot break the next request.
            calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.args)}}
                for c in reply.tool_calls
            ]
            message: dict = {"role": "assistant", "content": reply.content or ""}
            if calls:
                message["tool_calls"] = calls
            self.messages.append(message)
            self.queue = [(c.id, c.name, c.args) for c in reply.tool_calls]
            if not self.queue:
                return None
        self.last_id, tool, args = self.queue.pop(0)
        return tool, args

    def close(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.run_until_complete(self.client._client.close())
            self._loop.close()
