"""Seeds added in stages where a verdict is undecided (`roarfast sweep --seeds auto`), with the stated error rates
kept: a group-sequential design. The verdicts are read at planned looks (`Design.looks`: seeds per arm), each at
a nominal level from a Lan-DeMets alpha-spending function of O'Brien-Fleming type, alpha(t) = 2 - 2 Phi(z(1 -
alpha/2) / sqrt(t)) at information fraction t = seeds / most seeds: almost nothing is spent at the first looks,
nearly alpha at the last. Testing after every seed at alpha instead raises the false-positive rate well above
alpha (tests/test_sequential.py shows both by simulation).

At look k the difference test (Welch, Holm over the estimators not yet found better or worse: one found no
different stays in the family) rejects at the look's two-sided nominal level; the equivalence test (TOST, Holm) at the nominal level of a one-sided design at alpha (the
two-sided design at 2 alpha, halved), which at a single look is alpha itself: a fixed design is the one-look case.
An estimator decided at a look keeps its verdict and gets no more seeds; random gets seeds while any estimator at
its place is undecided. `replay` is the one decision function: the sweep calls it to find what is still undecided,
the report to read the verdicts of the seeds run, and the simulation to measure its error rates.

The boundaries are computed by hand (recursive numerical integration of the Brownian motion the z statistics
follow under the null): neither scipy nor statsmodels has group-sequential designs.
"""

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from roarfast.stats.difference import BETTER_CODE, UNDECIDED_CODE, WORSE_CODE, classify, holm, tost_p, welch_p
from roarfast.stats.levels import ALPHA, MARGIN
from roarfast.stats.power import LEAST_SEEDS

SPENDING = ("Lan-DeMets alpha spending of O'Brien-Fleming type, alpha(t) = 2 - 2 Phi(z(1 - alpha/2) / sqrt(t)) at "
            "information fraction t = seeds / most seeds")
#: the seeds of the first look of `--seeds auto`, and the seeds each later look adds
FIRST_LOOK, LOOK_STEP = 3, 2
#: the grid the boundaries are integrated on: +-GRID_SPAN standard deviations in GRID_STEP steps
GRID_SPAN, GRID_STEP = 9.0, 0.002


def spent(t: float, alpha: float) -> float:
    """The share of alpha spent by information fraction t (SPENDING)."""
    # late: scipy.stats loads in a second or more, and a dry run imports this module without calling this
    from scipy import stats as sps

    return float(2 * sps.norm.sf(sps.norm.isf(alpha / 2) / math.sqrt(t)))


@lru_cache(maxsize=64)
def boundaries(fractions: tuple, alpha: float) -> tuple:
    """The two-sided z boundaries c_k of looks at information `fractions` (rising, the last 1) whose crossing
    probabilities under the null add up to the alpha spent at each (P(|Z_1| < c_1, ..., |Z_k| >= c_k) = alpha(t_k)
    - alpha(t_k-1)), Z_k = S(t_k) / sqrt(t_k) for the Brownian motion S: the density of S within the boundaries
    carried from look to look by convolution with the normal increment."""
    # late: scipy.stats loads in a second or more, and a dry run imports this module without calling this
    from scipy import signal
    from scipy import stats as sps

    x = np.arange(-GRID_SPAN, GRID_SPAN + GRID_STEP / 2, GRID_STEP)
    out, density, before, t_before = [], None, 0.0, 0.0
    for t in fractions:
        step = t - t_before
        kernel = sps.norm.pdf(x, scale=math.sqrt(step))
        density = kernel if density is None else signal.fftconvolve(density, kernel, mode="same") * GRID_STEP
        budget = spent(t, alpha) - before
        # the tail mass beyond |s| of the symmetric density, as a function of s >= 0
        right = x >= 0
        half = density[right]  # the trapezoid rule: each point's own cell counts half
        tail = 2 * (np.cumsum(half[::-1])[::-1] - half / 2) * GRID_STEP
        s = np.interp(budget, tail[::-1], x[right][::-1])  # tail falls with s: read it reversed
        out.append(float(s / math.sqrt(t)))
        density = np.where(np.abs(x) < s, density, 0.0)
        before, t_before = spent(t, alpha), t
    return tuple(out)


