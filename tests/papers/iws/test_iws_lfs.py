"""Candidate LFs (counts, polarity, negations in bigram mode, user LFs, highlight spans), fingerprints (training
documents only; equal to the literal SVD of the LF output matrix), the LF accuracy and the simulated oracle."""

import numpy as np
import pytest
from iws_corpus import BAD, FILLER, GOOD, sentiment_corpus

from paperzoo.papers.iws import LFConfig, UserLF, fingerprints, generate_lfs, lf_accuracy, simulated_oracle

CLASSES = ("negative", "positive")


def test_unigram_family_one_lf_per_term_and_class_with_iws_votes():
    texts, _ = sentiment_corpus()
    lfs = generate_lfs(texts, CLASSES, LFConfig(min_df=5))
    # every content word occurs in >= 5 documents; "the", "not", "a" are stop words; "good" occurs only in negatives
    assert set(lfs.names) == set(GOOD) | set(BAD) | set(FILLER) | {"good"}
    assert lfs.n_lfs == 2 * len(lfs.names)
    out = lfs.outputs()
    for j in range(lfs.n_lfs):
        col = out[:, j].toarray().ravel()
        vote = 1 if lfs.lf_class[j] == 1 else -1
        fired = lfs.fires[:, lfs.lf_pattern[j]].toarray().ravel()
        assert set(np.unique(col)) <= {0, vote} and np.array_equal(col != 0, fired == 1)
    # max_df: a term in every document (> 90%) is no LF
    assert "movie" in lfs.names
    lots = generate_lfs([t + " everywhere" for t in texts], CLASSES, LFConfig(min_df=5))
    assert "everywhere" not in lots.names


def test_min_df_counts_documents():
    texts = ["alpha beta"] * 3 + ["alpha gamma"] * 2 + ["delta"] * 5
    lfs = generate_lfs(texts, CLASSES, LFConfig(min_df=3, max_df=1.0))
    assert sorted(lfs.names) == ["alpha", "beta", "delta"]  # gamma is in 2 documents only


def test_bigram_mode_keeps_negations():
    texts, _ = sentiment_corpus()
    uni = generate_lfs(texts, CLASSES, LFConfig(min_df=5))
    both = generate_lfs(texts, CLASSES, LFConfig(ngrams="unigram+bigram", min_df=5))
    assert "not" not in uni.names  # a stop word for unigrams
    assert "not good" in both.names  # "not a good": the article is dropped, the negation kept
    off = generate_lfs(texts, CLASSES, LFConfig(ngrams="unigram+bigram", min_df=5, keep_negations=False))
    assert not any(n.startswith("not ") for n in off.names)
    j = both.find("not good", "negative")
    assert both.kinds[both.lf_pattern[j]] == "bigram"
    text = "The plot was not a good one, not good."
    spans = both.spans(text, j)
    assert [text[a:b] for a, b in spans] == ["not a good", "not good"]


def test_multiclass_lfs_vote_class_plus_one():
    texts = ["apple pie"] * 4 + ["banana split"] * 4 + ["cherry tart"] * 4
    lfs = generate_lfs(texts, ("a", "b", "c"), LFConfig(min_df=3, max_df=0.5))
    assert lfs.n_lfs == 3 * len(lfs.names)
    assert sorted(np.unique(lfs.votes()).tolist()) == [1, 2, 3]
    j = lfs.find("banana", "c")
    assert lfs.votes()[j] == 3 and set(lfs.outputs()[:, j].data.tolist()) == {3}


def test_user_regex_and_keyword_lfs():
    texts, _ = sentiment_corpus()
    user = (UserLF(r"\bsuper\w*", 1, regex=True), UserLF("dreadful", 0))
    lfs = generate_lfs(texts, CLASSES, LFConfig(min_df=5), user)
    j = lfs.n_lfs - 2
    assert lfs.kinds[lfs.lf_pattern[j]] == "regex" and lfs.lf_class[j] == 1
    fired = lfs.fires[:, lfs.lf_pattern[j]].toarray().ravel() == 1
    assert np.array_equal(fired, np.array(["superb" in t for t in texts]))
    t = "A Superb and superbly shot film."
    assert [t[a:b] for a, b in lfs.spans(t, j)] == ["Superb", "superbly"]
    assert lfs.describe(j) == 'contains regex "\\bsuper\\w*" -> positive'
    held = lfs.fire(["superb and dreadful", "nothing"])
    assert held.shape == (2, len(lfs.names)) and held[0, lfs.lf_pattern[j]] == 1 and held[1].nnz == 0
    with pytest.raises(ValueError, match="label must be a class index"):
        generate_lfs(texts, CLASSES, LFConfig(min_df=5), (UserLF("x", 2),))


