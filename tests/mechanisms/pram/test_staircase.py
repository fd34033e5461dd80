"""The globally MI-optimal ε-DP PRAM channel (dpframe.mechanisms.pram.staircase).

Independent checks, sharing no code with the module:

* S <= 5: every vertex of the ε-DP polytope of S x K row-stochastic matrices is found by
  enumerating the *faces* of each column's DP cone (zero; interior; or "H at a m, L at m,
  the rest free in [m, a m]") with total dimension <= S, solving the row sums on each
  combination, and keeping the feasible unique solutions (``_polytope_vertices``). MI is
  convex in the channel, so its maximum over the polytope is the maximum over these
  vertices. The LP must equal it to a relative 1e-9 (both are exact to ~1e-14).
* S = 6 and 10: random restarts of SLSQP over full S x S matrices (DP as linear
  constraints) never beat the LP value by more than a relative 1e-9. A heuristic oracle at
  two sizes is enough: at every S the LP's optimality is proven by its certificate (column
  generation's dual bound, checked below against the enumeration at S = 3..12 and against
  random DP channels), so larger S would only test SLSQP.
* Column generation equals the enumeration and certifies its gap; the channel is ε-DP on
  its floats; the global MI is never below the paper family's optimum.

Why the tolerances: the LP value and the vertex MI are computed in double precision from
O(S^2) terms of size <= MI, so both are exact to a few 1e-15 relative; 1e-9 relative leaves
six orders of magnitude for rounding while any suboptimal vertex (the next-best vertex
differs by far more than 1e-9 in these cases) fails.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import minimize

from dpframe.errors import InvalidParameterError
from dpframe.mechanisms.pram import optimum
from dpframe.mechanisms.pram import staircase as st

RTOL = 1e-9
SLOW = pytest.mark.slow  # a few cases over 10 s each (still run by make test)


def _priors(s: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(1000 + s)
    zipf = np.arange(1, s + 1, dtype=float) ** -1.5
    return [
        ("uniform", np.full(s, 1.0 / s)),
        ("dirichlet1", rng.dirichlet(np.ones(s))),
        ("dirichlet0.2", rng.dirichlet(np.full(s, 0.2))),
        ("zipf", zipf / zipf.sum()),
    ]


# ---------------------------------------------------------------------------
# The independent vertex enumeration
# ---------------------------------------------------------------------------


def _face_types(
    s: int,
) -> dict[int, list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]]:
    """Faces of the cone {c >= 0: max c <= a min c} with a non-zero point, by dimension.

    A non-zero c with max c < a min c is interior (dimension S). Otherwise the tight
    constraints are c_i = a c_j for i in H = argmax, j in L = argmin, and the face is
    {c_H = a m, c_L = m, c_M free}: dimension 1 + |M|.
    """
    out: dict[int, list] = {s: [((), (), tuple(range(s)))]}  # interior: all free, no m
    for labels in itertools.product((0, 1, 2), repeat=s):  # 0 = H, 1 = L, 2 = M
        h = tuple(i for i in range(s) if labels[i] == 0)
        low = tuple(i for i in range(s) if labels[i] == 1)
        mid = tuple(i for i in range(s) if labels[i] == 2)
        if h and low:
            out.setdefault(1 + len(mid), []).append((h, low, mid))
    return out


def _type_vectors(types, s: int, a: float) -> np.ndarray:
    """(n, S, d): each type's variable vectors (m's vector first, then one e_i per free i)."""
    vecs = []
    for h, low, mid in types:
        cols = []
        if h:
            v = np.zeros(s)
            v[list(h)] = a
            v[list(low)] = 1.0
            cols.append(v)
        for i in mid:
            e = np.zeros(s)
            e[i] = 1.0
            cols.append(e)
        vecs.append(np.array(cols).T)
    return np.array(vecs)


def _partitions(n: int, largest: int | None = None):
    largest = n if largest is None else largest
    if n == 0:
        yield ()
        return
    for k in range(min(n, largest), 0, -1):
        for rest in _partitions(n - k, k):
            yield (k, *rest)


def _polytope_vertices(s: int, epsilon: float) -> list[np.ndarray]:
    """Every vertex of {Q in R^{S x K}: rows sum to 1, columns eps-DP} (K = number of
    non-zero columns, at most S), as arrays of shape (N, S, K), one array per K.

    A point is a vertex iff the directions allowed by its tight constraints, restricted
    by the row sums, are {0}: with each column's minimal face spanned by its variable
    vectors, the S x D system "row sums = 1" must have full column rank D (so D <= S).
    Enumerating every multiset of faces with D <= S, solving, and keeping the solutions
    that lie in their (closed) faces gives every vertex (each from its minimal faces)
    and only vertices. Columns are unordered: MI does not depend on their order.
    """
    a = math.exp(epsilon)
    types = _face_types(s)
    vec = {d: _type_vectors(t, s, a) for d, t in types.items()}
    has_m = {d: np.array([bool(t[0]) for t in ts]) for d, ts in types.items()}
    out = []
    for total in range(1, s + 1):
        for dims in _partitions(total):
            # a multiset of types: combinations with replacement within each dimension
            per_dim = {d: dims.count(d) for d in set(dims)}
            blocks = [
                np.array(list(itertools.combinations_with_replacement(range(len(types[d])), c)))
                for d, c in sorted(per_dim.items())
            ]
            grids = np.meshgrid(*[np.arange(len(b)) for b in blocks], indexing="ij")
            combo = [b[g.ravel()] for b, g in zip(blocks, grids, strict=True)]
            dlist = [d for d, c in sorted(per_dim.items()) for _ in range(c)]
            idx = np.concatenate(combo, axis=1)  # (N, K) type index per column
            for chunk in range(0, idx.shape[0], 50_000):
                ix = idx[chunk : chunk + 50_000]
                mats = np.concatenate(
                    [vec[d][ix[:, j]] for j, d in enumerate(dlist)], axis=2
                )  # (N, S, D)
                ata = np.einsum("nsd,nse->nde", mats, mats)
                sv = np.linalg.svd(mats, compute_uv=False)
                full = sv[:, -1] > 1e-9 * sv[:, 0]
                rhs = mats.sum(axis=1)  # A^T 1
                z = np.zeros((ix.shape[0], total))
                z[full] = np.linalg.solve(ata[full], rhs[full][..., None])[..., 0]
                resid = np.abs(np.einsum("nsd,nd->ns", mats, z) - 1.0).max(axis=1)
                ok = full & (resid < 1e-9)
                # each column's values inside its face: m >= 0 and m <= free <= a m
                cols = []
                pos = 0
                for j, d in enumerate(dlist):
                    zj = z[:, pos : pos + d]
                    col = np.einsum("nsd,nd->ns", vec[d][ix[:, j]], zj)
                    if d == s and not has_m[d][0]:  # interior: any positive ratio <= a
                        ok &= col.min(axis=1) > 0
                        ok &= col.max(axis=1) <= a * col.min(axis=1) * (1 + 1e-12)
                    else:
                        m = zj[:, 0]
                        # m = 0 is a zero column: that vertex is found without it
                        ok &= m > 1e-13
                        if d > 1:
                            u = zj[:, 1:]
                            ok &= (u >= m[:, None] * (1 - 1e-12) - 1e-15).all(axis=1)
                            ok &= (u <= a * m[:, None] * (1 + 1e-12) + 1e-15).all(axis=1)
                    cols.append(col)
                    pos += d
                if ok.any():
                    out.append(np.stack(cols, axis=2)[ok])
    return out


def _mi_batch(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """sum_x sum_y p_x Q[x, y] log(Q[x, y] / m_y) for Q of shape (N, S, K): the definition."""
    q = np.clip(q, 0.0, None)
    m = np.einsum("s,nsk->nk", p, q)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = p[None, :, None] * q * np.log(q / m[:, None, :])
    return np.where(q > 0, t, 0.0).sum(axis=(1, 2))


_VERTEX_CACHE: dict[tuple[int, float], list[np.ndarray]] = {}


def _vertices(s: int, eps: float) -> list[np.ndarray]:
    if (s, eps) not in _VERTEX_CACHE:
        _VERTEX_CACHE[(s, eps)] = _polytope_vertices(s, eps)
    return _VERTEX_CACHE[(s, eps)]


def test_vertex_enumeration_finds_known_vertices():
    """The enumeration itself: it holds k-RR and the identity-like binary vertices, every
    vertex is row-stochastic and eps-DP, and S = 2 gives exactly the known vertex set
    (k-RR, its mirror, and the one-output matrix)."""
    eps = 0.5
    a = math.exp(eps)
    for s in (2, 3, 4):
        vs = np.concatenate(
            [v.reshape(v.shape[0], -1) for v in _vertices(s, eps) if v.shape[2] == s]
        )
        krr = np.full((s, s), 1.0 / (a + s - 1))
        np.fill_diagonal(krr, a / (a + s - 1))
        # some vertex equals k-RR up to a column permutation
        found = False
        for v in _vertices(s, eps):
            if v.shape[2] != s:
                continue
            for perm in itertools.permutations(range(s)):
                if np.abs(v[:, :, perm] - krr).max(axis=(1, 2)).min() < 1e-12:
                    found = True
                    break
            if found:
                break
        assert found and vs.size
        for v in _vertices(s, eps):
            assert np.allclose(v.sum(axis=2), 1.0, atol=1e-12)
            ratio = v.max(axis=1) / v.min(axis=1)
            assert (ratio <= a * (1 + 1e-12)).all()
    # S = 2: vertices are k-RR [[a, 1], [1, a]]/(1+a), its mirror (same up to column
    # order) and the single column [1, 1]; as multisets of columns, exactly two
    kinds = {tuple(np.round(np.sort(v.reshape(-1)), 12)) for arr in _vertices(2, eps) for v in arr}
    assert kinds == {
        (1.0, 1.0),
        tuple(np.round(np.sort([1 / (1 + a), 1 / (1 + a), a / (1 + a), a / (1 + a)]), 12)),
    }


CASES_SMALL = [
    pytest.param(s, eps, marks=[SLOW] if s == 5 else [])  # S = 5: seconds of vertices
    for s in (2, 3, 4, 5)
    for eps in (0.1, 0.5, 1.0, 2.0)
]


def _check_against_vertices(s: int, eps: float) -> None:
    verts = _vertices(s, eps)
    for name, p in _priors(s):
        best = max(float(_mi_batch(p, v).max()) for v in verts)
        d = st.global_design(p, eps, method="enumerate")
        assert d.mutual_information == pytest.approx(best, rel=RTOL, abs=1e-300), (s, eps, name)
        # the definition's sum cancels: its absolute error is below S^2 u (terms <= 1)
        assert d.upper_bound >= best - 4 * s * s * np.finfo(float).eps, (s, eps, name)
        assert d.gap <= RTOL * best + 1e-15, (s, eps, name)


@pytest.mark.parametrize(("s", "eps"), CASES_SMALL)
def test_lp_equals_max_over_every_vertex(s, eps):
    _check_against_vertices(s, eps)


# ---------------------------------------------------------------------------
# S = 6..12: a local optimizer over full matrices never beats the LP
# ---------------------------------------------------------------------------


def _local_optimum(p: np.ndarray, eps: float, rng: np.random.Generator) -> float:
    """SLSQP from a random feasible S x S matrix; DP as linear constraints."""
    s = p.size
    a = math.exp(eps)
    raw = rng.dirichlet(np.full(s, 0.5), size=s)
    lo, hi = 0.0, 1.0  # mix with uniform until eps-DP
    for _ in range(60):
        t = (lo + hi) / 2
        q = t * raw + (1 - t) / s
        if (q.max(axis=0) <= a * q.min(axis=0)).all():
            lo = t
        else:
            hi = t
    x0 = (lo * raw + (1 - lo) / s).ravel()
    rows = []
    for y in range(s):
        for i, j in itertools.permutations(range(s), 2):
            r = np.zeros((s, s))
            r[j, y] = a
            r[i, y] = -1.0
            rows.append(r.ravel())
    g_ineq = np.array(rows)  # a Q[j, y] - Q[i, y] >= 0
    g_eq = np.kron(np.eye(s), np.ones(s))

    def neg_mi(x):
        q = np.clip(x.reshape(s, s), 1e-300, None)
        m = p @ q
        val = float((p[:, None] * q * np.log(q / m)).sum())
        grad = p[:, None] * np.log(q / m)
        return -val, -grad.ravel()

    res = minimize(
        neg_mi,
        x0,
        jac=True,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * (s * s),
        constraints=[
            {"type": "ineq", "fun": lambda x: g_ineq @ x, "jac": lambda x: g_ineq},
            {"type": "eq", "fun": lambda x: g_eq @ x - 1.0, "jac": lambda x: g_eq},
        ],
        options={"maxiter": 300, "ftol": 1e-14},
    )
    q = np.clip(res.x.reshape(s, s), 0.0, None)
    # count only what is feasible: renormalise rows, then shrink towards uniform into DP
    q /= q.sum(axis=1, keepdims=True)
    t = 1.0
    while not (q.max(axis=0) <= a * q.min(axis=0)).all():
        t *= 0.999
        q = t * q + (1 - t) / s
    m = p @ q
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(q > 0, p[:, None] * q * np.log(q / m), 0.0)
    return float(terms.sum())


@pytest.mark.parametrize("s", [6, 10])
def test_local_optimizer_never_beats_the_lp(s):
    """Two sizes (S = 7, 8, 9, 11, 12 took 5-20 s each and tested SLSQP more than the LP,
    whose optimality the certificate tests prove at every S)."""
    rng = np.random.default_rng(s)
    restarts = 2 if s <= 8 else 1
    for eps in (0.1, 1.0):
        for name, p in _priors(s)[: 3 if s <= 8 else 2]:
            d = st.global_design(p, eps)
            for _ in range(restarts):
                local = _local_optimum(p, eps, rng)
                assert local <= d.mutual_information * (1 + RTOL), (s, eps, name, local)


@pytest.mark.parametrize("s", range(6, 13))
def test_global_strictly_beats_the_paper_family_somewhere(s):
    """At every S = 6..12 the global design is strictly better than the paper's family
    for some prior and epsilon (the priors and epsilons the local-optimizer check used)."""
    beaten_paper = 0
    for eps in (0.1, 1.0):
        for _, p in _priors(s)[: 3 if s <= 8 else 2]:
            beaten_paper += st.global_design(p, eps).mutual_information > optimum.design(
                p, eps, estimable=False
            ).mutual_information * (1 + 1e-9)
    assert beaten_paper


# ---------------------------------------------------------------------------
# Column generation, the certificate, privacy, the paper's family
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("s", [3, 6, 10, 12])
def test_column_generation_matches_enumeration_and_certifies(s):
    for eps in (0.1, 0.5, 1.0, 2.0):
        for name, p in _priors(s):
            e = st.global_design(p, eps, method="enumerate")
            c = st.global_design(p, eps, method="column-generation")
            assert c.method == "column-generation" and e.method == "enumerate"
            assert c.mutual_information == pytest.approx(e.mutual_information, rel=RTOL)
            assert c.gap <= 1e-9, (s, eps, name, c.gap)
            assert e.gap <= 1e-9, (s, eps, name, e.gap)
            assert c.upper_bound >= e.mutual_information


@pytest.mark.parametrize(
    ("s", "eps", "prior"),
    [(30, 1.0, 0), pytest.param(20, 2.0, 1, marks=SLOW)],
)
def test_column_generation_certificate_at_larger_s(s, eps, prior):
    """The bound holds (upper bound >= achieved MI) and is small: relative gap < 1e-6.
    A uniform prior at S = 30 (fast: symmetric categories are grouped in the pricing; S =
    100 took 14 s and tested nothing S = 30 does not); a Dirichlet(1) prior only at S =
    20: at S = 30 it takes minutes (see docs/pram-design.md, 11)."""
    for name, p in [_priors(s)[prior]]:
        d = st.global_design(p, eps)
        assert d.method == "column-generation"
        assert d.upper_bound >= d.mutual_information
        assert d.gap <= 1e-6 * d.mutual_information, (s, eps, name, d.gap)
        assert d.mutual_information >= optimum.design(p, eps, estimable=False).mutual_information


def test_certificate_bounds_any_dp_channel_and_is_not_vacuous():
    """The dual bound is a bound: random eps-DP channels (any K) stay below it; and it is
    tight: the optimum reaches it to 1e-12."""
    rng = np.random.default_rng(5)
    for s, eps in ((4, 0.3), (7, 1.0), (9, 2.0)):
        p = rng.dirichlet(np.ones(s))
        d = st.global_design(p, eps)
        a = math.exp(eps)
        for _ in range(200):
            k = int(rng.integers(1, 2 * s))
            cols = rng.uniform(1.0, a, size=(s, k)) * rng.uniform(0.1, 1.0, size=k)
            # make rows sum to 1 while keeping every column's ratio <= a: add a column
            # proportional to (max row sum - row sum) + small, which may break the ratio;
            # instead scale: the channel c / max_row_sum plus a slack column
            c = cols / cols.sum(axis=1).max()
            slack = 1.0 - c.sum(axis=1)
            if slack.max() > a * slack.min() or slack.min() <= 0:
                continue
            q = np.hstack([c, slack[:, None]])
            assert _mi_batch(p, q[None])[0] <= d.upper_bound * (1 + 1e-12)
        assert d.upper_bound - d.mutual_information <= 1e-12 * max(d.mutual_information, 1)


@pytest.mark.parametrize("s", [2, 4, 8, 14])
def test_channel_is_exactly_dp_on_its_floats_and_stochastic(s):
    """Each column is weight * {1, e^eps}: its float ratio is e^eps within two ulps, so
    log(max / min) <= eps + 4 u (1 + eps). A sampler must go further and draw from
    integers (see docs/pram-design.md, 11.7). (S = 20 took 15 s for the same rule.)"""
    u = np.finfo(float).eps
    for eps in (0.1, 1.0, 2.0):
        for _, p in _priors(s)[:2]:
            d = st.global_design(p, eps)
            c = d.channel
            assert (c > 0).all()
            assert np.abs(c.sum(axis=1) - 1.0).max() <= 64 * s * u
            assert d.float_epsilon <= eps + 4 * u * (1 + eps)
            assert c.shape == (s, d.n_outputs) and d.n_outputs <= s
            m = d.matrix
            assert m.shape == (s, s) and np.allclose(m.sum(axis=1), 1.0, atol=64 * s * u)
            # the MI of the labelled S x S matrix by the definition
            assert _mi_batch(p, m[None])[0] == pytest.approx(d.mutual_information, rel=1e-12)


@pytest.mark.parametrize("s", [2, 3, 4, 5, 6, 8, 10, 12])  # S = 16: 8 s, the same rule
def test_global_is_never_below_the_paper_family(s):
    for eps in (0.1, 0.5, 1.0, 2.0):
        for name, p in _priors(s):
            g = st.global_design(p, eps).mutual_information
            paper = optimum.design(p, eps, estimable=False).mutual_information
            # the paper's design is rounded onto a grid (sampled matrix), so it is a
            # feasible channel: the global optimum is at least its MI, up to rounding
            assert g >= paper * (1 - 1e-12), (s, eps, name, g, paper)


def test_issue_example_uniform_s4_small_eps():
    """Issue 19: S = 4, eps = 0.1, uniform: MI 0.0012484 against the family's 0.00096842."""
    d = st.global_design(np.full(4, 0.25), 0.1)
    assert round(d.mutual_information, 7) == 0.0012484
    assert round(optimum.design(np.full(4, 0.25), 0.1).mutual_information, 8) == 0.00096842
    assert d.n_outputs == 2


