"""Should the ``fl`` ResNet-18 keep a hand-written convolution? Absolute times, side by side.

The question is decided by what the protocol pays at every iterate: one
gradient with its graph kept (``numeric.point.PointCurvature``) and several
Hessian-vector products through that graph.  This script builds the ``fl``
task twice in one process, once with the suite's former
``experiments.models.conv.Conv2d`` (a double backward written on
``aten.convolution_backward``) and once with ``torch.nn.Conv2d``, and times,
interleaved, a plain gradient, building the graph at a point and one product
on it (CPU time, 1 thread, medians of the repeats after the first).

Run (only at the commit that still has ``experiments/models/conv.py``)::

    .venv/bin/python benchmarks/bench_conv_choice.py WIDTH REPEATS

Measured on the reference machine (2 cores, shared while measuring), custom
against ``torch.nn.Conv2d``, in ms:

=====  ==============  ===============  ===============
width  gradient        graph at point   product
=====  ==============  ===============  ===============
16     122.2 / 105.6   122.7 / 105.4    267.1 / 245.6
64     1412 / 1295     1518 / 1324      3114 / 2921
=====  ==============  ===============  ===============

``torch.nn.Conv2d`` is faster on everything the protocol pays, so the custom
convolution was removed (its better product/gradient *ratio* came from a
slower gradient).
"""

import statistics
import sys
import time

import torch
from torch import nn

import experiments.models.resnet as resnet
import experiments.tasks as tasks
from numeric.point import PointCurvature


class PlainConv2d(nn.Conv2d):
    def __init__(self, cin, cout, k, stride=1, padding=0, bias=False):
        super().__init__(cin, cout, k, stride=stride, padding=padding, bias=False)


def task_with(conv, width):
    resnet.Conv2d = conv
    tasks.TASKS["fl"].presets["default"] = dict(tasks.TASKS["fl"].presets["default"], width=width)
    return tasks.build_task("fl", "default")[0]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    width, reps = (int(argv[0]), int(argv[1])) if argv else (16, 7)
    torch.set_num_threads(1)
    built = {"custom": task_with(resnet.Conv2d, width), "torch.nn.Conv2d": task_with(PlainConv2d, width)}
    res = {k: {"gradient": [], "graph at point": [], "product": []} for k in built}
    clock = time.process_time
    for _ in range(reps):
        for name, t in built.items():
            p = {k: v.detach().clone().requires_grad_(True) for k, v in t.params.items()}
            t0 = clock(); torch.autograd.grad(t.loss(p), list(p.values())); t1 = clock()
            res[name]["gradient"].append(t1 - t0)
            t0 = clock(); pc = PointCurvature(t.loss, t.params); t1 = clock()
            v = {k: torch.randn_like(x) for k, x in t.params.items()}
            t2 = clock(); pc.hvp(v); t3 = clock(); pc.release()
            res[name]["graph at point"].append(t1 - t0)
            res[name]["product"].append(t3 - t2)
    for name, r in res.items():
        print(f"width {width:3d} {name:16s} " + "  ".join(
            f"{k} {1000 * statistics.median(v[1:]):8.1f} ms" for k, v in r.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
