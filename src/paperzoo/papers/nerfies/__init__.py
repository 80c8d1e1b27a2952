"""Nerfies (Park et al., 2021): a per-image deformation field warps observed points into one canonical NeRF, trained
coarse-to-fine with elastic and background regularisers of the warp.

Not registered here: the reading-list entry in :mod:`paperzoo.registry` names the model until a recipe lands.
"""

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