# ---------------------------------------------------------------------------
# pattern values
# ---------------------------------------------------------------------------


def test_pattern_mi_matches_the_definition_and_tiny_epsilon():
    rng = np.random.default_rng(2)
    for s in (2, 5, 9):
        p = rng.dirichlet(np.ones(s))
        for eps in (1e-6, 0.1, 1.0, 5.0):
            masks = rng.random((20, s)) < 0.5
            a = math.exp(eps)
            sv = np.where(masks, a, 1.0)
            ps = sv @ p
            direct = (p * sv * np.log(sv / ps[:, None])).sum(axis=1)
            got = st.pattern_mi(p, eps, masks)
            # the direct form cancels: its error is ~ u * a log a, absolute
            assert np.allclose(
                got, direct, rtol=1e-9, atol=16 * np.finfo(float).eps * a * max(eps, 1)
            )
    # at tiny epsilon mu ~ b^2 t (1 - t) / 2: the accurate form keeps full precision
    eps = 1e-8
    t = 0.3
    b = math.expm1(eps)
    assert st.pattern_mi([0.3, 0.7], eps, [True, False]) == pytest.approx(
        b * b * t * (1 - t) / 2 * (1 - b / 3 * (1 + t)), rel=1e-7
    )


# ---------------------------------------------------------------------------
# Labels and invertibility
# ---------------------------------------------------------------------------


