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
    build: Callable[..., torch.nn.Module]  # build(real=False): tiny for CPU tests, real=True: the GPU's sizes
    inputs: Callable[[torch.Generator, int, int], dict]  # (generator, batch, length) -> keyword inputs
    loss: Callable[[object], torch.Tensor]  # the model's output -> a scalar
    sizes: tuple[tuple[int, int], tuple[int, int]] = ((2, 16), (3, 12))  # (batch, length): first, second
    real_sizes: tuple[tuple[int, int], tuple[int, int]] = ((4, 256), (2, 192))

    def inference_inputs(self, g: torch.Generator, batch: int, length: int) -> dict:
        return {k: v for k, v in self.inputs(g, batch, length).items() if k != "labels"}


def main_output(out) -> torch.Tensor:
    """The tensor an inference test compares: the logits of a language model, else the last hidden state."""
    return out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state


def _no_dropout(config):
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "resid_pdrop", "embd_pdrop", "attn_pdrop",
                 "summary_first_dropout", "dropout", "attention_dropout"):
        if hasattr(config, name):
            setattr(config, name, 0.0)
    return config


def gpt2(real: bool = False) -> torch.nn.Module:
    size = dict(n_layer=6, n_embd=768, n_head=12, n_positions=1024) if real else dict(n_layer=2, n_embd=32, n_head=2, n_positions=64)
    model = transformers.GPT2LMHeadModel(_no_dropout(transformers.GPT2Config(vocab_size=96, **size)))
    # Named, so transformers' loss_function does not reach logger.warning_once (a graph break under Dynamo,
    # or none when an earlier test already warned: the graph counts would depend on the order of tests).
    model.loss_type = "ForCausalLM"
    return model


def bert(real: bool = False) -> torch.nn.Module:
    size = (dict(num_hidden_layers=4, hidden_size=768, num_attention_heads=12, intermediate_size=3072) if real else
            dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64))
    config = transformers.BertConfig(vocab_size=96, max_position_embeddings=512 if real else 64, **size)
    return transformers.BertForMaskedLM(_no_dropout(config))


def vit(real: bool = False) -> torch.nn.Module:
    size = (dict(num_hidden_layers=12, hidden_size=192, num_attention_heads=3, intermediate_size=768, image_size=224,
                 patch_size=16) if real else
            dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64, image_size=16, patch_size=4))
    return transformers.ViTModel(_no_dropout(transformers.ViTConfig(num_channels=3, **size)), add_pooling_layer=True)


def resnet(real: bool = False) -> torch.nn.Module:
    size = (dict(embedding_size=64, hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2]) if real else  # ResNet-18
            dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1]))
    return transformers.ResNetModel(transformers.ResNetConfig(layer_type="basic", num_channels=3, **size))


def _tokens(g, batch, length):
    ids = torch.randint(0, 96, (batch, length), generator=g)
    return {"input_ids": ids, "labels": ids}


def _images(g, batch, size):
    return {"pixel_values": torch.randn(batch, 3, size, size, generator=g)}


def _pooled(out) -> torch.Tensor:
    return out.pooler_output.square().mean()


MODELS = {
    "gpt2": ModelCase("gpt2", gpt2, _tokens, lambda out: out.loss),
    "bert": ModelCase("bert", bert, _tokens, lambda out: out.loss, real_sizes=((8, 128), (4, 96))),
    # ViT's position embeddings fix the image size: the second size is a second batch
    "vit": ModelCase("vit", vit, lambda g, b, s: _images(g, b, s), _pooled, ((2, 16), (3, 16)), ((16, 224), (8, 224))),
    "resnet": ModelCase("resnet", resnet, lambda g, b, s: _images(g, b, s), _pooled, ((2, 32), (3, 24)),
                        ((16, 224), (8, 160))),
}
