"""``paperzoo reproduce NAME --compile``: the recipe trains through torch.compile and its run records it."""

import json

import torch
from test_cli_errors import fake  # noqa: F401 (the fixture: the fake recipe registered for this process)


def test_reproduce_compile_compiles_the_training_step_and_records_it(fake, tmp_path, monkeypatch):  # noqa: F811
    seen = []
    real = torch.compile

    def compile_(model, **kw):  # dynamo's "eager" backend: traces, generates no code (seconds, the same numbers)
        seen.append(type(model).__name__)
        return real(model, backend="eager", **kw)

    monkeypatch.setattr(torch, "compile", compile_)
    torch._dynamo.reset()
    out = tmp_path / "run"
    result = fake("--preset", "tiny", "--out", str(out), "--compile")
    assert result.exit_code == 0, result.output
    assert seen == ["Linear"] * 4  # 2 variants x 2 seeds, each job's model compiled once
    assert json.loads((out / "config.json").read_text())["config"]["train"]["compile"] is True
    plain = tmp_path / "plain"
    assert fake("--preset", "tiny", "--out", str(plain)).exit_code == 0 and len(seen) == 4
    assert json.loads((plain / "config.json").read_text())["config"]["train"]["compile"] is False
