"""`python -m training.train_grpo` for a checkpoint with the pointer-generator head (`copy_model.py`).

The LM study runs GRPO on its copy models under `torchrun`; this entry point
registers the head with transformers first, then hands over to the trainer.
"""

from research import copy_model
from training.train_grpo import main

if __name__ == "__main__":
    copy_model.register()
    main()
