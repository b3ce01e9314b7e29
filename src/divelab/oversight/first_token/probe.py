"""The first-token probe, its text-only control, and the separability "valley".

Probe pipeline as in the paper (``reproduce/tab_auroc_ci.py``): StandardScaler → PCA → L2 logistic
regression with balanced class weights, out-of-fold decision scores from stratified k-fold, AUROC with a
stratified bootstrap CI (:func:`divelab.stats.auroc_ci`), balanced accuracy at a Youden threshold chosen
on the *other* folds' scores. The text control feeds TF-IDF of the emitted first-token string to the same
pipeline. The valley is a normalised Fisher discriminant J(t) between eventual-refuse and eventual-comply
traces at each normalised trace position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from divelab import stats


@dataclass
class ProbeResult:
    auroc: float
    ci: tuple[float, float]
    balanced_accuracy: float
    scores: np.ndarray  # out-of-fold decision scores
    labels: np.ndarray
    n_components: int

    def to_dict(self) -> dict:
        return {"auroc": self.auroc, "ci": list(self.ci), "balanced_accuracy": self.balanced_accuracy,
                "n": int(self.labels.size), "positives": int(self.labels.sum()), "n_components": self.n_components}


def _check_labels(y: np.ndarray, folds: int) -> None:
    classes, counts = np.unique(y, return_counts=True)
    if classes.size != 2:
        raise ValueError(f"the probe needs two outcome classes (refuse and comply), got only "
                         f"{classes.tolist()} in {y.size} labels")
    if counts.min() < folds:
        raise ValueError(f"fewer examples of the rarer class ({int(counts.min())}) than folds ({folds}); "
                         f"give more prompts or fewer folds")


@dataclass(frozen=True)
class FirstTokenProbe:
    """``StandardScaler → PCA(n_components) → LogisticRegression(C, class_weight="balanced")``, scored
    out of fold. ``n_components`` is capped at what the data allow."""

    n_components: int = 100
    C: float = 0.03
    folds: int = 5
    seed: int = 0
    n_resamples: int = 2000

    def pipeline(self, n_features: int, n_train: int):
        from sklearn.decomposition import PCA
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        k = max(1, min(self.n_components, n_features, n_train - 1))
        return make_pipeline(StandardScaler(), PCA(n_components=k, random_state=self.seed),
                             LogisticRegression(C=self.C, class_weight="balanced", max_iter=5000)), k

    def fit_oof(self, X: np.ndarray, y: Sequence[int] | np.ndarray) -> ProbeResult:
        """Out-of-fold scores, AUROC with its bootstrap CI, and held-out-threshold balanced accuracy."""
        from sklearn.metrics import balanced_accuracy_score, roc_curve
        from sklearn.model_selection import StratifiedKFold

        X = np.asarray(X, dtype=float)
        y = np.asarray(y).astype(int).ravel()
        if X.ndim != 2 or X.shape[0] != y.size:
            raise ValueError(f"X must be (n, d) with n = len(y) = {y.size}, got shape {X.shape}")
        if self.folds < 2:
            raise ValueError(f"folds must be >= 2, got {self.folds}")
        if y.size < self.folds:
            raise ValueError(f"fewer prompts ({y.size}) than folds ({self.folds})")
        _check_labels(y, self.folds)
        skf = StratifiedKFold(n_splits=self.folds, shuffle=True, random_state=self.seed)
        splits = list(skf.split(X, y))
        scores = np.zeros(y.size)
        k_used = 0
        for train, test in splits:
            pipe, k_used = self.pipeline(X.shape[1], train.size)
            pipe.fit(X[train], y[train])
            scores[test] = pipe.decision_function(X[test])
        # Youden threshold per fold from the other folds' out-of-fold scores
        pred = np.zeros(y.size, dtype=int)
        for _, test in splits:
            other = np.setdiff1d(np.arange(y.size), test)
            if np.unique(y[other]).size < 2:
                thr = 0.0
            else:
                fpr, tpr, thr_all = roc_curve(y[other], scores[other])
                thr = float(thr_all[int(np.argmax(tpr - fpr))])
            pred[test] = (scores[test] >= thr).astype(int)
        auc, lo, hi = stats.auroc_ci(y, scores, seed=self.seed, n_resamples=self.n_resamples)
        return ProbeResult(auc, (lo, hi), float(balanced_accuracy_score(y, pred)), scores, y, k_used)


def text_control(tokens: Sequence[str], y: Sequence[int] | np.ndarray, probe: FirstTokenProbe | None = None,
                 *, words: bool = False) -> ProbeResult:
    """A text-only control: TF-IDF of each text through the same probe. The texts are the emitted first-token
    strings (whitespace units, case kept), or with ``words=True`` longer texts such as the requests (lower-cased
    word unigrams and bigrams)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    probe = probe or FirstTokenProbe()
    docs = [t if t.strip() else "<empty>" for t in tokens]
    vec = (TfidfVectorizer(ngram_range=(1, 2), lowercase=True) if words
           else TfidfVectorizer(token_pattern=r"\S+", lowercase=False))
    X = vec.fit_transform(docs).toarray()
    return probe.fit_oof(X, y)


