"""run_jobs: results in job order, errors surface, the worker count is validated."""

import math
import operator

import pytest

from paperzoo.train.parallel import run_jobs


@pytest.mark.parametrize("workers", [1, 2])
def test_results_come_back_in_job_order(workers):
    jobs = [(i, 10 * i) for i in range(5)]
    assert run_jobs(operator.add, jobs, workers=workers) == [11 * i for i in range(5)]


def test_worker_error_is_raised():
    with pytest.raises(ValueError, match="math domain error"):
        run_jobs(math.sqrt, [(4.0,), (-1.0,), (9.0,)], workers=2)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_worker_count(bad):
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        run_jobs(operator.add, [(1, 2)], workers=bad)
