"""Sequential paired comparisons: a test valid at every look, so a comparison stops once its answer is known (#43).

Two evals on the same rows send them in one deterministic order (`subset.run_order`), so
what both have stored is a prefix of that order, and the test runs on the prefix's pairs.
It may look after every row (the engine looks at every flush, about once a second, a
schedule that depends on the deployment's speed): every figure here is valid at any
look and at any stopping time, which is why it is an always-valid test and not alpha
spending (O'Brien-Fleming bounds need the number of looks fixed in advance).

- Right/wrong rows: only the discordant pairs carry information, and under "no
  difference" each is B-better with probability 1/2 exactly, whatever the rows'
  difficulty (McNemar's argument). The test is a mixture SPRT on them: the likelihood
  ratio of Binomial(θ) against Binomial(1/2), θ averaged over a Beta(PRIOR, PRIOR)
  prior, is a nonnegative martingale under the null, so by Ville's inequality
  P(sup_k LR_k ≥ 1/α) ≤ α and p_n = min(1, 1 / max_{k≤n} LR_k) is a p-value at every
  n at once (Robbins 1970; Johari et al. 2017's mSPRT). The prior is symmetric, so the
  test is two-sided. PRIOR is measured in bench/sequential.py.
- Graded rows (pass rates over epochs, judges' grades) and the interval of every
  comparison: the predictable plug-in empirical-Bernstein confidence sequence of
  Waudby-Smith & Ramdas (2023, JRSS-B, Theorem 2) for the mean of the differences,
  each mapped from [-1, 1] to [0, 1]. Closed form, linear time, valid at every n, and as
  narrow as the rows' spread allows (its two one-sided processes at "no difference"
  give the graded rows' p-value the same way, so p ≤ α exactly when the interval
  leaves 0 out). A normal-mixture sequence would assume the worst spread of [-1, 1].
- Futility: the comparison also stops when the interval shows any difference left is
  smaller than `min_difference` (2 points of the scale unless told), or when even every
  remaining row going one way could not bring p to α by the last row.
- It never claims more than a fixed-n test would: a decision also needs the fixed-n test
  of the same prefix (McNemar exact, or the paired t for graded rows) at α, and a stop
  reports both p-values as they are. A fixed-n p of a prefix chosen by looking is not a
  valid p-value; the always-valid one is, and it is the one a gate may use.

Pure functions over plain numbers, like statistics.py (no ORM here): evals/early_stop.py
reads the prefix and records a stop; tests/test_sequential.py checks the error rates.
"""

import math
from dataclasses import dataclass

from . import statistics

# Beta(PRIOR, PRIOR) over the chance a discordant pair is B-better (its spread, ±0.17 around 1/2, is where real
# pairs of models fall). bench/sequential.py --priors, 5 points on 14,042 rows: median stop 4.6% of the rows at
# 0.5, 4.0% at 1, 3.8% at 4, 4.2% at 16. By hand with first_stop, 200 replays: 5 points on 1,000 rows stopped at
# 65% (1) and 58% (4), deciding 74% and 80%; a larger prior slows big differences (15 points on 300 rows: 21% at
# 1, 27% at 4, 33% at 8).
PRIOR = 4.0
# The empirical-Bernstein bet is capped at 1/2 (the paper's suggestion for its plug-in sequence).
BET_CAP = 0.5
# What a user counts as a difference when none is told: 2 points of the score's scale.
MIN_DIFFERENCE = 0.02
DECISION, FUTILITY = "decision", "futility"
# Why a futility stop: any difference left is below min_difference, or no run of the remaining rows could decide.
WITHIN, UNDECIDABLE = "within", "undecidable"
MIXTURE_SPRT = "mixture SPRT on the discordant pairs (always-valid), with McNemar's exact test on the prefix"
EMPIRICAL_BERNSTEIN = "empirical-Bernstein confidence sequence (always-valid), with the paired t-test on the prefix"


