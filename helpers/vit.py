"""A Vision Transformer in plain PyTorch (torchvision cannot be installed next to the CPU torch)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ViTSize:
    """The shape of a ViT: image and patch size, depth, width, and number of classes."""

    image_size: int = 32
    patch_size: int = 4
    num_layers: int = 12
    num_heads: int = 8
    hidden_dim: int = 384
    mlp_dim: int = 768
    num_classes: int = 10


FULL = ViTSize()  # the CIFAR-10 tutorial's model: about 14.3 M parameters, for GPUs
SMALL = ViTSize(num_layers=4, num_heads=4, hidden_dim=128, mlp_dim=256)  # about 0.55 M: minutes on a CPU


class VisionTransformer(nn.Module):
    """Patches -> linear embedding + class token + positions -> transformer encoder -> linear head."""

    def __init__(self, size: ViTSize, dropout: float = 0.0) -> None:
        super().__init__()
        if size.image_size % size.patch_size:
            raise ValueError(f"image_size {size.image_size} is not a multiple of patch_size {size.patch_size}")
        num_patches = (size.image_size // size.patch_size) ** 2
        self.embed = nn.Conv2d(3, size.hidden_dim, kernel_size=size.patch_size, stride=size.patch_size)
        self.class_token = nn.Parameter(torch.zeros(1, 1, size.hidden_dim))
        self.positions = nn.Parameter(torch.randn(1, num_patches + 1, size.hidden_dim) * 0.02)
        layer = nn.TransformerEncoderLayer(
            size.hidden_dim, size.num_heads, size.mlp_dim, dropout, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, size.num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(size.hidden_dim)
        self.head = nn.Linear(size.hidden_dim, size.num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Class logits (N, classes) for images (N, 3, H, W)."""
        patches = self.embed(images).flatten(2).transpose(1, 2)  # (N, patches, hidden)
        tokens = torch.cat([self.class_token.expand(len(images), -1, -1), patches], dim=1) + self.positions
        return self.head(self.norm(self.encoder(tokens)[:, 0]))


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters of a model."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


SIZES = {"small": SMALL, "full": FULL}


def size_named(name: str) -> ViTSize:
    """The ViT size called ``name`` in the course configuration (``small`` or ``full``)."""
    if name not in SIZES:
        raise ValueError(f"unknown ViT size {name!r}: use one of {sorted(SIZES)}")
    return SIZES[name]
