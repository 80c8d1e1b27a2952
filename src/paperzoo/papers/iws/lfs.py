"""Candidate labeling functions (LFs): n-gram families and user regex/keyword LFs, their outputs and fingerprints.

A *pattern* is something that fires on a document (an n-gram of a binary bag of words, or a regex); an *LF* is a
pattern with the class it votes for. Every n-gram pattern gives one LF per class (binary: one voting +1 and one
voting -1, the IWS paper's families); a user LF is one pattern with the one class the user gave it.

LF outputs follow IWS's convention: 0 = abstain; binary votes +1 (class 1) and -1 (class 0); with K > 2 classes an LF
for class ``k`` votes ``k + 1``. Everything is sparse: IMDB's 25k documents x 23.7k unigram LFs hold 4M votes.

Fingerprints (the features the model of the expert sees) are the TruncatedSVD(150) of the LF output matrix over the
*training* documents, one row per LF (paper Sec. 4).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

# The official code keeps these words of scikit-learn's English stop list in bigram mode (negations, quantities,
# "should", ...), so that "not good" and "never again" become LFs for sentiment; it also adds "did" and "got".
NEGATION_WORDS = frozenset({
    "another", "cannot", "cant", "couldnt", "cry", "elsewhere", "except", "fire", "five", "four", "hasnt", "interest",
    "least", "less", "neither", "never", "nine", "no", "nobody", "none", "noone", "nor", "not", "nothing", "nowhere",
    "one", "rather", "serious", "should", "ten", "three", "too", "two"})
BIGRAM_EXTRA_STOP = frozenset({"did", "got"})
TOKEN = re.compile(r"(?u)\b\w\w+\b")  # CountVectorizer's default token pattern


@dataclass(frozen=True)
class LFConfig:
    """How the n-gram families are built (the official ``generate_ngram_LFs``).

    ``ngrams``: "unigram" or "unigram+bigram". ``min_df``: a term must occur in this many training documents (20);
    ``max_df``: and in at most this fraction of them (0.9). ``keep_negations``: bigrams keep :data:`NEGATION_WORDS`.
    """

    ngrams: str = "unigram"
    min_df: int = 20
    max_df: float = 0.9
    keep_negations: bool = True

    def __post_init__(self) -> None:
        if self.ngrams not in ("unigram", "unigram+bigram"):
            raise ValueError(f"LFConfig.ngrams must be 'unigram' or 'unigram+bigram', got {self.ngrams!r}")
        if not isinstance(self.min_df, int) or self.min_df < 1:
            raise ValueError(f"LFConfig.min_df must be an int >= 1 (documents), got {self.min_df!r}")
        if not 0 < self.max_df <= 1:
            raise ValueError(f"LFConfig.max_df must lie in (0, 1], got {self.max_df!r}")


@dataclass(frozen=True)
class UserLF:
    """A user's LF: ``pattern`` (a keyword, or a regex with ``regex=True``) voting for class index ``label``."""

    pattern: str
    label: int
    regex: bool = False

    def compiled(self) -> re.Pattern:
        src = self.pattern if self.regex else rf"\b{re.escape(self.pattern)}\b"
        return re.compile(src, re.IGNORECASE)


