"""An LLM checkpoint as a policy for the evaluation harness (`--policy hf:<path>`).

The model plays through the same seven tools with its chat template's tool
calling, in the conversation format TRL's GRPO loop uses, so a checkpoint is
compared with the baselines by one command:

    python -m training.evaluate --policy rule,hf:runs/qwen3 --split heldout_seeds -n 200 --workers 1
"""

from __future__ import annotations

import json

from releaseops_arena.brief import with_board
from releaseops_arena.policies import Policy
from releaseops_arena.rewards import MAX_TOOL_CALLS

from .tool_calls import tool_functions


class LLMPolicy(Policy):
    """Greedy (or sampled) tool calls from a causal LM; stops when the model stops calling tools."""

    def __init__(
        self, checkpoint: str, max_new_tokens: int = 256, temperature: float = 0.0, max_turns: int = MAX_TOOL_CALLS
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
        from trl.chat_template_utils import add_response_schema, get_training_chat_template

        self.name = f"hf:{checkpoint}"
        self.stochastic = temperature > 0
        self.torch = torch
        self.tokenizer = add_response_schema(AutoTokenizer.from_pretrained(checkpoint))
        self.template = get_training_chat_template(self.tokenizer) or self.tokenizer.chat_template
        self.model = AutoModelForCausalLM.from_pretrained(checkpoint)
        self.model.eval()
        self.max_new_tokens, self.temperature, self.max_turns = max_new_tokens, temperature, max_turns
        self.tools = tool_functions()
        self._new_cache = DynamicCache
        self._cache, self._cached = DynamicCache(), []  # token ids whose keys and values the cache holds

    def begin(self, observation: str) -> None:
        self.messages = with_board(observation)
        self.queue: list[tuple[str, dict]] = []
        self.turns = 0

    def observe(self, text: str) -> None:
        self.messages.append({"role": "tool", "name": self.last_tool, "content": text})

    def _generate(self) -> dict:
        prompt = self.tokenizer.apply_chat_template(
            self.messages, tools=self.tools, chat_template=self.template, add_generation_prompt=True, tokenize=False
        )
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        text = self.tokenizer.decode(self._decode(ids), skip_special_tokens=False)
        try:
            return self.tokenizer.parse_response(text, prefix=prompt)
        except Exception:  # unparsable output: no tool call, the episode stalls
            return {"role": "assistant", "content": text}

    def _decode(self, ids: list[int]) -> list[int]:
        """Greedy (or sampled) continuation of `ids`, as `model.generate` would give it.

        The key/value cache is kept across turns and episodes and cut back to the longest prefix
        the new prompt shares with what it holds (the template is prefix-preserving, and every
        episode opens with the same tool schemas), so a turn runs only its new tokens.

        Greedy decoding also drafts (prompt lookup): the tokens that followed the last occurrence of
        the latest few tokens are fed with them and kept as far as they are the model's own argmax,
        so a tool call's fixed wording costs one forward pass instead of one per token. The tokens
        are the greedy ones either way; the draft only saves passes."""
        torch = self.torch
        keep = 0
        for a, b in zip(self._cached, ids[:-1]):
            if a != b:
                break
            keep += 1
        if keep == 0:
            self._cache, self._cached = self._new_cache(), []
        elif keep < len(self._cached):
            self._drop(len(self._cached) - keep)
        out: list[int] = []
        step = ids[keep:]
        with torch.no_grad():
            while len(out) < self.max_new_tokens:
                draft = [] if self.stochastic else self._draft(ids + out, self.max_new_tokens - len(out) - 1)
                logits = self.model(
                    input_ids=torch.tensor([step + draft]),
                    past_key_values=self._cache,
                    use_cache=True,
                    logits_to_keep=len(draft) + 1,
                ).logits[0]
                self._cached += step + draft
                if self.temperature > 0:
                    tokens = [int(torch.multinomial(torch.softmax(logits[-1].float() / self.temperature, -1), 1))]
                else:
                    tokens = logits.argmax(-1).tolist()
                # Keep the model's tokens up to its first disagreement with the draft (its own token there
                # included): each was predicted from a prefix that is all the model's own.
                agreed = next((j for j, d in enumerate(draft) if tokens[j] != d), len(draft))
                tokens = tokens[: agreed + 1]
                if len(draft) > agreed:
                    self._drop(len(draft) - agreed)  # the rejected draft's keys and values
                for token in tokens:
                    out.append(token)
                    if token == self.tokenizer.eos_token_id:
                        return out
                step = [out[-1]]
        return out

    def _drop(self, n: int) -> None:
        """Forget the last `n` cached positions."""
        self._cache.crop(-n)  # a negative count: the tokens to drop
        self._cached = self._cached[:-n]

    def _draft(self, seq: list[int], limit: int, span: int = 3, length: int = 12) -> list[int]:
        """Prompt lookup: up to `length` (at most `limit`) tokens that followed the latest earlier
        occurrence of `seq`'s last `span` tokens; none when they have not occurred."""
        n = min(length, limit)
        if n <= 0 or len(seq) <= span:
            return []
        tail = seq[-span:]
        for start in range(len(seq) - span - 1, -1, -1):
            if seq[start : start + span] == tail:
                return seq[start + span : start + span + n]
        return []

    def act(self, view):
        if not self.queue:
            if self.turns >= self.max_turns:
                return None
            self.turns += 1
            message = self._generate()
            calls = []
            for call in message.get("tool_calls") or []:
                fn = call.get("function", {}) if isinstance(call, dict) else {}
                args = fn.get("arguments", {})
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except json.JSONDecodeError:
                        args = {"raw": args}
                args = args if isinstance(args, dict) else {"value": args}
                # Kept whole, as the engine will see it: a call the model wrote without its name or arguments
                # would otherwise break the chat template when the next turn's prompt is rendered.
                calls.append({"type": "function", "function": {"name": str(fn.get("name")), "arguments": args}})
                self.queue.append((str(fn.get("name")), args))
            self.messages.append({"role": "assistant", "content": message.get("content") or "", "tool_calls": calls})
            if not self.queue:
                return None
        self.last_tool, args = self.queue.pop(0)
        return self.last_tool, args
