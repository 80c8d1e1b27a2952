"""Nerfies (Park et al., 2021): a per-image deformation field warps observed points into one canonical NeRF, trained
coarse-to-fine with elastic and background regularisers of the warp."""

from paperzoo.registry import Paper, register

from .model import Nerfies, NerfiesConfig, NerfiesOutput
from .objective import (
    ELASTIC_SCHEDULES,
    ElasticSchedule,
    background_loss,
    elastic_loss,
    elastic_residual,
    geman_mcclure,
    nerfies_loss,
)
from .warp import (
    C2F_FRACTION,
    C2F_PAPER_STEPS,
    DeformationField,
    SE3Field,
    TranslationField,
    WarpConfig,
    coarse_to_fine_alpha,
    coarse_to_fine_window,
    make_deformation,
    ramp_steps,
    se3_apply,
    se3_matrix,
    skew,
)

__all__ = ["C2F_FRACTION", "C2F_PAPER_STEPS", "ELASTIC_SCHEDULES", "DeformationField", "ElasticSchedule", "Nerfies",
           "NerfiesConfig", "NerfiesOutput", "SE3Field", "TranslationField", "WarpConfig", "background_loss",
           "coarse_to_fine_alpha", "coarse_to_fine_window", "elastic_loss", "elastic_residual", "geman_mcclure",
           "make_deformation", "nerfies_loss", "ramp_steps", "se3_apply", "se3_matrix", "skew"]

register(Paper(
    name="nerfies",
    title="Nerfies: Deformable Neural Radiance Fields",
    arxiv="2011.12948",
    year=2020,
    status="checked",
    models=("Nerfies",),
    recipes={"nerfies": "paperzoo.papers.nerfies.recipe:run"},
    benches={"nerfies": "paperzoo.bench.nerfies:run"},
    render="paperzoo.papers.nerfies.recipe:render_checkpoint",
    claims=(
        "A deformation field into a canonical NeRF beats a static NeRF on validation-rig PSNR of a non-rigid scene; "
        "SE(3) beats translation; coarse-to-fine, elastic and background regularisation each help.",
    ),
    presets=("tiny", "small", "paper"),
))
