"""ELECTRA (Clark, Luong, Le & Manning, 2020): pretraining text encoders as discriminators of replaced tokens."""

from paperzoo.registry import Paper, register

from .model import ElectraClassifier, ElectraConfig, ElectraDiscriminator, ElectraGenerator
from .objective import DiscriminatorMLMHead, ElectraPretrainer, ObjectiveConfig

__all__ = ["DiscriminatorMLMHead", "ElectraClassifier", "ElectraConfig", "ElectraDiscriminator", "ElectraGenerator",
           "ElectraPretrainer", "ObjectiveConfig"]

register(Paper(
    name="electra",
    title="ELECTRA: Pre-training Text Encoders as Discriminators Rather Than Generators",
    arxiv="2003.10555",
    year=2020,
    status="checked",
    models=("ElectraGenerator", "ElectraDiscriminator", "ElectraClassifier"),
    recipes={"electra": "paperzoo.papers.electra.recipe:run",
             "electra-ablations": "paperzoo.papers.electra.recipe:run_ablations",
             "electra-context": "paperzoo.papers.electra.context:run"},
    benches={"electra": "paperzoo.bench.electra:run"},
    claims=(
        "At equal pretraining compute, replaced-token detection (ELECTRA) gives better downstream scores than "
        "masked language modelling (paper: ELECTRA-Small 79.9 vs BERT-Small 75.1 GLUE dev).",
        "Learning from all tokens matters: ELECTRA > All-Tokens MLM > Replace MLM ~ ELECTRA 15% ~ BERT "
        "(paper Table 5: 85.0, 84.3, 82.4, 82.4, 82.2 GLUE).",
    ),
    presets=("tiny", "small"),
))
