"""Studies over seeds and the regime map, aggregated from sweep folders (``crosscurv studies``).

* :mod:`~experiments.studies.collect`: the finished runs of a sweep folder;
* :mod:`~experiments.studies.seeds`: Table 1 over seeds (mean and [min, max] of every metric);
* :mod:`~experiments.studies.regime`: agreement and MAE against the measured ``eta * sharpness``,
  and the computed sentence per task and estimate;
* :mod:`~experiments.studies.threads`: the same study with another thread count, compared;
* :mod:`~experiments.studies.figures`: winner timelines over seeds, the regime-map figures;
* :mod:`~experiments.studies.report`: ``studies.md``.
"""

from experiments.studies.report import StudiesResult, write_studies_report

__all__ = ["StudiesResult", "write_studies_report"]
