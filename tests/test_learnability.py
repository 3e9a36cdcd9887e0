"""The learnability report's behaviour examples: the demo seeds, then the first scenario
per slice where the rule and the trained policy part (the first found, not the best)."""

from releaseops_arena.baselines import POLICIES, play
from releaseops_arena.splits import scenarios
from training import structured_policy as sp
from training.learnability import PARTING, SLICES, behaviour


def test_behaviour_shows_the_demo_seeds_and_the_first_scenario_where_outcomes_differ(tmp_path):
    path = tmp_path / "w.pt"
    sp.train(minutes=5, group=4, scenarios_per_step=2, max_steps=2, seed=1, warm_start="rule", warm_episodes=16,
             validate_every=0, out=path)
    examples = behaviour("trained", lambda: sp.StructuredPolicy(str(path)), search=20)
    assert {"Seed A: intervention matters", "Seed B: restraint matters"} <= set(examples)
    for split, difficulty in SLICES:
        outcomes = [(play(POLICIES["rule"](), s)["metrics"]["outcome"],
                     play(sp.StructuredPolicy(str(path)), s)["metrics"]["outcome"])
                    for s in scenarios(split, 20, difficulty)]
        first = next(i for i, (a, b) in enumerate(outcomes) if a != b)  # with this seed both slices have one
        example = examples[f"{split}: {PARTING}"]
        assert example["scenario"]["seed"] == list(scenarios(split, 20, difficulty))[first]["seed"]
        assert example["rule"]["outcome"] == outcomes[first][0] != example["trained"]["outcome"]
        assert example["trained"]["calls"] and all("(" in c for c in example["trained"]["calls"])