@dataclass
class Walk:
    """The running state of one paired comparison, a pair at a time: differences B - A in [-1, 1]."""

    alpha: float
    binary: bool
    prior: float = PRIOR
    n: int = 0
    better: int = 0
    worse: int = 0
    sum_d: float = 0.0
    sum_d2: float = 0.0
    # The mixture SPRT: log LR now, and its largest value so far (what the p-value is).
    log_lr: float = 0.0
    log_lr_max: float = 0.0
    # The empirical-Bernstein sequence on x = (d + 1) / 2: running sums and the plug-in estimates before this pair.
    mean_before: float = 0.5
    spread_before: float = 0.25
    sum_x: float = 0.0
    sum_squares: float = 0.25
    bets: float = 0.0
    bets_x: float = 0.0
    penalties: float = 0.0
    log_e_max: float = 0.0
    # The running intersection of the sequence's intervals, in difference units.
    low: float = -1.0
    high: float = 1.0

    def add(self, d: float):
        d = min(1.0, max(-1.0, d))  # a score outside its scale must not break the martingale
        self.n += 1
        self.sum_d += d
        self.sum_d2 += d * d
        if d > 0:
            self.better += 1
        elif d < 0:
            self.worse += 1
        if self.binary and d:
            # LR_{k+1} / LR_k for one more discordant pair under the Beta mixture: 2 (a + s) / (2a + k) for its side.
            side = self.better if d > 0 else self.worse
            self.log_lr += math.log(2 * (self.prior + side - 1) / (2 * self.prior + self.better + self.worse - 1))
            self.log_lr_max = max(self.log_lr_max, self.log_lr)
        self._bet((d + 1) / 2)

    def _bet(self, x: float):
        t, log_two_alpha = self.n, math.log(2 / self.alpha)
        bet = min(math.sqrt(2 * log_two_alpha / (self.spread_before * t * math.log(1 + t))), BET_CAP)
        self.bets += bet
        self.bets_x += bet * x
        self.penalties += (x - self.mean_before) ** 2 * (-math.log1p(-bet) - bet)  # v_t ψ_E(λ_t), the 4s cancelling
        centre, margin = self.bets_x / self.bets, (log_two_alpha + self.penalties) / self.bets
        self.low, self.high = max(self.low, 2 * (centre - margin) - 1), min(self.high, 2 * (centre + margin) - 1)
        self.log_e_max = max(self.log_e_max, abs(self.bets_x - self.bets / 2) - self.penalties)
        self.sum_x += x
        self.mean_before = (0.5 + self.sum_x) / (t + 1)
        self.sum_squares += (x - self.mean_before) ** 2
        self.spread_before = self.sum_squares / (t + 1)

    @property
    def delta(self) -> float | None:
        return self.sum_d / self.n if self.n else None

    @property
    def p(self) -> float:
        """The always-valid p-value of "no difference" after this many pairs."""
        if self.binary:
            return min(1.0, math.exp(-self.log_lr_max))
        return min(1.0, 2 * math.exp(-self.log_e_max))

    @property
    def fixed_p(self) -> float:
        """The fixed-n test of the same pairs, as if n had been chosen in advance (McNemar exact, or the paired t)."""
        if self.binary:
            return statistics.mcnemar_exact(self.better, self.worse)
        if self.n < 2:
            return 1.0
        mean = self.sum_d / self.n
        var = max(0.0, (self.sum_d2 - self.n * mean * mean) / (self.n - 1))
        if var == 0:
            return 1.0 if mean == 0 else 0.0
        return statistics.t_sf2(mean / math.sqrt(var / self.n), self.n - 1)

    def decided(self) -> bool:
        return self.p <= self.alpha and self.delta != 0 and self.fixed_p <= self.alpha

    def within(self, min_difference: float) -> bool:
        return -min_difference < self.low and self.high < min_difference

    def could_decide(self, remaining: int) -> bool:
        """Could the remaining rows still bring p to α, were every one of them to go the same way?"""
        if self.binary:
            # All on one side: each step's ratio 2 (a + s + j) / (2a + k + j) grows with j, so log LR falls, then rises,
            # and its largest value on the way is now or at the end; the end is highest with the side already ahead.
            return _log_lr(max(self.better, self.worse) + remaining, min(self.better, self.worse), self.prior) >= -math.log(self.alpha)
        # A row moves the log e-value by at most BET_CAP / 2 (a bet of at most BET_CAP on |x - 1/2| ≤ 1/2, less a
        # penalty): a bound, so a graded comparison may run a few rows past the point where the rest could not decide,
        # never stop before it.
        return self.log_e_max + remaining * BET_CAP / 2 >= math.log(2 / self.alpha)


