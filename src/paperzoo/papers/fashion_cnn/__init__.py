"""A small CNN on Fashion-MNIST: the foundation's first recipe, run end to end through every layer."""

from paperzoo.papers.fashion_cnn.model import SmallCNN, SmallCNNConfig
from paperzoo.registry import Paper, register

__all__ = ["SmallCNN", "SmallCNNConfig"]

register(Paper(
    name="fashion-cnn",
    title="Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning Algorithms (small CNN baseline)",
    arxiv="1708.07747",
    year=2017,
    status="checked",
    models=("SmallCNN",),
    recipes={"fashion-cnn": "paperzoo.papers.fashion_cnn.recipe:run"},
    claims=("A small two-block CNN reaches >= 88% test accuracy on Fashion-MNIST (Xiao et al. report 87-89% "
            "for the best classical classifiers; CNNs do better).",),
    presets=("tiny", "small"),
))
