"""The ``paperzoo`` command line: list papers, manage data, reproduce claims, run benchmarks."""

from __future__ import annotations

import gzip
import json
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from paperzoo import __version__, registry
from paperzoo.hub.cli import app as hub_app

# plain click help: typer's rich panels print every flag with a type (`--resume <bool>`, even `--help <bool>`)
app = typer.Typer(help="paperzoo: papers you can run.", no_args_is_help=True, add_completion=False,
                  rich_markup_mode=None)
data_app = typer.Typer(help="Data sets: list, verify checksums, fetch from the public source.",
                       no_args_is_help=True, rich_markup_mode=None)
app.add_typer(data_app, name="data")
explain_app = typer.Typer(help="Explain a trained classifier's prediction on an image.", no_args_is_help=True)
app.add_typer(explain_app, name="explain")
console = Console()


# `paperzoo hub ...`: its module imports only typer; each command imports the [hub] extra when it runs
app.add_typer(hub_app, name="hub")


def _fail(message: str) -> None:
    """One red line (never wrapped, no markup read from the message) and exit status 2."""
    console.print(Text(f"error: {message}", style="red"), soft_wrap=True)
    raise typer.Exit(code=2)


# what a reader raises on a damaged file it did not (or could not) verify first; click would print "Aborted!"
# for EOFError and a traceback for the others
_DAMAGED = (EOFError, gzip.BadGzipFile, zlib.error, tarfile.TarError, zipfile.BadZipFile)


@contextmanager
def _one_line_errors() -> Iterator[None]:
    """Missing or damaged data and bad arguments end the command with one red line instead of a traceback."""
    try:
        yield
    except _DAMAGED as e:
        _fail(f"a data file is damaged or truncated ({type(e).__name__}: {e}); `paperzoo data verify` names it and "
              f"`paperzoo data fetch NAME` replaces it")
    except (FileNotFoundError, ValueError) as e:  # missing data (DataNotFoundError), damaged data
        _fail(str(e))  # (DataIntegrityError), bad preset or option


def _version(value: bool) -> None:
    if value:
        console.print(f"paperzoo {__version__}")
        raise typer.Exit()


