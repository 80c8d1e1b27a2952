"""Learning-rate probe behind the README's table: pretrain the ablations' `small` ELECTRA for STEPS steps at peak lr LR
with WARMUP warmup steps (seed 0, one thread) and print the held-out discriminator metrics and token-state cosine.

    PAPERZOO_DATA=../shared/data python docs/reports/electra-ablations/collapse_probe.py 2e-4 30 300 [RUN_DIR]

RUN_DIR (default runs/electra-ablations) supplies tokenizer.json; a new vocabulary is trained there if it has none.
"""
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

from paperzoo.papers.electra import recipe as R
from paperzoo.train import seed_everything

torch.set_num_threads(1)
lr, warmup, steps = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
run = Path(sys.argv[4]) if len(sys.argv) > 4 else Path("runs/electra-ablations")
run.mkdir(parents=True, exist_ok=True)
p = R.ABLATIONS_PRESETS["small"]
p = replace(p, train=replace(p.train, lr=lr, warmup_steps=warmup, steps=steps, eval_every=100, ckpt_every=100))
p, tok, train, held, _ = R.prepare(run, replace(p, tasks=()))
out = run / "probes" / f"lr{lr}-wu{warmup}-s{steps}"
seed_everything(0)
model = R.build_pretrainer("electra", p.model, p.objective)
a = R.pretrain(model, p.train, train, held, out, resume=True, progress=False)["after"]
print(json.dumps({"lr": lr, "warmup": warmup, "steps": steps,
                  "token_state_cosine": R.token_state_cosine(model.encoder(), held),
                  **{k: a[k] for k in ("eval_disc_auc", "eval_disc_acc", "eval_baseline_acc", "eval_gen_acc")}}))
