"""Layer-wise SGD with torch.optim param groups, output layer first: with and without recomputation.

A tanh MLP (``nn.Sequential``), one SGD optimizer with one named param group per layer listed output
to input, and the blocks taken from those groups (``blocks="param_groups"``). The update touches one
group at a time by clearing the other groups' gradients before ``opt.step()`` (SGD skips a parameter
whose ``.grad`` is ``None``):

* :func:`recomputed` -- a fresh forward/backward before each layer's step:
  GS in block order (layer3, layer2, layer1);
* :func:`one_backward` -- one forward/backward, then the layers stepped
  output to input: the order of the steps is no Gauss-Seidel, this is JC.

    crosscurv validate-step examples/layerwise_sgd.py:one_backward
"""

from __future__ import annotations

import torch

from crosscurv.numeric import step_from_training_code


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 4),
                                torch.nn.Tanh(), torch.nn.Linear(4, 3)).double()
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 4, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (6,), generator=gen)

    def loss(model):
        return torch.nn.functional.cross_entropy(model(x), y)

    def optimizers(model):
        return torch.optim.SGD([{"params": model[4].parameters(), "name": "layer3"},
                                {"params": model[2].parameters(), "name": "layer2"},
                                {"params": model[0].parameters(), "name": "layer1"}], lr=0.1)

    return model, loss, optimizers


def _step_group(opt, k):
    for i, g in enumerate(opt.param_groups):
        if i != k:
            for p in g["params"]:
                p.grad = None
    opt.step()


def recomputed():
    model, loss, optimizers = _setup()

    def train_step(model, opt):
        for k in range(len(opt.param_groups)):
            opt.zero_grad()
            loss(model).backward()  # fresh forward/backward at the partly updated model
            _step_group(opt, k)

    return step_from_training_code(model, train_step, loss, "param_groups", optimizers=optimizers,
                                   pattern="gs:layer3,layer2,layer1",
                                   name="layer-wise SGD, recomputed")


def one_backward():
    model, loss, optimizers = _setup()

    def train_step(model, opt):
        opt.zero_grad()
        loss(model).backward()
        grads = {p: p.grad for g in opt.param_groups for p in g["params"]}
        for k, group in enumerate(opt.param_groups):  # output to input, one backward only
            for p in group["params"]:
                p.grad = grads[p]
            _step_group(opt, k)

    return step_from_training_code(model, train_step, loss, "param_groups", optimizers=optimizers,
                                   pattern="gs:layer3,layer2,layer1",
                                   name="layer-wise SGD, one backward")