@dataclass
class CandidateLFs:
    """Patterns fired on the training documents and the LFs built on them.

    ``fires``: (docs, patterns) 0/1 CSR over the training documents; ``names``/``kinds``: each pattern's text and
    kind ("unigram", "bigram", "keyword", "regex"); ``lf_pattern``, ``lf_class``: (LFs,) the pattern of each LF and
    the class index it votes for; ``classes``: the class names.
    """

    fires: sp.csr_matrix
    names: list[str]
    kinds: list[str]
    lf_pattern: np.ndarray
    lf_class: np.ndarray
    classes: tuple[str, ...]
    config: LFConfig = field(default_factory=LFConfig)
    user: tuple[UserLF, ...] = ()
    vocabularies: dict[str, list[str]] = field(default_factory=dict)

    @property
    def n_lfs(self) -> int:
        return len(self.lf_pattern)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_docs(self) -> int:
        return self.fires.shape[0]

    def votes(self) -> np.ndarray:
        """(LFs,) int8: the value each LF outputs when it fires (IWS convention, see the module docstring)."""
        return lf_vote(self.lf_class, self.n_classes)

    def outputs(self, fires: sp.csr_matrix | None = None, columns: np.ndarray | None = None) -> sp.csr_matrix:
        """(docs, LFs) int8 CSR of LF outputs (0 = abstain) on the training documents, or on ``fires`` of others;
        ``columns`` selects LFs (default all)."""
        f = self.fires if fires is None else fires
        cols = np.arange(self.n_lfs) if columns is None else np.asarray(columns, dtype=np.int64)
        return (f[:, self.lf_pattern[cols]].multiply(self.votes()[cols][None, :])).tocsr().astype(np.int8)

    def coverage(self) -> np.ndarray:
        """(LFs,) the fraction of training documents each LF votes on."""
        return np.asarray(self.fires.mean(0)).ravel()[self.lf_pattern]

    def describe(self, j: int) -> str:
        """``'contains "word" -> positive'``: what LF ``j`` does, as the expert reads it."""
        p = int(self.lf_pattern[j])
        what = {"unigram": "term", "bigram": "bigram", "keyword": "keyword", "regex": "regex"}[self.kinds[p]]
        return f'contains {what} "{self.names[p]}" -> {self.classes[int(self.lf_class[j])]}'

    def fire(self, texts: Sequence[str]) -> sp.csr_matrix:
        """(len(texts), patterns) 0/1 CSR: the same patterns fired on other documents (e.g. a held-out set)."""
        from sklearn.feature_extraction.text import CountVectorizer

        blocks = []
        for kind in ("unigram", "bigram"):
            vocab = self.vocabularies.get(kind)
            if vocab:
                v = CountVectorizer(vocabulary=vocab, binary=True, **_vectorizer_args(kind, self.config))
                blocks.append(v.transform(texts))
        if self.user:
            blocks.append(_fire_user(texts, self.user))
        return sp.hstack(blocks).tocsr().astype(np.int8) if blocks else sp.csr_matrix((len(texts), 0), dtype=np.int8)

    def spans(self, text: str, j: int) -> list[tuple[int, int]]:
        """Character spans ``[(start, end), ...]`` in ``text`` where LF ``j``'s pattern matches (for highlighting).

        N-grams are matched on the vectorizer's tokens (lower-cased, accents stripped, stop words dropped, so a
        bigram "not good" also spans "not a good"); user LFs by their regex.
        """
        p = int(self.lf_pattern[j])
        kind, name = self.kinds[p], self.names[p]
        if kind in ("keyword", "regex"):
            user = self.user[p - sum(len(v) for v in self.vocabularies.values())]
            return [(m.start(), m.end()) for m in user.compiled().finditer(text) if m.end() > m.start()]
        stop = _stop_words(kind, self.config)
        toks = [(m.start(), m.end(), _normalize(m.group())) for m in TOKEN.finditer(text)]
        toks = [t for t in toks if t[2] not in stop]
        words = name.split(" ")
        n = len(words)
        return [(toks[i][0], toks[i + n - 1][1]) for i in range(len(toks) - n + 1)
                if [t[2] for t in toks[i:i + n]] == words]

    def find(self, pattern: str, label: int | str) -> int:
        """The index of the LF whose pattern is ``pattern`` and which votes for ``label`` (index or class name)."""
        k = self.classes.index(label) if isinstance(label, str) and label in self.classes else label
        if not isinstance(k, int | np.integer) or not 0 <= k < self.n_classes:
            raise ValueError(f"label must be a class index in [0, {self.n_classes}) or one of {self.classes}, "
                             f"got {label!r}")
        hits = [p for p, n in enumerate(self.names) if n == pattern]
        j = np.flatnonzero(np.isin(self.lf_pattern, hits) & (self.lf_class == k))
        if len(j) == 0:
            raise ValueError(f"no candidate LF {pattern!r} -> {self.classes[k]}: the term is not in the vocabulary "
                             f"(min_df={self.config.min_df}, max_df={self.config.max_df}) nor a user LF")
        return int(j[0])

    def fingerprint_key(self) -> str:
        """A digest of the LF set (pattern names, kinds, LF classes): what a saved session must match."""
        h = hashlib.sha256()
        h.update("\x1f".join(f"{k}:{n}" for k, n in zip(self.kinds, self.names, strict=True)).encode())
        h.update(self.lf_pattern.astype(np.int64).tobytes() + self.lf_class.astype(np.int64).tobytes())
        return h.hexdigest()


