"""The exact (``mpmath``) studies of quartic polynomials, far below the float64 floor.

:func:`one_step_study_mp` is the one-step study in ``mpmath`` at ``dps``
digits (exact steps of :meth:`crosscurv.experiments.problems.QuarticPolynomial.scheme_step_mp`);
:func:`protocol_mp` is the whole controlled protocol in ``mpmath`` (paper,
Section 4.2; docs/design.md), an independent reference for
:mod:`crosscurv.numeric.protocol`.
"""

from __future__ import annotations


from crosscurv.theory.patterns import DelayPattern, jacobi

from ..problems import Problem

from .study import N_POINTS, Study, eta_grid, make_study


def one_step_study_mp(problem: Problem, pattern: DelayPattern, *, eta0: float, n: int = N_POINTS,
                      dps: int = 50, label: str | None = None) -> Study:
    """:func:`one_step_study` for a quartic polynomial, in ``mpmath`` at ``dps`` digits.

    Steps, losses, ``C_S`` and ``c3`` are computed at ``dps`` digits from the polynomial's float64
    coefficients, so ``eta0`` can lie far below the float64 floor; floor ``2^(8 - prec) (|L_S| +
    |L_JC|)``. Exact values: ``info["errors_mp"]``, ``info["C_S_mp"]``, ``info["c3_mp"]`` (strings).
    """
    import mpmath

    from crosscurv.theory.one_step import gap_coefficients

    poly = problem.poly
    if poly is None:
        raise ValueError(f"{problem.family} has no exact mpmath path (quartic polynomials only)")
    with mpmath.workdps(dps):
        g, H, T = poly.derivatives_mp()
        coef = gap_coefficients(pattern, poly.block_dims, g, H, T, mode="mpmath")
        jc = jacobi(poly.n_blocks)
        etas = eta_grid(eta0, n)
        errors, floors, exact = [], [], []
        for eta in etas:
            e = mpmath.mpf(eta)
            ls = poly.loss_mp(poly.scheme_step_mp(pattern, e))
            lj = poly.loss_mp(poly.scheme_step_mp(jc, e))
            r = (ls - lj) - e * e * coef[2]
            exact.append(r)
            errors.append(float(r))
            floors.append(float(mpmath.ldexp(abs(ls) + abs(lj), 8 - mpmath.mp.prec)))
        info = {
            "pattern": pattern.describe(),
            "dps": dps,
            "eta0": eta0,
            "errors_mp": [mpmath.nstr(r, dps) for r in exact],
            "C_S_mp": mpmath.nstr(coef[2], dps),
            "c3_mp": mpmath.nstr(coef[3], dps),
            "remainder_after_c3": [float(r - mpmath.mpf(x) ** 3 * coef[3]) for r, x in zip(exact,
                                                                                           etas)],
        }
        c3 = float(coef[3])
    return make_study(label or f"{problem.task.name} (mpmath {dps} digits)", "one_step", etas,
                      errors, floors, predicted=c3, info=info)


def protocol_mp(problem: Problem, pattern: DelayPattern, eta: float, iters: int, *,
                dps: int = 40) -> list:
    """The controlled protocol for a quartic polynomial, exactly, in ``mpmath`` (a reference).

    An independent implementation of the records of :func:`crosscurv.numeric.protocol.run_protocol`
    (paper, Section 4.2; docs/design.md) with dense ``mpmath`` Hessians: for ``k = 1..iters``, ``gap
    = L(theta_S^k) - L(theta_JC^k)``,

    * ``recursive^k = g_JC^k . [(I - eta H_JC^{k-1}) Delta^{k-1} + eta^2 M_S^{k-1} g_S^{k-1}]
      + 1/2 Delta^{k-1} . H_JC^{k-1} Delta^{k-1}`` (Theorem 2, measured ``Delta``);
    * ``cumulative^k = g_JC^k . z_k + 1/2 z_k . H_JC^k z_k`` with
      ``z_{j+1} = (I - eta H_JC^j) z_j + eta^2 M_S(theta_S^j) g_S^j``, ``z_0 = 0`` (Theorem 3);
    * ``jc_only^k``: the same with ``y`` forced by ``M_S(theta_JC^j) g_JC^j``.

    Returns:
        ``[{"k", "loss_jc", "loss_s", "gap", "recursive", "cumulative", "jc_only"}, ...]``
        with ``mpmath.mpf`` values (exact to about ``dps`` digits).
    """
    import mpmath

    poly = problem.poly
    if poly is None:
        raise ValueError(f"{problem.family} has no exact mpmath path (quartic polynomials only)")
    out = []
    with mpmath.workdps(dps):
        d = poly.d
        sl = poly.slices()
        owner = [0] * d
        for b, s_ in enumerate(sl):
            for a in range(s_.start, s_.stop):
                owner[a] = b
        mask = [[(owner[a], owner[c]) in pattern.pairs for c in range(d)] for a in range(d)]
        e = mpmath.mpf(eta)

        def matvec(H, v, masked=False):
            if masked:
                return [mpmath.fsum(H[a][c] * v[c] for c in range(d) if mask[a][c]) for a in range(
                    d)]
            return [mpmath.fsum(H[a][c] * v[c] for c in range(d)) for a in range(d)]

        def dot(u, v):
            return mpmath.fsum(x * y for x, y in zip(u, v))

        xj = poly.x0_mp()
        xs = list(xj)
        z = [mpmath.mpf(0)] * d
        y = [mpmath.mpf(0)] * d
        pending = None  # (w, q): recursive^{k} = g_JC^k . w + q
        jc = jacobi(poly.n_blocks)
        for k in range(iters + 1):
            gj = poly.grad_mp(xj)
            Hj = poly.hessian_mp(xj)
            delta = [a - b for a, b in zip(xs, xj)]
            Hd, Hz, Hy = matvec(Hj, delta), matvec(Hj, z), matvec(Hj, y)
            if k >= 1:
                lj, ls = poly.loss_mp(xj), poly.loss_mp(xs)
                out.append({
                    "k": k,
                    "loss_jc": lj,
                    "loss_s": ls,
                    "gap": ls - lj,
                    "recursive": dot(gj, pending[0]) + pending[1],
                    "cumulative": dot(gj, z) + dot(z, Hz) / 2,
                    "jc_only": dot(gj, y) + dot(y, Hy) / 2,
                })
            if k == iters:
                break
            gs = poly.grad_mp(xs)
            u = matvec(poly.hessian_mp(xs), gs, masked=True)
            mj = matvec(Hj, gj, masked=True)
            pending = ([a - e * b + e * e * c for a, b, c in zip(delta, Hd, u)], dot(delta, Hd) / 2)
            z = [a - e * b + e * e * c for a, b, c in zip(z, Hz, u)]
            y = [a - e * b + e * e * c for a, b, c in zip(y, Hy, mj)]
            xs = poly.scheme_step_mp(pattern, e, xs)
            xj = poly.scheme_step_mp(jc, e, xj)
    return out
