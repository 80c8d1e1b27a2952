"""``paperzoo bench nerfies`` on its tiny case: it runs, its rows carry rays/s and the Jacobian cost, and the
jacfwd+vmap peer computes the same Jacobians as ours (no timing asserted)."""

import torch

from paperzoo.bench.nerfies import _model, jacfwd_jacobian, jacobian_closures, run


def test_our_jacobian_equals_jacfwd_vmap(one_thread):
    model = _model("tiny", "se3")
    pts = torch.rand(32, 3) * 2 - 1
    codes = model.warp_codes(torch.randint(0, 16, (32,))).detach()
    ours = model.warp.warp_and_jacobian(pts, codes, 2.0)
    ref = jacfwd_jacobian(model.warp, pts, codes, 2.0)
    assert torch.allclose(ours[0], ref[0], atol=1e-6) and torch.allclose(ours[1], ref[1], atol=1e-5)
    _, diff = jacobian_closures(model, 16)
    assert diff < 1e-5


def test_bench_runs_on_the_tiny_case(one_thread, monkeypatch):
    monkeypatch.setenv("PAPERZOO_BENCH_QUICK", "1")
    rows, meta = run(repeats=1)
    names = [r.name for r in rows]
    assert names == ["nerfies train step tiny (nerfies vs nerf)", "nerfies train step tiny (se3, no elastic vs nerf)",
                     "nerfies jacobian tiny"]
    for r in rows[:2]:
        assert r.ours_ms > 0 and r.peer_ms > 0 and r.peer == "nerf" and r.flops > 0
        assert r.extra["rays_per_s"] > 0 and r.extra["peer_rays_per_s"] > 0
    jac = rows[2]
    assert jac.peer == "jacfwd+vmap" and jac.extra["us_per_sample"] > 0 and jac.extra["max_abs_diff_vs_jacfwd"] < 1e-5
    assert meta["torch_threads"] >= 1