@app.callback()
def main(ctx: typer.Context,
         version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """paperzoo: papers you can run."""
    from paperzoo.context import cli_context

    # messages name the CLI's flags (--resume, --out), not the Python API, for this command and its workers
    ctx.with_resource(cli_context())


@app.command("list")
def list_papers(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    markdown: bool = typer.Option(False, "--markdown", help="Print the README's Markdown table."),
    wide: bool = typer.Option(False, "--wide", help="Also show title, arXiv id, year and models."),
) -> None:
    """Every registered paper: name, status, verdict of its committed report, recipes (--wide for the rest;
    `paperzoo show NAME` for one)."""
    papers = registry.papers()
    if markdown:
        print(registry.markdown_table())
        return
    if as_json:
        print(json.dumps([p.as_dict() for p in papers], indent=2))
        return
    cols = ("name", "status", "verdict (preset)", "recipes") + (("title", "arXiv", "year", "models") if wide else ())
    table = Table(title="paperzoo papers",
                  caption=None if wide else "status: the code's state; verdict: its committed reproduction's.\n"
                                            "paperzoo show NAME for one paper; --wide for all")
    for col in cols:
        table.add_column(col, overflow="fold", no_wrap=col in ("name", "status"))
    for p in papers:
        row = [p.name, p.status, registry.verdict_label(p), ", ".join(sorted(p.recipes)) or "-"]
        if wide:
            row += [p.title, p.arxiv, str(p.year), ", ".join(p.models)]
        table.add_row(*row)
    console.print(table)


@app.command()
def show(name: str = typer.Argument(..., help="Paper name (see `paperzoo list`).")) -> None:
    """One paper: title, arXiv, status, models, recipes with presets, benchmarks and claims."""
    try:
        p = registry.get(name)
    except KeyError as e:
        _fail(str(e.args[0]))
    console.print(f"[bold]{p.name}[/bold]: {p.title}")
    console.print(f"arXiv {p.arxiv} ({p.year}), https://arxiv.org/abs/{p.arxiv}")
    console.print(f"status: {p.status} ({_STATUS_WORDS[p.status]})")
    console.print(f"models: {', '.join(p.models) or '-'}")
    found = registry.verdicts(p)
    if p.presets:
        console.print(f"model presets: {', '.join(p.presets)}")
    for r in sorted(p.recipes):
        console.print(f"recipe: paperzoo reproduce {r}  (--preset {' | '.join(registry.recipe_presets(r))}; "
                      f"default small)")
        mine = [v for v in found.values() if v.recipe == r]
        for v in mine:
            console.print(f"  verdict: {v.label()}, report {v.report / 'report.md'}")
        if not mine:
            console.print("  verdict: - (no committed report)")
    for b in sorted(p.benches):
        console.print(f"bench: paperzoo bench {b}")
    for c in p.claims:
        console.print(f"claim: {c}")


_STATUS_WORDS = {
    "planned": "on the reading list, no code yet",
    "implemented": "code and tests; no committed reproduction yet",
    "checked": "correctness checks pass and a reproduction report is committed, whatever its verdict",
}


def _recipe_target(name: str) -> str:
    recipes = {r: t for p in registry.papers() for r, t in p.recipes.items()}
    if name not in recipes:
        _fail(f"unknown recipe {name!r}; valid names: {', '.join(sorted(recipes)) or '(none yet)'}")
    return recipes[name]


class _ListsRecipes(typer.core.TyperCommand):
    """``paperzoo reproduce --help`` ends with every recipe and its presets (read from the registry only when
    help is asked for: it imports every recipe)."""

    def format_epilog(self, ctx, formatter) -> None:  # noqa: ANN001 (click's types)
        with formatter.section("Recipes (--preset; default small; tiny is a smoke test, not a reproduction)"):
            formatter.write_dl([(r, " | ".join(registry.recipe_presets(r)))
                                for p in registry.papers() for r in sorted(p.recipes)])


@app.command(cls=_ListsRecipes)
def reproduce(
    name: str = typer.Argument(..., help="Recipe name (see `paperzoo list`)."),
    preset: str = typer.Option(None, "--preset", help="Preset of the recipe (default: the recipe's own)."),
    seeds: int = typer.Option(None, "--seeds", min=1, help="Number of seeds (default: the recipe's own)."),
    out: Path = typer.Option(None, "--out", help="Run folder (default runs/<paper>/<stamp>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out from its checkpoints."),
    workers: int = typer.Option(None, "--workers", min=1,
                                help="Train this many independent runs at once, in separate processes."),
    precision: str = typer.Option(None, "--precision",
                                  help="fp32, bf16 (mixed: fp32 weights, bf16 matmuls) or auto (bf16 where this "
                                       "machine computes it fast); default: the preset's own."),
    compile: bool = typer.Option(False, "--compile",
                                 help="Train through torch.compile (inductor): the first steps pay the compilation; "
                                      "see benchmarks/compile.md for where it is faster."),
) -> None:
    """Run a paper's reproduction and write its report."""
    from paperzoo.recipes import compiling, discard_unstarted, started_runs
    from paperzoo.report.run import RunFolderBusyError

    if resume and out is None:
        _fail("--resume needs --out DIR: the run folder to continue")
    run = registry.resolve(_recipe_target(name))
    before = len(started_runs())
    try:
        with _one_line_errors(), compiling(True) if compile else nullcontext():
            run_dir = run(preset=preset, seeds=seeds, out=out, resume=resume, workers=workers or 1,
                          precision=precision)
    except BaseException as e:
        mine = started_runs()[before:]  # the run folder this command opened, if it got that far
        if mine and discard_unstarted(mine[-1]):
            mine = []  # it held nothing but its config: removed, so the last real result stays the newest
        if isinstance(e, FileNotFoundError | ValueError | RunFolderBusyError):
            _fail(str(e))  # missing data, bad preset, busy folder: one clear line, no traceback
        code = e.code if isinstance(e, SystemExit) else 130 if isinstance(e, KeyboardInterrupt) else None
        if code in (130, 143) and mine:
            again = [f"paperzoo reproduce {name}", f"--out {mine[-1]}", "--resume"]
            again += [f"{flag} {v}" for flag, v in (("--preset", preset), ("--seeds", seeds), ("--workers", workers),
                                                    ("--precision", precision)) if v is not None]
            again += ["--compile"] if compile else []
            console.print(f"interrupted; continue with: {' '.join(again)}", highlight=False, soft_wrap=True)
        if code in (130, 143):
            raise typer.Exit(code=code) from None
        raise
    _print_outcome(Path(run_dir))


def _print_outcome(run_dir: Path) -> None:
    """What the user ran the command for: the claim, the verdict (a smoke test says so), where to look next."""
    from paperzoo.report.index import SMOKE, _preset
    from paperzoo.report.run import runs_root

    try:
        result = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        result = {}
    preset = _preset(run_dir)
    if result.get("claim"):
        console.print(f"claim: {result['claim']}", highlight=False, soft_wrap=True)
    if result.get("verdict"):
        caveat = f" ({SMOKE})" if preset == "tiny" else f" (preset {preset})" if preset else ""
        console.print(Text(f"verdict: {result['verdict']}{caveat}", style="bold"), soft_wrap=True)
    console.print(f"report: {run_dir / 'report.md'}", highlight=False, soft_wrap=True)
    index = runs_root().parent / "reports" / "index.html"
    if index.is_file():
        console.print(f"every run: {index}", highlight=False, soft_wrap=True)


@app.command()
def bench(
    name: str = typer.Argument(..., help="Benchmark name."),
    json_path: Path = typer.Option(None, "--json", help="Write the figures as JSON to this path (a .md beside it)."),
    commit: bool = typer.Option(False, "--commit",
                                help="Write the committed benchmarks/NAME.json and .md (run from the repository root; "
                                     "hand-written readings in the .md are kept). Default: runs/bench/NAME/<stamp>/."),
    precision: str = typer.Option("all", "--precision",
                                  help="all (fp32 rows, then bf16 rows where this machine computes bf16 fast), "
                                       "fp32 or bf16."),
) -> None:
    """Time ours against the peer library in one process and print the ratios."""
    from paperzoo.bench import run_bench
    from paperzoo.bench.runner import BenchOptionError

    try:
        with _one_line_errors():
            run_bench(name, json_path=json_path, commit=commit, precision=precision)
    except KeyError as e:
        _fail(str(e.args[0]))
    except BenchOptionError as e:
        _fail(str(e))


@app.command()
def render(
    name: str = typer.Argument(..., help="Paper whose trained model renders views (e.g. nerf)."),
    checkpoint: Path = typer.Option(..., "--checkpoint", help="A training checkpoint ckpt-N.pt or its job folder."),
    out: Path = typer.Option(Path("orbit.mp4"), "--out", help="Video to write: .mp4 or .gif."),
    frames: int = typer.Option(40, "--frames", min=1, help="Views around the orbit."),
    side: int = typer.Option(None, "--side", min=8, help="Image side in pixels (default: the training views')."),
) -> None:
    """Render an orbit video (and depth maps) from a trained model's checkpoint."""
    try:
        p = registry.get(name)
    except KeyError as e:
        _fail(str(e.args[0]))
    if not p.render:
        valid = ", ".join(q.name for q in registry.papers() if q.render) or "(none)"
        _fail(f"paper {name!r} has no renderer; papers that render: {valid}")
    with _one_line_errors():
        path = registry.resolve(p.render)(checkpoint, out, frames=frames, side=side)
    console.print(f"wrote {path}")


@app.command()
def export(
    model_dir: Path = typer.Argument(..., help="Folder with config.json + model.safetensors of a trained MobileNetV2."),
    out: Path = typer.Option(Path("export"), "--out", help="Output folder."),
    fmt: str = typer.Option("onnx", "--format", help="onnx | torchscript | int8"),
    image_size: int = typer.Option(None, "--image-size", help="Input size (default: the model's own)."),
    calibration: str = typer.Option(None, "--calibration", help="'cifar10' to calibrate int8 on real images."),
    verify: bool = typer.Option(True, "--verify/--no-verify",
                                help="Check the ONNX graph's outputs against PyTorch with onnxruntime."),
) -> None:
    """Export a trained MobileNetV2 for deployment (folded BatchNorm) to ONNX, TorchScript or int8."""
    from paperzoo.papers.mobilenetv2.deploy import export as export_mobilenetv2

    try:
        with _one_line_errors():
            path = export_mobilenetv2(model_dir, out, fmt=fmt, image_size=image_size, calibration=calibration,
                                      verify=verify)
    except ImportError as e:  # onnxruntime missing for --verify
        _fail(str(e))
    checked = " (checked against PyTorch with onnxruntime)" if fmt == "onnx" and verify else (
        " (not checked: --no-verify)" if fmt == "onnx" else "")
    console.print(f"wrote {path}{checked}")


@explain_app.command("latent-shift")
def explain_latent_shift(
    checkpoint: Path = typer.Option(..., "--checkpoint",
                                    help="A job folder of `paperzoo reproduce latent-shift` (models/seed-K)."),
    image: str = typer.Option(..., "--image", help="A grey image file (PNG, ...; resized to 28x28), or "
                                                   "lesions:N for test image N of the lesion set."),
    target: int = typer.Option(..., "--target", help="Output of the classifier to explain (0 bright, 1 dark)."),
    out: Path = typer.Option(Path("anim.gif"), "--out", help="Animation to write: .gif or .mp4."),
    panel: Path = typer.Option(None, "--panel", help="Also write a PNG panel of the map and the Captum baselines."),
    frames: int = typer.Option(10, "--frames", min=2, help="Frames from lambda 0 to the stopping lambda."),
) -> None:
    """Latent Shift: the counterfactual path as an animation (and the maps as a PNG panel)."""
    from paperzoo.papers.latent_shift.recipe import explain_checkpoint

    with _one_line_errors():
        info = explain_checkpoint(checkpoint, image, target, out, panel=panel, frames=frames)
    console.print(f"wrote {out}" + (f" and {panel}" if panel else "") + f" ({info})", highlight=False)


@data_app.command("list")
def data_list() -> None:
    """Every data set paperzoo knows, with where it is and whether it is present."""
    from paperzoo import data

    table = Table(title=f"data sets under {data.data_root()}",
                  caption="`paperzoo data fetch NAME` downloads a set; 'rebuild': from its public original")
    for col in ("name", "files", "present", "fetch", "license", "source"):
        table.add_column(col, overflow="fold", no_wrap=col == "name")
    for info in data.DATASETS.values():
        how = "rebuild" if info.build is not None else "download"
        table.add_row(info.name, str(len(info.files)), "yes" if data.is_present(info.name) else "no", how,
                      info.license, info.homepage)
    console.print(table)


@data_app.command("use")
def data_use(path: Path = typer.Argument(None, help="The folder that holds the data sets (omit to show the current)."),
             forget: bool = typer.Option(False, "--forget", help="Forget the saved folder.")) -> None:
    """Save the data folder for this Python environment, so every later `paperzoo` finds it without PAPERZOO_DATA
    (which, when set, still wins)."""
    from paperzoo import data

    if forget:
        data.save_root(None)
    elif path is not None:
        with _one_line_errors():
            data.save_root(path)
    console.print(f"data folder: {data.data_root()} ({data.data_root_source()})", highlight=False, soft_wrap=True)


@data_app.command("verify")
def data_verify(name: str = typer.Argument(None, help="One data set (default: every set with a folder there).")
                ) -> None:
    """Check the sha256 of every file of the data set(s)."""
    from paperzoo import data

    root = data.data_root()
    where = data.data_root_source()
    if name and name not in data.DATASETS:
        _fail(f"unknown data set {name!r}; valid names: {', '.join(sorted(data.DATASETS))}")
    if not root.is_dir():
        _fail(f"data folder {root} ({where}) does not exist: nothing to verify. Set PAPERZOO_DATA to the folder that "
              f"holds the sets, or get one with `paperzoo data fetch {name or 'NAME'}`")
    if name and not (root / name).is_dir():
        _fail(f"{root / name} does not exist: data set {name!r} is not under {root} ({where}). "
              f"Get it with `paperzoo data fetch {name}`")
    names = [name] if name else [n for n in data.DATASETS if (root / n).is_dir()]
    if not names:
        _fail(f"no data set under {root} ({where}): nothing to verify; `paperzoo data list` names them")
    bad = 0
    for n in names:
        for rel, ok, why in data.verify(n):
            bad += not ok
            console.print(Text.assemble(("ok  ", "green") if ok else ("FAIL", "red"), f" {n}/{rel}",
                                        "" if ok else f"  ({why})"), soft_wrap=True)
    if bad:
        _fail(f"{bad} file(s) failed verification; `paperzoo data fetch NAME` replaces them")
    console.print(f"verified {len(names)} data set(s) under {root}")


@data_app.command("fetch")
def data_fetch(name: str = typer.Argument(..., help="Data set to download.")) -> None:
    """Download a data set from its public source (rebuilding repacked sets from their original), checking sha256
    before anything is kept."""
    from paperzoo import data

    if name not in data.DATASETS:
        _fail(f"unknown data set {name!r}; valid names: {', '.join(sorted(data.DATASETS))}")
    try:
        path = data.fetch(name)
    except (data.DownloadError, OSError) as e:
        _fail(str(e))
    console.print(f"{name}: {path}")


if __name__ == "__main__":
    app()
