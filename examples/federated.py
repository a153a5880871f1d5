"""Personalised federated learning written with torch.optim: FedSim, FedAlt and FedAvg over C
clients.

A model with a shared feature layer and one personal head per client; client ``c`` has its own batch
and loss ``L_c(u_c, v)`` (``u_c`` its head, ``v`` the shared layer). The steps are the usual
local-update-then-average code, with two optimizers and ``requires_grad`` toggling, no crosscurv
code inside. The objective the harness compares against is the mean ``L = (1/C) sum_c L_c``; blocks
``personal`` (all heads) and ``shared``.

Against ``L`` a client's head moves ``C`` times as far as the step size says (``grad_{u_c} L =
grad_{u_c} L_c / C``), while the averaged shared layer moves by ``-eta grad_v L``: per-block step
factors ``personal = C, shared = 1``, which ``crosscurv validate-step`` infers from the first-order
term:

* :func:`fedsim` -- each client takes one gradient of ``L_c`` for its head and the shared layer (two
  optimizers, one backward), the server averages the shared layer: JC with step factors personal=2,
  shared=1;
* :func:`fedalt` -- each client first updates its head with the shared layer frozen, then the shared
  layer with its head frozen and a *fresh forward pass*: GS in block order (personal, shared),
  factors as above;
* :func:`fedavg` -- FedAvg with one SGD optimizer per client over all its parameters, ``clients``
  clients: JC with factors personal=C, shared=1.

    crosscurv validate-step examples/federated.py:fedalt
"""

from __future__ import annotations

import torch

from crosscurv.numeric import step_from_training_code

D_IN, D_HID, D_OUT, M = 3, 4, 2, 6
BLOCKS = {"personal": "heads.*", "shared": "features.*"}


class PersonalisedNet(torch.nn.Module):
    def __init__(self, clients: int):
        super().__init__()
        self.features = torch.nn.Linear(D_IN, D_HID)
        self.heads = torch.nn.ModuleList(torch.nn.Linear(D_HID, D_OUT) for _ in range(clients))

    def forward(self, x, client: int):
        return self.heads[client](torch.tanh(self.features(x)))


def _setup(clients: int, seed: int = 0):
    torch.manual_seed(seed)
    model = PersonalisedNet(clients).double()
    gen = torch.Generator().manual_seed(seed)
    data = [(torch.randn(M, D_IN, generator=gen, dtype=torch.float64),
             torch.randn(M, D_OUT, generator=gen, dtype=torch.float64)) for _ in range(clients)]

    def client_loss(model, c):
        x, y = data[c]
        return ((model(x, c) - y) ** 2).mean()

    def mean_loss(model):
        return sum(client_loss(model, c) for c in range(clients)) / clients

    return model, client_loss, mean_loss


def _two_optimizers(model):
    return {"personal": torch.optim.SGD(model.heads.parameters(), lr=0.1),
            "shared": torch.optim.SGD(model.features.parameters(), lr=0.1)}


def _average_into(model, states):
    with torch.no_grad():
        for n, p in model.features.named_parameters():
            p.copy_(sum(s[n] for s in states) / len(states))


def fedsim(clients: int = 2):
    model, client_loss, mean_loss = _setup(clients)

    def train_step(model, opts):
        start = {n: p.detach().clone() for n, p in model.features.named_parameters()}
        local = []
        for c in range(clients):
            model.features.load_state_dict(start)
            for o in opts.values():
                o.zero_grad()
            client_loss(model, c).backward()
            opts["personal"].step()
            opts["shared"].step()
            local.append({n: p.detach().clone() for n, p in model.features.named_parameters()})
        _average_into(model, local)

    return step_from_training_code(model, train_step, mean_loss, BLOCKS, optimizers=_two_optimizers,
                                   pattern="jc", name="FedSim")


def fedalt(clients: int = 2):
    model, client_loss, mean_loss = _setup(clients)

    def train_step(model, opts):
        start = {n: p.detach().clone() for n, p in model.features.named_parameters()}
        local = []
        for c in range(clients):
            model.features.load_state_dict(start)
            model.features.requires_grad_(False)  # personal update, shared frozen
            model.heads[c].requires_grad_(True)
            opts["personal"].zero_grad()
            client_loss(model, c).backward()
            opts["personal"].step()
            # shared update, personal frozen, fresh forward pass
            model.features.requires_grad_(True)
            model.heads[c].requires_grad_(False)
            opts["shared"].zero_grad()
            client_loss(model, c).backward()
            opts["shared"].step()
            model.heads[c].requires_grad_(True)
            local.append({n: p.detach().clone() for n, p in model.features.named_parameters()})
        _average_into(model, local)

    return step_from_training_code(model, train_step, mean_loss, BLOCKS, optimizers=_two_optimizers,
                                   pattern="gs:personal,shared", name="FedAlt")


def fedavg(clients: int = 2):
    model, client_loss, mean_loss = _setup(clients)

    def optimizers(model):
        return [torch.optim.SGD(list(model.features.parameters()) + list(model.heads[
            c].parameters()), lr=0.1)
                for c in range(clients)]

    def train_step(model, opts):
        start = {n: p.detach().clone() for n, p in model.features.named_parameters()}
        local = []
        for c, opt in enumerate(opts):
            model.features.load_state_dict(start)
            opt.zero_grad()
            client_loss(model, c).backward()
            opt.step()
            local.append({n: p.detach().clone() for n, p in model.features.named_parameters()})
        _average_into(model, local)

    return step_from_training_code(model, train_step, mean_loss, BLOCKS, optimizers=optimizers,
                                   pattern="jc", name=f"FedAvg, {clients} clients")
