"""``--threads auto``: the candidate counts, the choice with its margin, and the measurement."""

import pytest
import torch

from crosscurv.experiments.thread_count import MARGIN, candidates, choose, fastest_threads


@pytest.mark.parametrize("cpus, counts", [(1, [1]), (2, [1, 2]), (3, [1, 2, 3]), (6, [1, 2, 4, 6]),
                                          (8, [1, 2, 4, 8])])
def test_candidates_double_up_to_the_cpus(cpus, counts):
    assert candidates(cpus) == counts


def test_candidates_default_to_the_cpus_this_process_may_use():
    assert candidates()[-1] >= 1 and candidates()[0] == 1


def test_more_threads_only_when_faster_by_the_margin():
    assert MARGIN == 0.05
    assert choose({1: 1.0, 2: 0.96}) == 1  # 4% faster: not worth a second thread
    assert choose({1: 1.0, 2: 0.95}) == 2
    assert choose({1: 1.0, 2: 1.3}) == 1  # two measured slower than one
    assert choose({1: 1.0, 2: 0.9, 4: 0.88}) == 2  # 4 within the margin of 2
    # compared with the best so far, whatever the order given
    assert choose({4: 0.5, 1: 1.0, 2: 1.2}) == 4
    with pytest.raises(ValueError):
        choose({})


def test_fastest_threads_times_each_count_and_restores_torch_s():
    w = {"a": torch.randn(64, 64), "b": torch.randn(64)}

    def loss(p):
        return torch.tanh(p["a"] @ p["b"]).pow(2).sum()

    before = torch.get_num_threads()
    n, seconds = fastest_threads(loss, w, counts=[1, 2], repeats=2)
    assert set(seconds) == {1, 2} and all(t > 0 for t in seconds.values())
    assert n == choose(seconds)
    assert torch.get_num_threads() == before