@dataclass(frozen=True)
class Design:
    """A group-sequential design: the seeds per arm at each look (rising; the last is the most seeds) and alpha."""

    looks: tuple
    alpha: float = ALPHA

    def __post_init__(self):
        looks = tuple(int(n) for n in self.looks)
        if not looks or looks[0] < LEAST_SEEDS or any(b <= a for a, b in zip(looks, looks[1:])):
            raise ValueError(f"a design's looks must rise from >= {LEAST_SEEDS} seeds, got {self.looks}")
        object.__setattr__(self, "looks", looks)

    @classmethod
    def auto(cls, most: int, alpha: float = ALPHA) -> "Design":
        """The looks of `--seeds auto --max-seeds most`: FIRST_LOOK seeds, then LOOK_STEP more each, the last at
        `most` (a single look where most <= FIRST_LOOK)."""
        looks = list(range(min(FIRST_LOOK, most), most, LOOK_STEP)) + [most]
        return cls(tuple(dict.fromkeys(looks)), alpha)

    @property
    def fractions(self) -> tuple:
        return tuple(n / self.looks[-1] for n in self.looks)

    @property
    def levels(self) -> tuple:
        """The two-sided nominal level of the difference test at each look."""
        # late: scipy.stats loads in a second or more, and a dry run imports this module without calling this
        from scipy import stats as sps

        return tuple(float(2 * sps.norm.sf(c)) for c in boundaries(self.fractions, self.alpha))

    @property
    def equivalence_levels(self) -> tuple:
        """The nominal level of each one-sided test of TOST at each look (a one-sided design at alpha)."""
        # late: scipy.stats loads in a second or more, and a dry run imports this module without calling this
        from scipy import stats as sps

        return tuple(float(sps.norm.sf(c)) for c in boundaries(self.fractions, 2 * self.alpha))

    def to_dict(self) -> dict:
        return {"looks": list(self.looks), "alpha": self.alpha, "spending": SPENDING}


def replay(estimators, random, looks, levels, equivalence_levels, lower_is_better: bool,
           margin: float = MARGIN) -> dict:
    """The verdicts of a sequential design, look by look, of many studies at once: `estimators` (S, m, N) and
    `random` (S, N) hold each study's accuracies in seed order (NaN: not run). At look k (n = looks[k] seeds),
    each estimator still undecided that has n seeds, with random's n, is tested on its first n seeds against
    random's first n (Holm over those tested there) at levels[k] and equivalence_levels[k]; a verdict reached
    stays. Returns arrays (S, m): "code" (roarfast.stats.difference's codes), "look" (1-based, of the last
    analysis that read it; 0: none, fewer seeds than the first look), and the p-values read there ("p", "p_holm",
    "p_equivalence", "p_equivalence_holm", NaN where none)."""
    estimators = np.asarray(estimators, dtype=np.float64)
    random = np.asarray(random, dtype=np.float64)
    shape = estimators.shape[:2]
    out = {"code": np.full(shape, UNDECIDED_CODE), "look": np.zeros(shape, dtype=int)}
    out.update({k: np.full(shape, np.nan) for k in ("p", "p_holm", "p_equivalence", "p_equivalence_holm")})
    for k, n in enumerate(looks):
        if n > estimators.shape[-1] or n > random.shape[-1]:
            break
        e, r = estimators[..., :n], random[:, None, :n]
        active = ((out["code"] == UNDECIDED_CODE) & np.isfinite(e).all(-1) & np.isfinite(r).all(-1))
        if not active.any():
            break
        # a hypothesis stays in its Holm family until rejected: an estimator found no different still counts in the
        # difference tests' (p 1), one found better or worse in the equivalence tests' (p 1)
        decided = out["code"] != UNDECIDED_CODE
        different = (out["code"] == BETTER_CODE) | (out["code"] == WORSE_CODE)
        p = np.where(active, welch_p(r, e), np.where(decided & ~different, 1.0, np.nan))
        pe = np.where(active, tost_p(r, e, margin), np.where(different, 1.0, np.nan))
        p_holm, pe_holm = holm(p), holm(pe)
        with np.errstate(invalid="ignore"):
            diff = e.mean(-1) - r.mean(-1)
        code = classify(diff, p_holm, pe_holm, levels[k], equivalence_levels[k],
                        lower_is_better)
        for key, value in (("code", code), ("look", k + 1), ("p", p), ("p_holm", p_holm), ("p_equivalence", pe),
                           ("p_equivalence_holm", pe_holm)):
            out[key] = np.where(active, value, out[key])
    return out


def decide(estimators, random, design: "Design", lower_is_better: bool, margin: float = MARGIN) -> dict:
    """replay of one study under `design`: `estimators` (m, N) and `random` (N,), NaN where not run."""
    result = replay(np.asarray(estimators, dtype=np.float64)[None], np.asarray(random, dtype=np.float64)[None],
                    design.looks, design.levels, design.equivalence_levels, lower_is_better, margin)
    return {k: v[0] for k, v in result.items()}


def undecided(result: dict, design: Design) -> np.ndarray:
    """Which estimators of a replay (one study's: decide) need more seeds: undecided at a look before the last."""
    return (result["code"] == UNDECIDED_CODE) & (result["look"] < len(design.looks))