def fisher_curve(H: np.ndarray, y: Sequence[int] | np.ndarray) -> np.ndarray:
    """J(t) = ‖μ_refuse − μ_comply‖² / (tr Σ_refuse + tr Σ_comply) at each position; H is (n, P, d)."""
    H = np.asarray(H, dtype=float)
    y = np.asarray(y).astype(bool)
    if H.ndim != 3 or H.shape[0] != y.size:
        raise ValueError(f"H must be (n, positions, d) with n = len(y) = {y.size}, got {H.shape}")
    if y.all() or not y.any():
        raise ValueError("fisher_curve needs both outcome classes")
    a, b = H[y], H[~y]
    num = ((a.mean(0) - b.mean(0)) ** 2).sum(-1)
    den = a.var(0).sum(-1) + b.var(0).sum(-1)
    return num / np.maximum(den, 1e-12)


class _ResampledFisher:
    """:func:`fisher_curve` of a bootstrap resample ``H[ii]``, from per-trace sums instead of a copy of the
    resample: a class's mean and its variance summed over dimensions are weighted sums of each trace's state and
    squared norm, weighted by how often the resample drew the trace. A full run draws thousands of resamples of
    (1000 traces x 101 positions x d) states, where copying each cost most of the run. The two statistics of
    :func:`valley_test` draw the same resamples (one seed), so each curve is computed once and reused."""

    def __init__(self, H: np.ndarray, y: np.ndarray) -> None:
        n, self.P, self.d = H.shape
        self.flat = H.reshape(n, self.P * self.d)
        self.sq = (H ** 2).sum(-1)  # (n, P): each trace's squared norm at each position
        self.y = y.astype(bool)
        self.memo: dict[bytes, np.ndarray] = {}

    def _moments(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = w.sum()
        mean = (w @ self.flat).reshape(self.P, self.d) / m
        return mean, w @ self.sq / m - (mean ** 2).sum(-1)

    def __call__(self, ii: np.ndarray) -> np.ndarray:
        key = ii.tobytes()
        if key not in self.memo:
            counts = np.bincount(ii, minlength=self.y.size).astype(float)
            (ma, va), (mb, vb) = self._moments(counts * self.y), self._moments(counts * ~self.y)
            self.memo[key] = ((ma - mb) ** 2).sum(-1) / np.maximum(va + vb, 1e-12)
        return self.memo[key]


@dataclass
class ValleyTest:
    positions: np.ndarray
    J: np.ndarray
    curvature: float  # quadratic coefficient of a fit to log J(t)
    curvature_ci: tuple[float, float]
    depth: float  # min(log J(0), log J(1)) - min of log J over interior positions
    depth_ci: tuple[float, float]
    argmin: float

    def to_dict(self) -> dict:
        return {"positions": self.positions.tolist(), "J": self.J.tolist(), "curvature": self.curvature,
                "curvature_ci": list(self.curvature_ci), "depth": self.depth, "depth_ci": list(self.depth_ci),
                "argmin": self.argmin}


def _valley_stats(J: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    logJ = np.log(np.maximum(J, 1e-12))
    curv = float(np.polyfit(t, logJ, 2)[0])
    depth = float(min(logJ[0], logJ[-1]) - logJ[1:-1].min())
    return curv, depth


def valley_test(H: np.ndarray, y: Sequence[int] | np.ndarray, positions: np.ndarray, *, seed: int = 0,
                n_resamples: int = 500) -> ValleyTest:
    """Test the U-shape of J(t): a quadratic fitted to log J(t) has positive curvature, and both ends
    sit above the interior minimum (depth, in log units). CIs: percentile bootstrap over traces."""
    H = np.asarray(H, dtype=float)
    y = np.asarray(y).astype(int)
    t = np.asarray(positions, dtype=float)
    J = fisher_curve(H, y)
    curv, depth = _valley_stats(J, t)
    idx = np.arange(y.size)
    resampled = _ResampledFisher(H, y)

    def stat(which: int):
        def f(sample: np.ndarray) -> float:
            ii = sample.astype(int)
            if np.unique(y[ii]).size < 2:
                return float("nan")
            return _valley_stats(resampled(ii), t)[which]
        return f

    cci = stats.bootstrap_ci(idx, stat(0), n_resamples=n_resamples, seed=seed, method="percentile")
    dci = stats.bootstrap_ci(idx, stat(1), n_resamples=n_resamples, seed=seed, method="percentile")
    return ValleyTest(t, J, curv, cci, depth, dci, float(t[1:-1][int(np.argmin(J[1:-1]))]))
