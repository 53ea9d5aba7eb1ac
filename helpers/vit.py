"""A Vision Transformer in plain PyTorch (torchvision cannot be installed next to the CPU torch)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Architecture:
    """The shape of a ViT (its architecture): image and patch size, depth, width, and number of classes."""

    image_size: int = 32
    patch_size: int = 4
    num_layers: int = 12
    num_heads: int = 8
    hidden_dim: int = 384
    mlp_dim: int = 768
    num_classes: int = 10


FULL = Architecture()  # the CIFAR-10 tutorial's model: about 14.3 M parameters, for GPUs
SMALL = Architecture(num_layers=4, num_heads=4, hidden_dim=128, mlp_dim=256)  # about 0.55 M: minutes on a CPU


class VisionTransformer(nn.Module):
    """Patches -> linear embedding + class token + positions -> transformer encoder -> linear head."""

    def __init__(self, arch: Architecture, dropout: float = 0.0) -> None:
        super().__init__()
        if arch.image_size % arch.patch_size:
            raise ValueError(f"image_size {arch.image_size} is not a multiple of patch_size {arch.patch_size}")
        num_patches = (arch.image_size // arch.patch_size) ** 2
        self.embed = nn.Conv2d(3, arch.hidden_dim, kernel_size=arch.patch_size, stride=arch.patch_size)
        self.class_token = nn.Parameter(torch.zeros(1, 1, arch.hidden_dim))
        self.positions = nn.Parameter(torch.randn(1, num_patches + 1, arch.hidden_dim) * 0.02)
        layer = nn.TransformerEncoderLayer(
            arch.hidden_dim, arch.num_heads, arch.mlp_dim, dropout, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, arch.num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(arch.hidden_dim)
        self.head = nn.Linear(arch.hidden_dim, arch.num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Class logits (N, classes) for images (N, 3, H, W)."""
        patches = self.embed(images).flatten(2).transpose(1, 2)  # (N, patches, hidden)
        tokens = torch.cat([self.class_token.expand(len(images), -1, -1), patches], dim=1) + self.positions
        return self.head(self.norm(self.encoder(tokens)[:, 0]))


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters of a model."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


ARCHITECTURES = {"small": SMALL, "full": FULL}  # the names a budget uses (course.budget.Budget.cifar.architecture)


def architecture_named(name: str) -> Architecture:
    """The architecture called ``name`` in the course configuration (``small`` or ``full``)."""
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown ViT architecture {name!r}: use one of {sorted(ARCHITECTURES)}")
    return ARCHITECTURES[name]
