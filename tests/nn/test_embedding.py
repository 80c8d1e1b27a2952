"""Token embeddings: ids and token types are range-checked at the lookup (a ValueError, not an IndexError)."""

import pytest
import torch

from paperzoo.nn.embedding import TokenEmbeddings, check_token_ids
from paperzoo.nn.transformer import TextEncoder, TextEncoderConfig


def test_ids_outside_the_vocabulary_raise_value_error_naming_the_size_and_the_value():
    emb = TokenEmbeddings(10, 8, max_len=4, type_vocab_size=2)
    ids = torch.tensor([[1, 2, 10]])
    with pytest.raises(ValueError, match=r"input_ids must be in \[0, 10\).*vocab_size=10.*max 10"):
        emb(ids)
    with pytest.raises(ValueError, match=r"input_ids must be in \[0, 10\).*min -1"):
        emb(torch.tensor([[1, -1, 3]]))
    assert emb(torch.tensor([[0, 9, 3]])).shape == (1, 3, 8)  # the edges of the range are valid


def test_token_types_outside_type_vocab_size_raise():
    emb = TokenEmbeddings(10, 8, max_len=4, type_vocab_size=2)
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match=r"token_type_ids must be in \[0, 2\).*type_vocab_size=2.*max 2"):
        emb(ids, torch.tensor([[0, 1, 2]]))
    with pytest.raises(ValueError, match=r"token_type_ids must be in \[0, 2\)"):
        emb(ids, torch.tensor([[0, -1, 1]]))
    assert emb(ids, torch.tensor([[0, 1, 1]])).shape == (1, 3, 8)


def test_text_encoder_checks_ids_and_types():
    model = TextEncoder(TextEncoderConfig.bert(dim=32, num_layers=1, num_heads=4, ffn_dim=64, vocab_size=50))
    with pytest.raises(ValueError, match="vocab_size=50"):
        model(torch.tensor([[1, 50]]))
    with pytest.raises(ValueError, match="type_vocab_size=2"):
        model(torch.tensor([[1, 2]]), token_type_ids=torch.tensor([[0, 3]]))


def test_check_token_ids_is_skipped_on_meta_and_empty_tensors():
    check_token_ids(torch.zeros(2, 0, dtype=torch.long), 5)
    check_token_ids(torch.empty(2, 3, dtype=torch.long, device="meta"), 5)
    with pytest.raises(ValueError, match="ids must be in"):
        check_token_ids(torch.tensor([5]), 5, "ids")


@pytest.mark.parametrize("position", ["learned", "sinusoidal"])
def test_concatenated_positions_fill_their_own_channels(position):
    torch.manual_seed(0)
    emb = TokenEmbeddings(50, 16, max_len=8, position=position, norm_eps=None, concat_position_dim=6)
    assert emb.word.embedding_dim == 10
    ids = torch.randint(0, 50, (3, 8))
    out = emb(ids)
    assert out.shape == (3, 8, 16)
    torch.testing.assert_close(out[..., :10], emb.word(ids))  # token channels: the token alone
    pos = emb.position(8)
    torch.testing.assert_close(out[..., 10:], pos.expand(3, -1, -1))  # position channels: the position alone
    added = TokenEmbeddings(50, 16, max_len=8, position=position, norm_eps=None)
    assert added.word.embedding_dim == 16
    with pytest.raises(ValueError, match=r"concat_position_dim must be an int in \[0, embedding_dim=16\)"):
        TokenEmbeddings(50, 16, position=position, concat_position_dim=16)
    with pytest.raises(ValueError, match="needs a position table"):
        TokenEmbeddings(50, 16, position="none", concat_position_dim=4)
