"""paperzoo.train: the one training loop every recipe uses.

    from paperzoo.train import TrainConfig, Trainer, seed_everything
    seed_everything(0)                      # before building the model: fixes init
    model = Net()
    result = Trainer(model, TrainConfig(steps=1000, batch_size=64), train_set, loss_fn,
                     eval_fn=eval_fn, out_dir=run_dir).fit(resume=resume)
"""

from .checkpoint import checkpoint_file, find_checkpoints, load_checkpoint, load_latest
from .compiled import compile_model
from .config import TrainConfig
from .optim import build_optimizer, build_scheduler, lr_factor, no_decay_names, param_groups
from .rng import seed_everything
from .trainer import Trainer, TrainingDivergedError, unwrap

__all__ = [
    "TrainConfig",
    "Trainer",
    "TrainingDivergedError",
    "build_optimizer",
    "compile_model",
    "build_scheduler",
    "checkpoint_file",
    "find_checkpoints",
    "load_checkpoint",
    "load_latest",
    "lr_factor",
    "no_decay_names",
    "param_groups",
    "seed_everything",
    "unwrap",
]
