"""The engine is a pure library: it imports with only the standard library available."""

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ENGINE = sorted(p.stem for p in (REPO_ROOT / "releaseops_arena").glob("*.py") if p.stem != "__init__")
# Everything the other doors use; the engine must never need any of them.
BLOCKED = ["openenv", "pydantic", "fastapi", "gradio", "torch", "uvicorn", "websockets", "transformers",
           "trl", "datasets", "numpy", "starlette", "httpx"]

PROBE = f"""
import importlib, importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {BLOCKED!r}:
            raise ImportError('blocked for the purity test: ' + name)

sys.meta_path.insert(0, Block())
for module in {ENGINE!r}:
    importlib.import_module('releaseops_arena.' + module)
from releaseops_arena import ReleaseOpsToolEnv
from releaseops_arena.baselines import ReferencePlanner, play
run = play(ReferencePlanner(), dict(family='green_ci_disabled_payment_test', seed=1, difficulty='medium',
                                    archetype_mix='shortcut_ci__careful_qa'))
third_party = sorted(m for m in sys.modules if m.split('.')[0] in {BLOCKED!r})
print('OK', run['metrics']['outcome'], third_party)
"""


def test_engine_imports_and_plays_with_only_the_standard_library():
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[0] == "OK" and result.stdout.strip().endswith("[]"), result.stdout


def test_the_probe_really_blocks():
    """The blocker itself works, so the test above cannot pass by accident."""
    probe = PROBE.split("for module")[0] + "import pydantic\n"
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0 and "blocked for the purity test: pydantic" in result.stderr