def _log_lr(better: int, worse: int, a: float) -> float:
    """The mixture SPRT's log likelihood ratio at these counts of discordant pairs: B(a + s, a + f) / B(a, a) * 2^(s + f)."""
    log_beta = math.lgamma(a + better) + math.lgamma(a + worse) - math.lgamma(2 * a + better + worse)
    return log_beta - (2 * math.lgamma(a) - math.lgamma(2 * a)) + (better + worse) * math.log(2)


@dataclass(frozen=True)
class Look:
    """What a look at a prefix says: figures in difference units (B - A on [-1, 1]), a verdict, and whether to stop."""

    pairs: int
    delta: float | None
    p: float
    fixed_p: float
    interval: tuple[float, float]
    verdict: str
    reason: str | None  # DECISION, FUTILITY, or None: go on
    why: str = ""  # a futility stop's: WITHIN or UNDECIDABLE
    method: str = ""


def walk(differences, alpha: float, binary: bool, prior: float = PRIOR) -> Walk:
    state = Walk(alpha=alpha, binary=binary, prior=prior)
    for d in differences:
        state.add(d)
    return state


def look(differences, remaining: int, alpha: float, *, binary: bool, min_difference: float = MIN_DIFFERENCE) -> Look:
    """The comparison after these pairs (in the run order), with `remaining` rows of the eval still to come."""
    return verdict_of(walk(differences, alpha, binary), remaining, min_difference)


def verdict_of(state: Walk, remaining: int, min_difference: float = MIN_DIFFERENCE) -> Look:
    reason, why, verdict = None, "", statistics.NOT_DECISIVE
    if state.decided():
        reason, verdict = DECISION, statistics.verdict(True, state.delta)
    elif state.n and state.within(min_difference):
        reason, why = FUTILITY, WITHIN
    elif remaining and not state.could_decide(remaining):
        reason, why = FUTILITY, UNDECIDABLE
    return Look(
        pairs=state.n,
        delta=state.delta,
        p=state.p,
        fixed_p=state.fixed_p,
        interval=(state.low, state.high),
        verdict=verdict,
        reason=reason,
        why=why,
        method=MIXTURE_SPRT if state.binary else EMPIRICAL_BERNSTEIN,
    )


def first_stop(differences, total: int, alpha: float, *, binary: bool, min_difference: float = MIN_DIFFERENCE, prior: float = PRIOR) -> tuple[int, Look]:
    """Looking after every pair (the most often anyone can look): where the comparison stops, and what it says there.

    For simulations (bench/sequential.py, tests/test_sequential.py): the pairs are
    the rows of a run of `total`, and the rule is `look`'s. Without a stop it is the
    look at the last pair.
    """
    state = Walk(alpha=alpha, binary=binary, prior=prior)
    for d in differences:
        state.add(d)
        remaining = total - state.n
        if state.decided() or state.within(min_difference) or (remaining and not state.could_decide(remaining)):
            return state.n, verdict_of(state, remaining, min_difference)
    return state.n, verdict_of(state, 0, min_difference)


def prefix(order, scores_a: dict, scores_b: dict) -> tuple[int, list[tuple[float, float]]]:
    """The longest prefix of the run order both evals stored: how many rows it covers, and its scored pairs.

    A row stored with an error (score None) on either side is covered but not paired:
    the pass does not ask it again, and waiting for it would freeze the test.
    """
    covered, pairs = 0, []
    for index in order:
        if index not in scores_a or index not in scores_b:
            break
        covered += 1
        a, b = scores_a[index], scores_b[index]
        if a is not None and b is not None:
            pairs.append((a, b))
    return covered, pairs
