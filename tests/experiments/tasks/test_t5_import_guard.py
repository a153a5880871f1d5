"""A transformers whose lazy T5 import fails gives one DataError line naming the root cause."""

import sys
import types

import pytest

from crosscurv.experiments.tasks.errors import DataError
from crosscurv.experiments.tasks.models import t5lora


def _broken_transformers():
    mod = types.ModuleType("transformers")
    mod.logging = types.SimpleNamespace(set_verbosity_error=lambda: None,
                                        disable_progress_bar=lambda: None)

    def __getattr__(name):
        try:
            raise RuntimeError("operator torchvision::nms does not exist")
        except RuntimeError as exc:
            raise ModuleNotFoundError(f"Could not import module '{name}'.") from exc

    mod.__getattr__ = __getattr__
    return mod


def test_root_cause_and_hint_in_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", _broken_transformers())
    with pytest.raises(DataError) as info:
        t5lora.random_t5(t5lora.T5Size(d_model=8, d_kv=4, num_heads=2, d_ff=16, num_layers=1))
    msg = str(info.value)
    assert "\n" not in msg
    assert "RuntimeError: operator torchvision::nms does not exist" in msg
    assert "torchvision that does not match" in msg
