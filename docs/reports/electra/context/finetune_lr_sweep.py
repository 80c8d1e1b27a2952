"""Fine-tuning learning-rate sweep on SST-2 for the committed `context` run's encoders (diagnostic, not a recipe).

The `context` report fine-tunes at lr 1e-3, where the untrained control beats both pretrained encoders. This asks
whether a lower rate (the official ELECTRA-Small 3e-4, or 1e-4) lets pretraining show: each seed's saved ELECTRA,
MLM and untrained encoder (``<run>/<variant>/seed-<s>/encoder.safetensors``) fine-tuned on SST-2 with the
preset's fine-tuning config at another lr, seed s. One line of JSON per run on stdout.

    PAPERZOO_DATA=... python docs/reports/electra/context/finetune_lr_sweep.py runs/electra-context-preset 3e-4 1e-4
"""

import dataclasses
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from paperzoo.data.tokenizer import load_tokenizer
from paperzoo.papers.electra import recipe
from paperzoo.papers.electra.finetune import classifier_fn
from paperzoo.train.finetune import finetune_task, load_task

TASK = "SST-2"


def main(run_dir: Path, lrs: list[float]) -> None:
    torch.set_num_threads(1)
    tok = load_tokenizer(run_dir / "tokenizer.json")
    p = recipe.PRESETS["context"]
    model = dataclasses.replace(p.model, vocab_size=tok.get_vocab_size())
    data = {TASK: (load_task(TASK, "train"), load_task(TASK, "test"))}
    for lr in lrs:
        ft = dataclasses.replace(p.finetune, lr=lr)
        for seed in range(p.seeds):
            for variant in ("electra", "mlm", recipe.CONTROL):
                state = load_file(str(run_dir / variant / f"seed-{seed}" / "encoder.safetensors"))
                score = finetune_task(classifier_fn(model, state, ft), tok, TASK, ft, seed, data)["score"]
                print(json.dumps({"task": TASK, "lr": lr, "variant": variant, "seed": seed,
                                  "score": round(100 * score, 2)}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), [float(a) for a in sys.argv[2:]])
