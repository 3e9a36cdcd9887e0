"""The pointer-generator language model (research/copy_model.py): a distribution, copying, caching, saving, TRL."""

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tokenizer():
    from training.tiny_model import build_tokenizer

    return build_tokenizer()


@pytest.fixture(scope="module", params=[0, 48], ids=["pointer", "pointer+read"])
def model(tokenizer, request):
    from research.copy_model import build_pointer_model, register, result_tokens

    register()  # the saving test loads a checkpoint back through AutoModelForCausalLM
    m = build_pointer_model(tokenizer, hidden=64, layers=2, seed=3, read_span=request.param)
    m.config.result_token_ids = list(result_tokens(tokenizer))  # as research.lm_learnability builds it
    m.eval()
    return m


def _ids(tokenizer, text):
    return tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]


def test_the_logits_are_a_distribution_and_the_copy_mass_lands_on_board_ids_already_seen(tokenizer, model):
    from training.tiny_model import id_token_ids

    ids = _ids(tokenizer, 'board {"id":"p17","refs":["pr_349"]} then {"id":"p4"} call "')
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0]
        assert logits.shape == (ids.shape[1], len(tokenizer))
        assert torch.allclose(logits.exp().sum(-1), torch.ones(ids.shape[1]), atol=1e-4)
        # With the gate wide open, everything goes to the copy distribution: the ids seen so far, no other token.
        model.copy_gate.bias.fill_(50.0)
        try:
            probs = model(input_ids=ids).logits[0].exp()
        finally:
            model.copy_gate.bias.zero_()
    seen, board = set(), id_token_ids(tokenizer)
    for t, token in enumerate(ids[0].tolist()):
        if token in board:
            seen.add(token)
        if seen:
            mass = probs[t, sorted(seen)].sum()
            assert mass == pytest.approx(1.0, abs=1e-4), t
    assert tokenizer.convert_tokens_to_ids(["p17", "pr_349", "p4"]) == sorted(seen, key=ids[0].tolist().index)


def test_coverage_moves_the_copy_away_from_an_id_already_acted_on(tokenizer, model):
    ids = _ids(tokenizer, '"p17" "p4" <tool_response>\n{"proposal":"p17","status":"approved"}\n</tool_response> "')
    p17, p4 = tokenizer.convert_tokens_to_ids(["p17", "p4"])
    with torch.no_grad():
        model.copy_gate.bias.fill_(50.0)
        try:
            shares = []
            for weight in (0.0, -8.0):
                model.coverage.fill_(weight)
                probs = model(input_ids=ids).logits[0, -1].exp()
                shares.append(float(probs[p4] / (probs[p4] + probs[p17])))
        finally:
            model.copy_gate.bias.zero_()
            model.coverage.fill_(model.config.coverage_init)
    # p17's first occurrence is covered by its repeat in a result; a strongly negative coverage weight leaves
    # its repeat (not yet repeated itself) and p4 to share the copy, instead of p17 taking two thirds by count.
    assert shares[1] > shares[0]


