"""ELECTRA tokenizer, fine-tuning pieces (layer-wise LR decay, MCC, classifier) and registration."""

import json
import math

import pytest
import torch

from paperzoo.data.tokenizer import (
    SPECIAL_TOKENS,
    encode_batch,
    load_tokenizer,
    pack_documents,
    special_ids,
    train_wordpiece,
)
from paperzoo.papers.electra.finetune import layerwise_lr_groups
from paperzoo.papers.electra.model import ElectraClassifier, ElectraConfig
from paperzoo.train.finetune import FinetuneConfig, matthews_corrcoef

CORPUS = ["The movie was great.<br /><br />I loved the acting, and the plot twists were unexpected!",
          "A terrible film; the script was weak and the actors seemed bored.",
          "Not bad at all: a charming, funny story with a great cast."] * 30


def test_wordpiece_tokenizer_round_trip(tmp_path):
    tok = train_wordpiece(CORPUS, vocab_size=200, min_frequency=1, path=tmp_path / "tokenizer.json")
    assert (tmp_path / "tokenizer.json").is_file()
    ids = special_ids(tok)
    assert [ids[t.strip("[]").lower()] for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    again = load_tokenizer(tmp_path / "tokenizer.json")
    assert again.encode("the movie was great").ids == tok.encode("the movie was great").ids
    assert "<" not in tok.decode(tok.encode(CORPUS[0]).ids)  # HTML breaks are cleaned before tokenising
    assert tok.encode("The MOVIE").tokens[1:-1] == ["the", "movie"]  # lower-cased, [CLS]/[SEP] added
    x, m = encode_batch(tok, ["the movie", CORPUS[0]], max_len=8)
    assert x.shape == (2, 8) and x[0, 0] == ids["cls"] and x[0, 3] == ids["sep"] and m[0].tolist() == [1] * 4 + [0] * 4
    assert x[1, -1] == ids["sep"] and m[1].all()
    p, pm = pack_documents(tok, CORPUS[:3], seq_len=12, min_tokens=2)
    assert p.shape[1] == 12 and (p[:, 0] == ids["cls"]).all()
    assert ((p == ids["sep"]).sum(1) == 1).all() and (pm.sum(1) >= 4).all()
    with pytest.raises(ValueError, match="vocab_size"):
        train_wordpiece(CORPUS, vocab_size=3)
    with pytest.raises(ValueError, match="tokenizer.json"):
        load_tokenizer(tmp_path / "missing.json")


def test_wordpiece_ids_are_a_function_of_the_learned_tokens(tmp_path):
    """tokenizers numbers its learned vocabulary in hash-map order (huggingface/tokenizers#1794), different in every
    process; ours renumbers it (specials, then sorted), so the same learned tokens always get the same ids."""
    tok = train_wordpiece(CORPUS, vocab_size=200, min_frequency=1, path=tmp_path / "tokenizer.json")
    vocab = json.loads((tmp_path / "tokenizer.json").read_text())["model"]["vocab"]
    rest = sorted(set(vocab) - set(SPECIAL_TOKENS))
    assert vocab == {t: i for i, t in enumerate([*SPECIAL_TOKENS, *rest])} and len(rest) > 100
    assert tok.encode("the movie was great").tokens[1:-1] == ["the", "movie", "was", "great"]
    assert tok.token_to_id("movie") == vocab["movie"] and tok.decode(tok.encode("a great cast").ids) == "a great cast"


def test_layerwise_lr_decay_follows_the_official_depths():
    cfg = ElectraConfig.preset("tiny", num_layers=3)
    model = ElectraClassifier(cfg, num_labels=2)
    groups = layerwise_lr_groups(model, lr=1e-3, layer_decay=0.8, weight_decay=0.01)
    n = 3
    by_param = {id(p): g for g in groups for p in g["params"]}
    lr_of = lambda p: by_param[id(p)]["lr"]  # noqa: E731
    assert math.isclose(lr_of(model.body.embeddings.word.weight), 1e-3 * 0.8 ** (n + 2))
    assert math.isclose(lr_of(model.body.embeddings.project.weight), 1e-3 * 0.8 ** (n + 2))
    for i in range(n):
        assert math.isclose(lr_of(model.body.encoder.layers[i].ffn.fc1.weight), 1e-3 * 0.8 ** (n + 1 - i))
    assert math.isclose(lr_of(model.head.out.weight), 1e-3)
    assert by_param[id(model.head.out.bias)]["weight_decay"] == 0.0
    assert by_param[id(model.head.out.weight)]["weight_decay"] == 0.01
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    with pytest.raises(ValueError, match="layer_decay"):
        layerwise_lr_groups(model, 1e-3, layer_decay=0.0)
    with pytest.raises(ValueError, match="body"):
        layerwise_lr_groups(torch.nn.Linear(2, 2), 1e-3)


def test_matthews_correlation():
    y = torch.tensor([1, 1, 0, 0, 1, 0])
    assert matthews_corrcoef(y, y) == pytest.approx(1.0)
    assert matthews_corrcoef(1 - y, y) == pytest.approx(-1.0)
    assert matthews_corrcoef(torch.ones(6), y) == 0.0
    p = torch.tensor([1, 0, 0, 0, 1, 1])  # tp 2, tn 2, fp 1, fn 1
    assert matthews_corrcoef(p, y) == pytest.approx((4 - 1) / 9)


def test_classifier_learns_from_the_trainer_with_param_groups():
    from torch.utils.data import TensorDataset

    from paperzoo.train import TrainConfig, Trainer

    torch.manual_seed(0)
    model = ElectraClassifier(ElectraConfig.preset("tiny", vocab_size=50), num_labels=2)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 50, (64, 10), generator=g)
    y = (ids[:, 1] < 25).long()  # the label is readable from one token
    groups = layerwise_lr_groups(model, 3e-3)
    loss = lambda m, b: m(input_ids=b[0], labels=b[1]).loss  # noqa: E731
    before = loss(model, (ids, y)).item()
    Trainer(model, TrainConfig(steps=40, batch_size=16, lr=3e-3, eval_every=0, ckpt_every=0, device="cpu"),
            TensorDataset(ids, y), loss, param_groups=groups, progress=False).fit()
    assert loss(model.eval(), (ids, y)).item() < 0.7 * before


def test_finetune_config_steps():
    assert FinetuneConfig(epochs=2, batch_size=32).steps_for(320) == 20
    assert FinetuneConfig(epochs=2, batch_size=32, max_steps=5).steps_for(320) == 5


def test_paper_is_registered():
    from paperzoo import registry

    p = registry.get("electra")
    assert p.status == "checked" and p.arxiv == "2003.10555"
    assert set(p.recipes) == {"electra", "electra-ablations", "electra-context"} and "electra" in p.benches
    for target in (*p.recipes.values(), *p.benches.values()):
        assert callable(registry.resolve(target))