def test_fingerprints_are_the_svd_of_the_lf_outputs_over_training_documents_only():
    texts, _ = sentiment_corpus(80)
    lfs = generate_lfs(texts, CLASSES, LFConfig(min_df=5))
    k = 6
    fp = fingerprints(lfs, k)
    assert fp.shape == (lfs.n_lfs, k) and fp.dtype == np.float32
    # the literal official computation: SVD of L^T (LFs x docs) with entries in {-1, 0, 1}; fingerprints = U S.
    # Compare sign- and rotation-free: the Gram matrix of the top-k projection
    lt = lfs.outputs().T.toarray().astype(np.float64)
    u, s, _ = np.linalg.svd(lt, full_matrices=False)
    ref = u[:, :k] * s[:k]
    np.testing.assert_allclose(fp @ fp.T, ref @ ref.T, atol=1e-3 * np.abs(ref @ ref.T).max())
    # the +1 and -1 LF of a term are mirror images
    pos, neg = lfs.find("great", "positive"), lfs.find("great", "negative")
    np.testing.assert_allclose(fp[pos], -fp[neg])
    # test documents never enter: fingerprints depend only on the training documents' fires
    more = generate_lfs(texts, CLASSES, LFConfig(min_df=5))
    assert np.array_equal(fingerprints(more, k), fp)
    assert lfs.fires.shape[0] == len(texts)


def test_lf_accuracy_and_the_oracle_threshold():
    # "aa" covers 10 docs, 7 positive: accuracy 0.7 -> not useful (> 0.7 is required); "bb": 8 of 10 -> useful
    texts = ["aa"] * 7 + ["aa"] * 3 + ["bb"] * 8 + ["bb"] * 2 + ["cc"] * 10
    labels = [1] * 7 + [0] * 3 + [1] * 8 + [0] * 2 + [0] * 10
    lfs = generate_lfs(texts, CLASSES, LFConfig(min_df=1, max_df=1.0))
    acc = lf_accuracy(lfs, labels)
    got = {(lfs.names[lfs.lf_pattern[j]], int(lfs.lf_class[j])): round(float(acc[j]), 6) for j in range(lfs.n_lfs)}
    assert got[("aa", 1)] == 0.7 and got[("aa", 0)] == 0.3 and got[("bb", 1)] == 0.8 and got[("cc", 0)] == 1.0
    useful = simulated_oracle(lfs, labels)
    names = {(lfs.names[lfs.lf_pattern[j]], int(lfs.lf_class[j])) for j in np.flatnonzero(useful)}
    assert names == {("bb", 1), ("cc", 0)}
    assert simulated_oracle(lfs, labels, threshold=0.69)[lfs.find("aa", 1)]
    with pytest.raises(ValueError, match="labels must have shape"):
        lf_accuracy(lfs, labels[:-1])


def test_bad_corpora_are_refused():
    with pytest.raises(ValueError, match="texts is empty"):
        generate_lfs([], CLASSES)
    with pytest.raises(ValueError, match="at least 2 classes"):
        generate_lfs(["a b"], ("only",))
    with pytest.raises(ValueError, match="document 1 is int"):
        generate_lfs(["a b", 3], CLASSES)
    with pytest.raises(ValueError, match="no candidate LFs"):
        generate_lfs(["rare words"] * 3, CLASSES, LFConfig(min_df=20))
    with pytest.raises(ValueError, match="ngrams must be"):
        LFConfig(ngrams="trigram")
    texts, _ = sentiment_corpus()
    lfs = generate_lfs(texts, CLASSES, LFConfig(min_df=5))
    with pytest.raises(ValueError, match="single-class data set"):
        simulated_oracle(lfs, [1] * len(texts))


def test_an_iws_csv_without_its_document_column_is_refused(tmp_path):
    import gzip

    from paperzoo.data import read_imdb_csv

    path = tmp_path / "bad.csv.gz"
    path.write_bytes(gzip.compress(b"review,label,fold\nnice,1,0\n"))
    with pytest.raises(ValueError, match=r"missing \['text'\]"):
        read_imdb_csv(path, "train")


@pytest.mark.data("youtube-spam")
def test_youtube_candidates_and_oracle():
    from paperzoo.data import load_youtube_spam

    tr = load_youtube_spam("train")
    lfs = generate_lfs(tr.texts, tr.classes)
    useful = simulated_oracle(lfs, tr.labels)
    assert lfs.n_lfs == 2 * len(lfs.names) and 0 < useful.sum() < lfs.n_lfs
    assert useful[lfs.find("subscribe", "spam")] and not useful[lfs.find("subscribe", "ham")]
