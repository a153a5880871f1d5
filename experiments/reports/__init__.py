"""Report writers: everything under the repository's ``reports/`` folder.

* :mod:`.build` -- ``crosscurv report`` / ``make report``: derivations, scaling, the three studies,
  Table 1, figures and the index;
* :mod:`.check` -- ``crosscurv report --check``: recompute committed runs and say what reproduced;
* :mod:`.table` -- Table 1 (``crosscurv table``), for one run and over seeds;
* :mod:`.plotting` -- the gap curves and winner timelines.
"""
