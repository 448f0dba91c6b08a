"""Small random-weight models from ``transformers`` (nothing downloaded), with inputs and a loss.

Each entry builds a model in eval-free training mode (dropout off, so eager and
compiled runs are deterministic) and example inputs for a batch and sequence
length, so tests can run a second size through the same compiled artifact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

transformers = __import__("pytest").importorskip("transformers")


@dataclass(frozen=True)
class ModelCase:
    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[torch.Generator, int, int], dict]  # (generator, batch, length) -> keyword inputs
    loss: Callable[[object], torch.Tensor]  # the model's output -> a scalar
    sizes: tuple[tuple[int, int], tuple[int, int]] = ((2, 16), (3, 12))  # (batch, length): first, second


def _no_dropout(config):
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "resid_pdrop", "embd_pdrop", "attn_pdrop",
                 "summary_first_dropout", "dropout", "attention_dropout"):
        if hasattr(config, name):
            setattr(config, name, 0.0)
    return config


def gpt2() -> torch.nn.Module:
    config = _no_dropout(transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=64, vocab_size=96))
    return transformers.GPT2LMHeadModel(config)


def bert() -> torch.nn.Module:
    config = _no_dropout(transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                                 intermediate_size=64, vocab_size=96, max_position_embeddings=64))
    return transformers.BertForMaskedLM(config)


def vit() -> torch.nn.Module:
    config = _no_dropout(transformers.ViTConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                                intermediate_size=64, image_size=16, patch_size=4, num_channels=3))
    return transformers.ViTModel(config, add_pooling_layer=True)


def resnet() -> torch.nn.Module:
    config = transformers.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
                                       num_channels=3)
    return transformers.ResNetModel(config)


def _tokens(g, batch, length):
    ids = torch.randint(0, 96, (batch, length), generator=g)
    return {"input_ids": ids, "labels": ids}


def _images(g, batch, size):
    return {"pixel_values": torch.randn(batch, 3, size, size, generator=g)}


MODELS = {
    "gpt2": ModelCase("gpt2", gpt2, _tokens, lambda out: out.loss),
    "bert": ModelCase("bert", bert, _tokens, lambda out: out.loss),
    "vit": ModelCase("vit", vit, lambda g, b, s: _images(g, b, 16), lambda out: out.pooler_output.square().mean(),
                     ((2, 16), (3, 16))),
    "resnet": ModelCase("resnet", resnet, lambda g, b, s: _images(g, b, s), lambda out: out.pooler_output.square().mean(),
                        ((2, 32), (3, 24))),
}
