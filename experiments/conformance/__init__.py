"""Conformance: what other implementations are checked against, and how far numbers may differ.

* :mod:`.golden` -- framework-independent golden cases (``crosscurv golden``);
* :mod:`.rounding` -- the measured rounding of every record column (``MEASURED_ROUNDING``),
  from which cross-machine tolerances are derived (``make rounding``);
* :mod:`.portability` -- ``report --check`` of the committed runs under emulated instruction
  sets, written to ``reports/portability.md`` (``make portability``).
"""