def _all_assignments_best(p, q):
    """Brute force: every injective labelling, the best total, and the lexicographically
    smallest label vector among those within 1e-12 of it."""
    s, k = q.shape
    w = (p[:, None] * q).T
    scored = [
        (float(sum(w[j, lab[j]] for j in range(k))), lab)
        for lab in itertools.permutations(range(s), k)
    ]
    best = max(v for v, _ in scored)
    return min(lab for v, lab in scored if v >= best - 1e-12 * best)


def test_output_labels_against_brute_force_with_ties():
    rng = np.random.default_rng(3)
    ties = 0
    for s in (2, 3, 4, 5):
        for eps in (0.1, 0.5, 1.0, 2.0):
            for _, p in _priors(s):
                d = st.global_design(p, eps)
                want = _all_assignments_best(p, d.channel)
                assert tuple(d.labels.tolist()) == want
                assert set(d.unused) == set(range(s)) - set(want)
                w = (p[:, None] * d.channel).T
                vals = sorted(
                    float(sum(w[j, lab[j]] for j in range(d.n_outputs)))
                    for lab in itertools.permutations(range(s), d.n_outputs)
                )
                ties += len(vals) > 1 and vals[-1] - vals[-2] <= 1e-12 * vals[-1]
    assert ties  # the uniform priors give tied optima: the tie-break is exercised
    # an explicit tie: categories 1 and 2 are identical rows with equal p
    q = np.array([[0.7, 0.3], [0.3, 0.7], [0.3, 0.7]])
    labels, unused = st.output_labels([0.5, 0.25, 0.25], q)
    assert labels.tolist() == [0, 1] and unused == (2,)
    # the same matrix with the first output preferring category 2: no tie, 2 wins
    labels, unused = st.output_labels([0.2, 0.2, 0.6], q[:, ::-1])
    assert labels.tolist() == [2, 0] and unused == (1,)
    _ = rng


