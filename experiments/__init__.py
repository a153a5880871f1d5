"""The experiments layer of crosscurv (imports :mod:`crosscurv.theory` and :mod:`crosscurv.numeric`),
one subpackage per role:

* :mod:`.tasks` -- the built-in tasks and their presets (``build_task``), ``TASK`` specs
  (:mod:`.tasks.loading`), the models (:mod:`.tasks.models`) and bundled data (:mod:`.tasks.data`);
* :mod:`.problems` -- the toy problems of the error-scaling study and the tests;
* :mod:`.scaling` -- the error-scaling study (observed orders of the remainders);
* :mod:`.studies` -- Table 1 over seeds, the regime map, the trust study and the optimizer
  studies (:mod:`.studies.optimizers`); :mod:`.sweep` runs their grids on Ray;
* :mod:`.motivation` -- the paper's Figure 1 with the practical implementations;
* :mod:`.reports` -- the report writers, Table 1 and ``report --check``;
* :mod:`.conformance` -- golden cases, measured rounding, portability;
* :mod:`.cli` -- the ``crosscurv`` command, one module per sub-command.

Nothing is re-exported here, so that ``crosscurv derive`` starts without importing torch.
"""

__all__: list[str] = []
