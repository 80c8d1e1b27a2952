"""Learning-rate probe behind the README's table (session 4): pretrain the `quick` ELECTRA for STEPS steps at peak lr LR
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

torch.set_num_threads(1)
lr, warmup, steps = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
run = Path(sys.argv[4]) if len(sys.argv) > 4 else Path("runs/electra-ablations")
run.mkdir(parents=True, exist_ok=True)
p = R.PRESETS["quick"]
p = replace(p, pretrain=replace(p.pretrain, lr=lr, warmup_steps=warmup, steps=steps, eval_every=100, ckpt_every=100))
texts = R._imdb_texts(p.docs)
tok = R._tokenizer(run, texts, p)
train, held = R._pretrain_data(tok, texts, p)
out = run / "probes" / f"lr{lr}-wu{warmup}-s{steps}"
res = R.pretrain("electra", p, tok.get_vocab_size(), train, held, 0, out, resume=True, progress=False)
a = res["after"]
print(json.dumps({"lr": lr, "warmup": warmup, "steps": steps, "token_state_cosine": R.token_state_cosine(out, held),
                  **{k: a[k] for k in ("eval_disc_auc", "eval_disc_acc", "eval_baseline_acc", "eval_gen_acc")}}))