# ------------------------------------------------------------------------------------------------ generation
def generate_lfs(texts: Sequence[str], classes: Sequence[str], config: LFConfig | None = None,
                 user: Sequence[UserLF] = ()) -> CandidateLFs:
    """Build the candidate LFs on the training documents ``texts`` (paper Sec. 5, the official generator).

    Each n-gram occurring in at least ``min_df`` and at most ``max_df`` of the documents becomes a pattern and one LF
    per class; each user LF one pattern and one LF.
    """
    config = config or LFConfig()
    classes = tuple(classes)
    _check_corpus(texts, classes)
    user = tuple(user)
    for u in user:
        if not 0 <= u.label < len(classes):
            raise ValueError(f"UserLF {u.pattern!r}: label must be a class index in [0, {len(classes)}), got {u.label}")
    blocks, names, kinds, vocabularies = [], [], [], {}
    families = ["unigram"] + (["bigram"] if config.ngrams == "unigram+bigram" else [])
    for kind in families:
        x, vocab = _ngram_block(texts, kind, config)
        blocks.append(x)
        names += vocab
        kinds += [kind] * len(vocab)
        vocabularies[kind] = vocab
    n_ngram = len(names)
    if user:
        blocks.append(_fire_user(texts, user))
        names += [u.pattern for u in user]
        kinds += ["regex" if u.regex else "keyword" for u in user]
    if not names:
        raise ValueError(f"no candidate LFs: no term occurs in >= {config.min_df} of the {len(texts)} documents and "
                         f"no user LFs were given; lower LFConfig.min_df or add UserLFs")
    fires = sp.hstack(blocks).tocsr().astype(np.int8)
    k = len(classes)
    # n-gram LFs class-major (all LFs of class 0, then class 1, ...), then the user LFs
    lf_pattern = np.concatenate([np.tile(np.arange(n_ngram), k), n_ngram + np.arange(len(user))])
    lf_class = np.concatenate([np.repeat(np.arange(k), n_ngram), np.array([u.label for u in user], dtype=np.int64)])
    return CandidateLFs(fires, names, kinds, lf_pattern.astype(np.int64), lf_class.astype(np.int64), classes,
                        config, user, vocabularies)


def _stop_words(kind: str, config: LFConfig) -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    if kind == "bigram" and config.keep_negations:
        return frozenset(ENGLISH_STOP_WORDS - NEGATION_WORDS) | BIGRAM_EXTRA_STOP
    return frozenset(ENGLISH_STOP_WORDS)


def _vectorizer_args(kind: str, config: LFConfig) -> dict:
    n = 1 if kind == "unigram" else 2
    return {"strip_accents": "ascii", "stop_words": sorted(_stop_words(kind, config)), "ngram_range": (n, n)}


def _ngram_block(texts: Sequence[str], kind: str, config: LFConfig) -> tuple[sp.csr_matrix, list[str]]:
    from sklearn.feature_extraction.text import CountVectorizer

    v = CountVectorizer(binary=True, min_df=config.min_df, max_df=config.max_df, **_vectorizer_args(kind, config))
    try:
        x = v.fit_transform(texts)
    except ValueError:  # nothing survives min_df/max_df: an empty family
        return sp.csr_matrix((len(texts), 0), dtype=np.int8), []
    return x.tocsr(), list(v.get_feature_names_out())


def _fire_user(texts: Sequence[str], user: Sequence[UserLF]) -> sp.csr_matrix:
    """(docs, user LFs) 0/1: whether each user pattern matches each document (one regex scan per pattern)."""
    rows, cols = [], []
    for c, u in enumerate(user):
        pat = u.compiled()
        hit = [i for i, t in enumerate(texts) if pat.search(t)]
        rows += hit
        cols += [c] * len(hit)
    return sp.csr_matrix((np.ones(len(rows), np.int8), (rows, cols)), shape=(len(texts), len(user)))


def _normalize(token: str) -> str:
    from sklearn.feature_extraction.text import strip_accents_ascii

    return strip_accents_ascii(token.lower())


def lf_vote(lf_class: np.ndarray, n_classes: int) -> np.ndarray:
    """IWS's vote values: binary class 1 -> +1, class 0 -> -1; K > 2 classes: class k -> k + 1 (0 is abstain)."""
    lf_class = np.asarray(lf_class)
    if n_classes == 2:
        return np.where(lf_class == 1, 1, -1).astype(np.int8)
    return (lf_class + 1).astype(np.int8)


