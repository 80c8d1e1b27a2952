"""``python -m paperzoo.bench.swin`` at the tiny preset's sizes: what it measures and writes (no timing asserted)."""

import json

import pytest

from paperzoo.bench.swin import scaling, write_scaling

pytestmark = pytest.mark.usefixtures("one_thread")


def test_scaling_measures_time_flops_and_memory_per_size():
    sc = scaling("tiny")
    assert sc["sizes"] == [32, 64] and sc["slope_sizes"] == [32, 64]
    for measure in ("seconds", "flops", "activation_bytes"):
        for kind in ("swin", "vit"):
            assert len(sc[measure][kind]) == 2 and all(v > 0 for v in sc[measure][kind])
            assert f"{kind}_{measure}" in sc["slopes"]
    # 4x the pixels: at least 4x the FLOPs (tiny models: the linear layers dominate both)
    assert sc["slopes"]["vit_flops"] > 0.99 and sc["slopes"]["swin_flops"] > 0.99


def test_write_scaling_writes_json_table_and_plot(tmp_path):
    path = tmp_path / "swin.scaling.json"
    write_scaling(path, preset="tiny")
    doc = json.loads(path.read_text())
    assert doc["command"] == "python -m paperzoo.bench.swin"
    table = path.with_suffix(".md").read_text()
    assert "| swin | 64x64 |" in table and "vit_flops" in table
    assert path.with_suffix(".png").is_file()