def test_output_labels_rejects_bad_shapes():
    with pytest.raises(InvalidParameterError, match="channel must be S x K"):
        st.output_labels([0.5, 0.5], np.ones((2, 3)) / 3)
    with pytest.raises(InvalidParameterError, match="channel must be S x K"):
        st.output_labels([0.5, 0.5], np.ones((3, 2)) / 2)


def test_binary_optimum_cannot_be_inverted():
    d = st.global_design(np.full(4, 0.25), 0.1)
    assert d.n_outputs == 2
    with pytest.raises(InvalidParameterError, match="uses only 2 of S = 4 outputs"):
        st.check_estimable(d.matrix)
    with pytest.raises(InvalidParameterError, match="uses only 2 of S = 4 outputs"):
        st.check_estimable(d.channel)


def test_check_estimable_rank_condition_and_ok():
    a = math.exp(1.0)
    krr = np.full((4, 4), 1 / (a + 3))
    np.fill_diagonal(krr, a / (a + 3))
    cond = st.check_estimable(krr)
    assert cond == pytest.approx(np.linalg.cond(krr), rel=1e-12)
    # the paper family's "dominant" design with two q_k = 1/S: two equal rows, rank 3
    q = np.array([0.7, 0.5, 0.25, 0.25])
    m = np.repeat(((1 - q) / 3)[:, None], 4, axis=1)
    np.fill_diagonal(m, q)
    with pytest.raises(InvalidParameterError, match="rank is 3 < S = 4"):
        st.check_estimable(m)
    near = krr.copy()
    near[1] = near[0] + 1e-12 * (krr[1] - krr[0])
    with pytest.raises(InvalidParameterError, match="condition number"):
        st.check_estimable(near, max_condition=1e6)


def test_bad_arguments_name_the_fix():
    with pytest.raises(InvalidParameterError, match="method must be one of"):
        st.global_design([0.5, 0.5], 1.0, method="simplex")
    with pytest.raises(InvalidParameterError, match="column-generation"):
        st.global_design(np.full(19, 1 / 19), 1.0, method="enumerate")
    with pytest.raises(InvalidParameterError, match="p must sum to 1"):
        st.global_design([0.5, 0.6], 1.0)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        st.global_design([0.5, 0.5], 20.0)


def test_enumeration_survives_an_unknown_interior_point_status():
    """S = 14, Dirichlet(1) seed 2024: HiGHS's interior point stopped with model status
    "Unknown" (the benchmark's case); the simplex retry gives the certified optimum, equal
    to column generation's."""
    p = np.random.default_rng(2024).dirichlet(np.ones(14))
    for eps in (0.1, 0.5, 1.0, 2.0):
        e = st.global_design(p, eps, method="enumerate")
        c = st.global_design(p, eps, method="column-generation")
        assert e.gap <= 1e-9 and c.gap <= 1e-9
        assert e.mutual_information == pytest.approx(c.mutual_information, rel=RTOL)
