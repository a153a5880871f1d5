"""Studies over seeds and the regime map, aggregated from sweep folders (``crosscurv studies``).

* :mod:`~crosscurv.experiments.studies.collect`: the finished runs of a sweep folder;
* :mod:`~crosscurv.experiments.studies.seeds`: Table 1 over seeds (mean and [min, max] of every
  metric);
* :mod:`~crosscurv.experiments.studies.regime`: agreement and MAE against the measured ``eta *
  sharpness``, and the computed sentence per task and estimate;
* :mod:`~crosscurv.experiments.studies.threads`: the same study with another thread count, compared;
* :mod:`~crosscurv.experiments.studies.figures`: winner timelines over seeds, the regime-map
  figures;
* :mod:`~crosscurv.experiments.studies.report`: ``studies.md``.
"""

from crosscurv.experiments.studies.report import StudiesResult, write_studies_report

__all__ = ["StudiesResult", "write_studies_report"]
