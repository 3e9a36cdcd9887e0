"""The language model's warm-start data ends each episode the way TRL's tool loop ends: a turn without a call."""

import pytest

pytest.importorskip("trl")


def test_a_warm_start_episode_closes_with_a_turn_that_ends_trls_tool_loop():
    from trl.chat_template_utils import add_response_schema

    from training.lm_learnability import warm_conversations
    from training.sft_warmup import CLOSING_TURN, closed, encode
    from training.tiny_model import build_tokenizer

    conversations = warm_conversations("planner", 3)
    assert conversations and all(c[-1] == CLOSING_TURN and c[-2]["role"] == "tool" for c in conversations)
    assert all('"outcome":"safe_ship"' in c[-2]["content"] for c in conversations)  # only finished episodes
    assert closed(conversations[0]) == conversations[0]  # closed once
    tokenizer = add_response_schema(build_tokenizer())
    (ids, mask), = encode(tokenizer, conversations[:1])
    ids, mask = ids.tolist(), mask.tolist()
    start = max(t for t in range(1, len(mask)) if mask[t] and not mask[t - 1])  # the last assistant turn
    text = tokenizer.decode([i for i, m in zip(ids[start:], mask[start:]) if m])
    parsed = tokenizer.parse_response(text, prefix=tokenizer.decode(ids[:start]))
    assert parsed == {"role": "assistant", "content": CLOSING_TURN["content"]}  # no tool call: the loop stops
