"""Experiments, data, presets, CLI and report writers of crosscurv (imports theory and numeric)."""
