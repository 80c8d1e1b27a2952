"""NeRF (Mildenhall et al., 2020): a scene as an MLP from position and direction to density and colour, rendered by
volume integration along camera rays, with hierarchical sampling."""

from paperzoo.registry import Paper, register

from .model import NeRFConfig, NeRFMLP
from .objective import nerf_loss, psnr
from .render import NeRF, RenderConfig, get_rays, render_image, render_rays, sample_pdf, stratified_samples

__all__ = ["NeRF", "NeRFConfig", "NeRFMLP", "RenderConfig", "get_rays", "nerf_loss", "psnr", "render_image",
           "render_rays", "sample_pdf",
           "stratified_samples"]

register(Paper(
    name="nerf",
    title="NeRF: Representing Scenes as Neural Radiance Fields for View Synthesis",
    arxiv="2003.08934",
    year=2020,
    status="checked",
    models=("NeRFMLP",),
    recipes={"nerf": "paperzoo.papers.nerf.recipe:run"},
    benches={"nerf": "paperzoo.bench.nerf:run"},
    render="paperzoo.papers.nerf.recipe:render_checkpoint",
    claims=(
        "Positional encoding and hierarchical sampling both improve held-out PSNR on the lego scene.",
    ),
    presets=("tiny", "small", "paper"),
))
