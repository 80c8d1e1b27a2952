"""The copy-task measurements behind the ELECTRA README's table: which discriminator configurations learn to flag
"this token is a copy of the previous one" (paperzoo.papers.electra.copy_task), one knob at a time.

    PYTHONPATH=src python docs/reports/electra/copy_task_sweep.py SCALE [NAME | SPEC ...] > copy_task_SCALE.jsonl

NAME: one of the named variants below (all of them when none is given); SPEC: a JSON change to SCALE's defaults,
e.g. '{"t": {"position": "rotary"}, "lr": 1e-3, "steps": 2000, "warmup": 100, "eval_every": 250}' ("enc": fields
of the TextEncoderConfig, "t": of its TransformerConfig, "hd" = 1/sqrt(head_dim), the rest: CopyTaskConfig).

SCALE: "small" (the recipes' model: emb 64, hidden 128, 4 layers, 2 heads, FFN 512; vocabulary 8000, windows of
64 tokens, batch 32, 400 steps) or "tiny" (the unit test's model: emb 32, hidden 64, 2 layers; vocabulary 1000,
windows of 32). One thread; one JSON line per configuration (held-out AUC at every 50 steps, cosines, seconds).
"""
import dataclasses
import json
import sys
import time

from paperzoo.papers.electra.copy_task import CopyTaskConfig, train_copy_task
from paperzoo.papers.electra.model import ElectraConfig

SCALES = {
    "small": (ElectraConfig.preset("small", vocab_size=8000),
              CopyTaskConfig(steps=400, batch=32, seq_len=64, vocab_size=8000, lr=2e-4, warmup=40)),
    "tiny": (ElectraConfig.preset("tiny", vocab_size=1000, max_len=64),
             CopyTaskConfig(steps=400, batch=32, seq_len=32, vocab_size=1000, lr=2e-4, warmup=40)),
}


def variants(model: ElectraConfig, task: CopyTaskConfig):
    """name -> (encoder config, task config): today's recipe configuration and one change at a time."""
    base = model.discriminator_config()
    t = base.transformer
    hd = t.head_dim ** -0.5

    def enc(**kw):
        return dataclasses.replace(base, transformer=dataclasses.replace(t, **kw))

    out = {
        "today (learned abs., factorised, lr 2e-4)": (base, task),
        "no factorisation (emb = hidden)": (dataclasses.replace(base, embedding_dim=None), task),
        "no token-type row": (dataclasses.replace(base, type_vocab_size=0), task),
        "T5 bias (unscaled q.k)": (enc(position="t5"), task),
        "T5 bias (scaled q.k)": (enc(position="t5", attn_scale=hd), task),
        "RoPE": (enc(position="rotary"), task),
        "lr 1e-3": (base, dataclasses.replace(task, lr=1e-3)),
        "lr 1e-3, no warmup": (base, dataclasses.replace(task, lr=1e-3, warmup=0)),
        "lr 5e-5": (base, dataclasses.replace(task, lr=5e-5)),
        "warmup 0": (base, dataclasses.replace(task, warmup=0)),
        "warmup 200": (base, dataclasses.replace(task, warmup=200)),
        "1 layer": (enc(num_layers=1), task),
        "8 layers": (enc(num_layers=8), task),
        "loss weight 1 (not 50)": (base, dataclasses.replace(task, disc_weight=1.0)),
        "T5 bias (scaled) + lr 1e-3": (enc(position="t5", attn_scale=hd), dataclasses.replace(task, lr=1e-3)),
        "RoPE + lr 1e-3": (enc(position="rotary"), dataclasses.replace(task, lr=1e-3)),
    }
    return out


def from_spec(model: ElectraConfig, task: CopyTaskConfig, spec: str):
    """(encoder config, task config) of a JSON change to the scale's defaults (see the module docstring)."""
    kw = json.loads(spec)
    base = model.discriminator_config()
    t = base.transformer
    tkw = {k: (t.head_dim ** -0.5 if v == "hd" else v) for k, v in kw.pop("t", {}).items()}
    enc = dataclasses.replace(base, **kw.pop("enc", {}), transformer=dataclasses.replace(t, **tkw))
    return enc, dataclasses.replace(task, **kw)


if __name__ == "__main__":
    scale, names = sys.argv[1], sys.argv[2:]
    model, task = SCALES[scale]
    named = variants(model, task)
    runs = {n: named[n] for n in names if n in named} if names else named
    runs.update({n: from_spec(model, task, n) for n in names if n not in named})
    for name, (enc, tk) in runs.items():
        t0 = time.perf_counter()
        r = train_copy_task(enc, tk, seed=0, threads=1)
        print(json.dumps({"scale": scale, "name": name, **r, "seconds": round(time.perf_counter() - t0, 1)}),
              flush=True)
