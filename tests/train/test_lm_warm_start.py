"""The language model's warm-start data ends each episode the way TRL's tool loop ends: a turn without a call."""

import pytest

pytest.importorskip("trl")


def test_a_warm_start_episode_closes_with_a_turn_that_ends_trls_tool_loop():
    from trl.chat_template_utils import add_response_schema

    from research.lm_learnability import warm_conversations
    from training.sft_warmup import CLOSING_TURN, closed, encode
    from training.tiny_model import build_tokenizer

    conversations = warm_conversations("planner", 3)
    assert conversations and all(c[-1] == CLOSING_TURN and c[-2]["role"] == "tool" for c in conversations)
    assert all('"outcome":"safe_ship"' in c[-2]["content"] for c in conversations)  # only finished episodes
    assert closed(conversations[0]) == conversations[0]  # closed once
    tokenizer = add_response_schema(build_tokenizer())
    ((ids, mask),) = encode(tokenizer, conversations[:1])
    ids, mask = ids.tolist(), mask.tolist()
    start = max(t for t in range(1, len(mask)) if mask[t] and not mask[t - 1])  # the last assistant turn
    text = tokenizer.decode([i for i, m in zip(ids[start:], mask[start:]) if m])
    parsed = tokenizer.parse_response(text, prefix=tokenizer.decode(ids[:start]))
    assert parsed == {"role": "assistant", "content": CLOSING_TURN["content"]}  # no tool call: the loop stops


def test_recovery_episodes_show_a_refused_block_then_the_right_rule_and_only_the_recovery_is_learned():
    import json

    from releaseops_arena.policies.base import rules_for
    from research.lm_learnability import warm_conversations
    from training.sft_warmup import encode, refused
    from training.tiny_model import build_tokenizer

    conversations = warm_conversations("planner", 20, recovery=1.0)  # every block stumbles first
    plain = warm_conversations("planner", 20)
    assert len(conversations) == len(plain)  # a refused call costs a penalty, not the safe ship
    stumbled = [c for c in conversations if any(refused(c))]
    assert stumbled and not any(any(refused(c)) for c in plain)
    # a privileged expert keeps its truth reader under the wrapper: it still ships every episode it did
    assert len(warm_conversations("oracle", 6, recovery=1.0)) == len(warm_conversations("oracle", 6))
    for c in stumbled:
        boards = {p["id"]: p for m in c if m["role"] in ("user", "tool") for p in _proposals(m["content"])}
        for k, m in enumerate(c):
            if m["role"] != "assistant" or not refused(c[: k + 2])[-1]:
                continue
            wrong = m["tool_calls"][0]["function"]["arguments"]
            retry = c[k + 2]["tool_calls"][0]["function"]
            allowed = rules_for(boards[wrong["proposal_id"]])
            assert wrong["rule_id"] not in allowed
            assert f"cite one of: {', '.join(allowed)}" in c[k + 1]["content"]  # the engine's own message
            assert retry["name"] == "block_proposal" and retry["arguments"]["proposal_id"] == wrong["proposal_id"]
            assert retry["arguments"]["rule_id"] in allowed
    tokenizer = build_tokenizer()
    ((ids, mask),) = encode(tokenizer, stumbled[:1])
    learned = tokenizer.decode([i for i, m in zip(ids.tolist(), mask.tolist()) if m])
    calls = [json.dumps(m["tool_calls"][0]["function"]["arguments"]) for m in stumbled[0] if m.get("tool_calls")]
    flags = refused(stumbled[0])[: len(calls)]
    assert all((call in learned) != drop for call, drop in zip(calls, flags))  # the retry learned, the mistake not


def test_wrong_call_recovery_episodes_show_a_refused_approval_or_inspection_then_the_same_call_done_right():
    from research.lm_learnability import warm_conversations
    from research.recovery import INSPECT
    from training.sft_warmup import refused

    plain = warm_conversations("planner", 12)
    # Blocks never stumble here: every refusal is an approval or an inspection tried wrong.
    conversations = warm_conversations("planner", 12, recovery_calls=1.0)
    assert len(conversations) == len(plain)  # a refused call costs a penalty, not the safe ship
    seen = set()
    for c in conversations:
        flags = refused(c)
        names = [
            m["tool_calls"][0]["function"]["name"] if m.get("tool_calls") else None
            for m in c
            if m["role"] == "assistant"
        ]
        done_right = [n for n, f in zip(names, flags) if not f and n in (*INSPECT, "approve_proposal")]
        assert sum(flags) == len(done_right) > 0  # each approval and inspection: once refused, then right
        for k, m in enumerate(c):
            if m["role"] != "assistant" or not m.get("tool_calls") or not refused(c[: k + 2])[-1]:
                continue
            wrong, error = m["tool_calls"][0]["function"], c[k + 1]["content"]
            right = c[k + 2]["tool_calls"][0]["function"]
            assert not refused(c[: k + 4])[-1]  # the retry the engine accepts
            if right["name"] == "approve_proposal":
                seen.add("approve")
                assert wrong["arguments"]["proposal_id"] == right["arguments"]["proposal_id"]
                assert "unexpected argument 'rule_id'; usage: approve_proposal(proposal_id)" in error
            elif wrong["name"] == right["name"]:
                seen.add("argument")
                assert right["name"] in INSPECT and list(wrong["arguments"]) == ["proposal_id"]
                assert f"usage: {right['name']}({INSPECT[right['name']]})" in error
            else:
                seen.add("tool")
                (value,) = right["arguments"].values()
                assert wrong["name"] in INSPECT and wrong["arguments"] == {INSPECT[wrong["name"]]: value}
                assert f"{value} is a " in error  # the engine names the artifact's kind
    assert seen == {"approve", "argument", "tool"}
    # without recovery_calls only blocks stumble (the published recipe's episodes)
    blocks_only = warm_conversations("planner", 12, recovery=1.0)
    assert any(any(refused(c)) for c in blocks_only)
    for c in blocks_only:
        turns = [m for m in c if m["role"] == "assistant"]
        assert all(m["tool_calls"][0]["function"]["name"] == "block_proposal" for m, f in zip(turns, refused(c)) if f)


def _proposals(text: str) -> list[dict]:
    import json

    try:  # a user turn is the system prompt, then the board's JSON; a tool turn is JSON (or an error)
        board = json.loads(text[text.index("{") :])
    except ValueError:
        return []
    board = board.get("next", board)
    return board.get("proposals", []) if isinstance(board, dict) else []
