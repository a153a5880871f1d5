"""The seed selects the data subset: seed 0 keeps the historic selection, other seeds differ."""

import torch

from crosscurv.experiments.tasks.data import load_cifar10, load_mnist, load_sst2
from crosscurv.experiments.tasks.data._pkgdata import balanced_indices


def test_balanced_indices_seed0_is_evenly_spaced_and_other_seeds_differ():
    labels = [i % 3 for i in range(300)]
    even = balanced_indices(labels, 9, [0, 1, 2])
    assert even == balanced_indices(labels, 9, [0, 1, 2], 0)
    assert even == [0, 1, 2, 99, 100, 101, 198, 199, 200]
    s1, s2 = balanced_indices(labels, 9, [0, 1, 2], 1), balanced_indices(labels, 9, [0, 1, 2], 2)
    assert s1 == balanced_indices(labels, 9, [0, 1, 2], 1)  # deterministic
    assert s1 != even and s1 != s2
    assert sorted(labels[i] for i in s1) == [0, 0, 0, 1, 1, 1, 2, 2, 2]  # still balanced
    assert len(set(s1)) == 9


def test_loaders_change_with_the_seed_and_stay_balanced():
    a, b = load_mnist(40), load_mnist(40, seed=3)
    assert not torch.equal(a.x, b.x)
    assert torch.equal(torch.bincount(a.y, minlength=10), torch.bincount(b.y, minlength=10))
    assert "seed 3" in b.source and "seed" not in a.source
    c0, c1 = load_cifar10(20), load_cifar10(20, seed=1)
    assert not torch.equal(c0.x, c1.x)
    assert sorted(c0.y.tolist()) == sorted(c1.y.tolist())  # the same 20 images, another order
    t0, t1 = load_sst2(8), load_sst2(8, seed=2)
    assert t0.sentences != t1.sentences and sorted(t0.labels) == sorted(t1.labels)
