"""The figure of an advice (:class:`crosscurv.numeric.advice.Advice`), matplotlib PNG.

:func:`advice_figure`: the predicted gaps ``L_S - L_JC`` per candidate with the certificate's error
bands (``SAFETY`` times the first dropped order, ``next_order``) on top, the recommended scheme over
``K`` below (filled markers: certified iterations).  With a validation
(:func:`crosscurv.numeric.advice.validate`) the measured gaps are drawn dashed in the candidate's
colour and the certified iterations that were wrong are ringed in red.
"""

from __future__ import annotations

from typing import Mapping

from crosscurv.numeric.certificate import SAFETY

__all__ = ["advice_figure"]


def advice_figure(advice, path: str, validation: Mapping | None = None) -> str:
    """Draw ``advice`` (module docstring) into ``path``; returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = [r["k"] for r in advice.per_iteration]
    fig, (ax, bx) = plt.subplots(
        2, 1, figsize=(7.5, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    measured = (validation or {}).get("per_iteration") or []
    for i, name in enumerate(advice.candidates):
        est = [r["estimates"][name] for r in advice.per_iteration]
        err = [SAFETY * r["next_order"][name] for r in advice.per_iteration]
        (line,) = ax.plot(ks, est, label=name, lw=1.2)
        ax.fill_between(
            ks,
            [e - d for e, d in zip(est, err)],
            [e + d for e, d in zip(est, err)],
            color=line.get_color(),
            alpha=0.2,
            lw=0,
        )
        if measured and name != advice.candidates[0]:
            ax.plot(
                [t["k"] for t in measured],
                [t["gaps"][name] for t in measured],
                ls="--",
                lw=1.0,
                color=line.get_color(),
                label=f"{name} measured",
            )
    ax.axhline(0.0, color="k", lw=0.5)
    ax.set_ylabel("L_S - L_JC")
    ax.legend(fontsize=7, ncol=2)
    title = f"crosscurv advise: JC-only prediction +- {SAFETY:g} x its first dropped order"
    ax.set_title(title + (" (dashed: measured)" if measured else ""), fontsize=9)
    idx = {n: i for i, n in enumerate(advice.candidates)}
    for certified, marker in ((True, "o"), (False, "x")):
        sel = [r for r in advice.per_iteration if bool(r["certified"]) == certified]
        bx.scatter(
            [r["k"] for r in sel],
            [idx[r["best"]] for r in sel],
            marker=marker,
            s=10,
            label="certified" if certified else "not certified",
        )
    wrong = [
        t for t in measured if t["certified"] and not t["right"] and t["regret"] == t["regret"]
    ]
    if wrong:
        bx.scatter(
            [t["k"] for t in wrong],
            [idx[t["advised"]] for t in wrong],
            marker="o",
            s=30,
            facecolors="none",
            edgecolors="red",
            label="certified, wrong",
        )
    bx.set_yticks(range(len(advice.candidates)))
    bx.set_yticklabels(advice.candidates, fontsize=7)
    bx.set_xlabel("K")
    bx.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
