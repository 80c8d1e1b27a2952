"""arXiv id normalisation: every spelling of a paper gives one id; anything else is a clear ValueError."""

import pytest

from paperzoo.hub.ids import find_arxiv_ids, normalize_arxiv_id, parse_arxiv_id


@pytest.mark.parametrize("text, ident, version", [
    ("2101.03961", "2101.03961", None),
    ("2101.03961v3", "2101.03961", 3),
    ("arXiv:2101.03961v2", "2101.03961", 2),
    ("https://arxiv.org/abs/2101.03961v3", "2101.03961", 3),
    ("http://arxiv.org/pdf/2101.03961v1.pdf", "2101.03961", 1),
    ("https://arxiv.org/pdf/2101.03961", "2101.03961", None),
    ("https://export.arxiv.org/abs/0704.0001", "0704.0001", None),
    ("solv-int/9701001", "solv-int/9701001", None),  # the archive name contains a 'v'
    ("solv-int/9701001v2", "solv-int/9701001", 2),
    ("https://arxiv.org/abs/hep-th/9711200v3", "hep-th/9711200", 3),
    ("math.GT/0309136", "math.GT/0309136", None),
    ("http://arxiv.org/abs/math.GT/0309136v1", "math.GT/0309136", 1),
])
def test_spellings_normalise_to_one_id(text, ident, version):
    assert parse_arxiv_id(text) == (ident, version)
    assert normalize_arxiv_id(text) == ident


@pytest.mark.parametrize("bad", ["", "2101.0396", "2113.03961", "hello", "abs/2101", "2101.039611234", "v3",
                                 "https://example.org/abs/2101.03961"])
def test_bad_ids_raise_naming_the_expected_form(bad):
    with pytest.raises(ValueError, match="YYMM"):
        parse_arxiv_id(bad)


def test_ids_found_in_post_text_in_order_without_repeats():
    text = ("see https://arxiv.org/abs/2101.03961v3 and arxiv.org/pdf/2003.08934.pdf, also arXiv:2101.03961 "
            "and https://arxiv.org/abs/solv-int/9701001v1 but not 2101.03961 alone or example.org/abs/1234.56789")
    assert find_arxiv_ids(text) == ["2101.03961", "2003.08934", "solv-int/9701001"]