# ------------------------------------------------------------------------------------------------ fingerprints
def fingerprints(lfs: CandidateLFs, n_components: int = 150, n_iter: int = 20, seed: int = 42) -> np.ndarray:
    """(LFs, n_components) float32: TruncatedSVD of the LF output matrix's transpose over the training documents.

    The official code runs ``TruncatedSVD(150, n_iter=20, random_state=42).fit_transform(L.T)`` on the (docs, LFs)
    output matrix L with entries in {-1, 0, +1}. Column j of L is s_j * f_{p(j)} (the pattern's 0/1 column times the
    LF's sign s_j = +-1 for binary, 1 for K > 2 classes, where each class has its own model), so

        L L^T = sum_j f_{p(j)} f_{p(j)}^T = F diag(n) F^T      (n_p = number of LFs on pattern p)

    and L^T's right singular vectors V are those of diag(sqrt n) F^T: the SVD runs on the (patterns, docs) matrix,
    half the size of L^T for binary families, and fingerprint_j = s_j (F^T V)_{p(j)} = (L^T V)_j exactly.
    Only the training documents enter (``lfs.fires``); the test set never does.
    """
    from sklearn.decomposition import TruncatedSVD

    f = lfs.fires.astype(np.float32)
    n_per_pattern = np.bincount(lfs.lf_pattern, minlength=f.shape[1]).astype(np.float32)
    w = sp.diags(np.sqrt(n_per_pattern)) @ f.T.tocsr()  # (patterns, docs)
    k = min(n_components, min(w.shape) - 1)
    if k < 1:
        raise ValueError(f"fingerprints need at least 2 documents and 2 patterns, got fires of shape {f.shape}")
    svd = TruncatedSVD(k, n_iter=n_iter, random_state=seed).fit(w)
    per_pattern = (f.T @ svd.components_.T.astype(np.float32))  # (patterns, k) = F^T V
    sign = np.where(lfs.votes() < 0, -1.0, 1.0).astype(np.float32)
    return (per_pattern[lfs.lf_pattern] * sign[:, None]).astype(np.float32)


# ------------------------------------------------------------------------------------------------ accuracy / oracle
def lf_accuracy(lfs: CandidateLFs, labels: Sequence[int]) -> np.ndarray:
    """(LFs,) the accuracy of each LF on the training documents it votes on (NaN where it votes on none)."""
    y = np.asarray(labels, dtype=np.int64)
    if y.shape != (lfs.n_docs,):
        raise ValueError(f"labels must have shape ({lfs.n_docs},) (one per training document), got {y.shape}")
    if y.min() < 0 or y.max() >= lfs.n_classes:
        raise ValueError(f"labels must be class indices in [0, {lfs.n_classes}), got range {y.min()}..{y.max()}")
    onehot = sp.csr_matrix((np.ones(len(y), np.float32), (np.arange(len(y)), y)), shape=(len(y), lfs.n_classes))
    counts = np.asarray((lfs.fires.T.astype(np.float32) @ onehot).todense())  # (patterns, classes)
    covered = counts.sum(1)[lfs.lf_pattern]
    right = counts[lfs.lf_pattern, lfs.lf_class]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(covered > 0, right / np.maximum(covered, 1), np.nan)


def simulated_oracle(lfs: CandidateLFs, labels: Sequence[int], threshold: float = 0.7) -> np.ndarray:
    """(LFs,) bool: the paper's simulated expert calls an LF useful when its accuracy on the training documents it
    covers exceeds ``threshold`` (0.7, hard-coded in the official code)."""
    if len(np.unique(np.asarray(labels))) < 2:
        raise ValueError("a single-class data set: the simulated oracle (and any AUC) needs documents of at least "
                         "two classes")
    acc = lf_accuracy(lfs, labels)
    return np.nan_to_num(acc, nan=0.0) > threshold


# ------------------------------------------------------------------------------------------------ checks
def _check_corpus(texts: Sequence[str], classes: tuple[str, ...]) -> None:
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise ValueError(f"texts must be a sequence of strings (one per document), got {type(texts).__name__}")
    if len(texts) == 0:
        raise ValueError("texts is empty: IWS needs a corpus of training documents")
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise ValueError(f"texts must all be strings; document {bad} is {type(texts[bad]).__name__}")
    if len(classes) < 2:
        raise ValueError(f"IWS needs at least 2 classes, got {classes!r}")
