"""Latent Shift (Cohen et al., 2021, "Gifsplanation"): counterfactual explanations by moving an autoencoder's latent
along the gradient of a classifier's prediction, shown as animations and summarised as 2-D attribution maps."""

from paperzoo.registry import Paper, register

from .explain import GIFSPLANATION, LATENTSHIFT, PAPER, LatentShift, LatentShiftResult, lambda_grid, shift_map
from .model import Autoencoder, AutoencoderConfig, Classifier, ClassifierConfig

__all__ = ["GIFSPLANATION", "LATENTSHIFT", "PAPER", "Autoencoder", "AutoencoderConfig", "Classifier",
           "ClassifierConfig", "LatentShift", "LatentShiftResult", "lambda_grid", "shift_map"]

register(Paper(
    name="latent-shift",
    title="Gifsplanation via Latent Shift: A Simple Autoencoder Approach to Counterfactual Generation for Chest "
          "X-rays",
    arxiv="2102.09475",
    year=2021,
    status="checked",
    models=("Autoencoder", "Classifier"),
    recipes={"latent-shift": "paperzoo.papers.latent_shift.recipe:run"},
    benches={"latent-shift": "paperzoo.bench.latent_shift:run"},
    claims=("Latent Shift's attribution maps (max over the counterfactual frames of |x_lambda - x_0|) localise the "
            "evidence about as well as gradient attributions (IoU with the ground truth at matched area mixed "
            "against Saliency, Guided Backprop and Integrated Gradients), and far better than chance.",),
    presets=("tiny", "small"),
))
