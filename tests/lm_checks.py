"""Checks shared by the language-model test modules (not a test module itself)."""

from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.splits import task_scenario


def assert_hf_policy_decodes_as_generate(checkpoint, max_new_tokens: int = 12) -> None:
    """The hf: policy keeps its key/value cache across turns and episodes and cuts it back where a new
    prompt differs; its tokens must be exactly model.generate's greedy tokens, whatever it drafts:
    its own prompt lookup, the right tokens (all kept) or wrong ones (refused)."""
    from training.llm_policy import LLMPolicy

    policy = LLMPolicy(str(checkpoint), max_new_tokens=max_new_tokens)
    lookup = policy._draft
    env = ReleaseOpsToolEnv()
    for index in range(2):  # the second episode reuses the cached tool schemas and crops the rest
        policy.begin(env.reset(**task_scenario("heldout_seeds", index, "easy")))
        for turn in range(2):
            prompt = policy.tokenizer.apply_chat_template(
                policy.messages,
                tools=policy.tools,
                chat_template=policy.template,
                add_generation_prompt=True,
                tokenize=False,
            )
            ids = policy.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
            expected = policy.model.generate(**ids, do_sample=False, max_new_tokens=max_new_tokens)[0]
            prompt_ids, want = ids["input_ids"][0].tolist(), expected[ids["input_ids"].shape[1] :].tolist()
            right = lambda seq, limit, want=want, prompt_ids=prompt_ids: want[len(seq) - len(prompt_ids) :][:limit]  # noqa: E731
            wrong = lambda seq, limit, right=right: [(t + 1) % len(policy.tokenizer) for t in right(seq, limit)]  # noqa: E731
            for draft in (lookup, right, wrong):
                policy._draft = draft
                assert policy._decode(prompt_ids) == want, draft
            policy.messages += [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "type": "function",
                            "function": {"name": "approve_proposal", "arguments": {"proposal_id": f"p{turn + 1}"}},
                        }
                    ],
                },
                {"role": "tool", "name": "approve_proposal", "content": str({"error": "unknown"})},
            ]
