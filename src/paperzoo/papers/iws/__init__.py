"""Interactive Weak Supervision (Boecking, Neiswanger, Xing, Dubrawski; ICLR 2021): an expert judges generated
labeling functions instead of labeling documents; a bootstrap ensemble models the expert's answers from each LF's
fingerprint and picks the next LF to show (level set estimation); the accepted LFs feed a label model whose soft
labels train an end model."""

from paperzoo.registry import Paper, register

from .acquisition import acquisition_scores, choose, final_set
from .end_model import EndModelConfig, text_features, train_end_models
from .expert import EnsembleConfig, ExpertModel
from .label_model import SoftLabels, dawid_skene, fit_label_model, from_snorkel, majority_vote, to_snorkel
from .lfs import CandidateLFs, LFConfig, UserLF, fingerprints, generate_lfs, lf_accuracy, simulated_oracle
from .mlp import BatchedMLP, MLPConfig
from .session import LEVELS, IWSSession, Query, SessionConfig

__all__ = ["BatchedMLP", "CandidateLFs", "EndModelConfig", "EnsembleConfig", "ExpertModel", "IWSSession", "LEVELS",
           "LFConfig", "MLPConfig", "Query", "SessionConfig", "SoftLabels", "UserLF", "acquisition_scores", "choose",
           "dawid_skene", "final_set", "fingerprints", "fit_label_model", "from_snorkel", "generate_lfs",
           "lf_accuracy", "majority_vote", "simulated_oracle", "text_features", "to_snorkel", "train_end_models"]

register(Paper(
    name="iws",
    title="Interactive Weak Supervision: Learning Useful Heuristics for Data Labeling",
    arxiv="2012.06046",
    year=2020,
    status="implemented",
    models=("IWSSession", "ExpertModel"),
    recipes={"iws": "paperzoo.papers.iws.recipe:run"},
    benches={"iws": "paperzoo.bench.iws:run"},
    claims=(
        "IWS-LSE reaches the quality of the accuracy > 0.7 LF ceiling within about 100 LF queries and beats active "
        "learning on documents at equal queries (IMDB, simulated oracle).",
    ),
    presets=("tiny", "small"),
))