def _conversation(tokenizer):
    """A board with p4 and p7; p4 approved; a block of p7 refused by an error that names p7 as pending."""

    def call(name, **arguments):
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
        }

    messages = [
        {"role": "user", "content": '{"proposals":[{"id":"p4"},{"id":"p7"}]}'},
        call("approve_proposal", proposal_id="p4"),
        {"role": "tool", "content": '{"tool":"approve_proposal","proposal":"p4","status":"approved"}'},
        call("block_proposal", proposal_id="p7", rule_id="S2"),
        {"role": "tool", "content": str({"error": "rule S2 does not apply to p7; pending: p7"})},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return _ids(tokenizer, text + '<tool_call>\n{"name": "approve_proposal", "arguments": {"proposal_id": "')


def test_coverage_counts_an_id_acted_on_only_in_a_result_that_is_not_an_error(tokenizer, model):
    from research.copy_model import result_tokens

    ids = _conversation(tokenizer)
    p4, p7 = tokenizer.convert_tokens_to_ids(["p4", "p7"])
    shares = []
    with torch.no_grad():
        try:
            acted = model._acted(ids)[0]
            # p4: board, call, result; p7: board, call, error twice. Only p4's successful result counts.
            assert acted[ids[0] == p4].tolist() == [False, False, True]
            assert acted[ids[0] == p7].tolist() == [False, False, False, False]
            model.copy_gate.bias.fill_(50.0)
            model.coverage.fill_(-8.0)
            for marks in (list(result_tokens(tokenizer)), [0, 0, 0]):  # results only; every later mention
                model.config.result_token_ids = marks
                probs = model(input_ids=ids).logits[0, -1].exp()
                shares.append(float(probs[p7] / (probs[p4] + probs[p7])))
        finally:
            model.config.result_token_ids = list(result_tokens(tokenizer))
            model.copy_gate.bias.zero_()
            model.coverage.fill_(model.config.coverage_init)
    # p7 is still pending: with results only, the pointer goes to it; counting the error's and the call's
    # mentions covers three of its four occurrences and hands copy mass back to the approved p4.
    assert shares[0] > 0.75 > shares[1]


def test_it_saves_and_loads_by_from_pretrained_with_the_same_logits(tokenizer, model, tmp_path):
    from transformers import AutoModelForCausalLM

    from research.copy_model import CopyQwen3ForCausalLM

    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert isinstance(loaded, CopyQwen3ForCausalLM)
    assert loaded.config.copy_token_range == model.config.copy_token_range
    ids = _ids(tokenizer, '{"id":"p17","refs":["ci_run_824"]} "')
    with torch.no_grad():
        assert torch.allclose(loaded(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-5)


def test_cached_greedy_decoding_equals_uncached_and_the_hf_policy_gives_generates_tokens(tokenizer, model, tmp_path):
    from tests.lm_checks import assert_hf_policy_decodes_as_generate

    ids = _ids(tokenizer, 'x "p17" "pr_349" y "p4" z "')
    with torch.no_grad():
        cached = model.generate(ids, max_new_tokens=16, do_sample=False)
        uncached = model.generate(ids, max_new_tokens=16, do_sample=False, use_cache=False)
    assert cached.tolist() == uncached.tolist()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    assert_hf_policy_decodes_as_generate(tmp_path)


def test_trls_per_token_log_probs_are_the_copy_models_own_even_left_padded(tokenizer, model):
    """GRPOTrainer patches a fused LM head over forward; after `restore_forward` the model answers
    TRL's `fused_lm_head=True` call with its own mixture's log-probs, padding and all."""
    import copy

    from trl.trainer.utils import add_fused_lm_head

    patched = copy.deepcopy(model)
    add_fused_lm_head(patched, temperature=0.7, outputs=("log_probs", "entropy"))
    patched.restore_forward(0.7)
    ids = _ids(tokenizer, '{"id":"p17","refs":["pr_349"]} ok "p17" "')
    n = ids.shape[1]
    pad = torch.full((1, 3), tokenizer.pad_token_id)
    padded = torch.cat([pad, ids], 1)
    mask = torch.cat([torch.zeros(1, 3, dtype=torch.long), torch.ones(1, n, dtype=torch.long)], 1)
    labels = padded.masked_fill(mask == 0, -100)
    labels[:, : 3 + n // 2] = -100  # only the second half is scored, as TRL scores the completion
    with torch.no_grad():
        out = patched(input_ids=padded, attention_mask=mask, labels=labels, fused_lm_head=True)
        expected = torch.log_softmax(model(input_ids=ids).logits[0] / 0.7, -1)
    scored = (labels[0, 1:] != -100).nonzero().squeeze(-1)
    targets = padded[0, 1:][scored]
    assert torch.allclose(out.log_probs[0, scored], expected[scored - 3, targets], atol=1e-4)
    assert (out.log_probs[0][labels[0, 1:] == -100] == 0).all()
    assert (out.entropy[0, scored] > 0).all()
