"""A small deterministic corpus for the IWS tests: sentiment words that predict the label, filler that does not."""

import numpy as np

GOOD = ("great", "wonderful", "superb", "brilliant")
BAD = ("awful", "boring", "terrible", "dreadful")
FILLER = ("movie", "plot", "actor", "scene", "camera", "music", "story", "ending")


def sentiment_corpus(n: int = 120, seed: int = 0, noise: float = 0.15) -> tuple[list[str], list[int]]:
    """``n`` short reviews; label 1 docs use GOOD words (with prob 1 - noise), label 0 docs BAD ones; "not good"
    appears in negative reviews so the bigram family has a negation to keep."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        y = i % 2
        own, other = (GOOD, BAD) if y else (BAD, GOOD)
        words = list(rng.choice(FILLER, 4))
        words += [rng.choice(own) if rng.random() > noise else rng.choice(other) for _ in range(2)]
        if not y and rng.random() < 0.5:
            words += ["not", "a", "good"]
        rng.shuffle(words[:6])
        texts.append("The " + " ".join(words) + ".")
        labels.append(y)
    return texts, labels
