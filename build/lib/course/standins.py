"""Synthetic stand-ins for the course data, drawn from a fixed seed.

They are not the real data sets: they are small, offline images built so that a small
ViT must really train to classify them. Each image depends only on (seed, split, index),
so a rebuild gives the same files.
"""

from __future__ import annotations

import colorsys
import zlib

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from helpers.catalog import BEANS_CLASSES

IMAGENETTE_SPLITS = {"train": 300, "val": 100}  # images per class
GRAYSCALE_SHARE = 0.04  # imagenette has a few percent grayscale JPEGs too

CIFAR10_SPLITS = {"train": 10000, "test": 2000}

SEED = 2026


def rng_for(name: str, split: str, index: int, seed: int = SEED) -> np.random.Generator:
    """A generator that depends only on the data set, split, image index and seed."""
    return np.random.default_rng([seed, zlib.crc32(f"{name}/{split}".encode()), index])


def _noisy(img: Image.Image, rng: np.random.Generator, sigma: float) -> Image.Image:
    """Add Gaussian pixel noise and a random blur, as a cheap camera."""
    img = img.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(0.3, 1.0))))
    arr = np.asarray(img, dtype=np.float32)
    arr = arr * rng.uniform(0.8, 1.2) + rng.normal(0, sigma, arr.shape)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def _color(rng: np.random.Generator, base: tuple[int, int, int], spread: int) -> tuple[int, int, int]:
    return tuple(int(np.clip(c + rng.integers(-spread, spread + 1), 0, 255)) for c in base)


def _texture(rng: np.random.Generator, size: int, base: tuple[int, int, int], spread: int) -> Image.Image:
    """A blotchy background: a coarse random field upsampled to ``size``."""
    shade = rng.uniform(-spread, spread, (6, 6, 1))  # light and shadow, shared by the channels
    tint = rng.uniform(-spread / 3, spread / 3, (6, 6, 3))
    coarse = np.array(base) + shade + tint
    img = Image.fromarray(np.clip(coarse, 0, 255).astype(np.uint8))
    return img.resize((size, size), Image.Resampling.BICUBIC)


# --- beans-like leaves ------------------------------------------------------------------


def _polygon(rng: np.random.Generator, cx: float, cy: float, r: float, n: int) -> list[tuple[float, float]]:
    angles = np.sort(rng.uniform(0, 2 * np.pi, n))
    radii = r * rng.uniform(0.6, 1.0, n)
    return [(cx + a * np.cos(t), cy + a * np.sin(t)) for a, t in zip(radii, angles, strict=True)]


def leaf_image(label: int, rng: np.random.Generator, size: int = 96) -> Image.Image:
    """A leaf on soil: healthy, with angular brown spots, or with small round rust pustules."""
    img = _texture(rng, size, (110, 90, 70), 40)
    mask = Image.new("L", (size, size), 0)
    ImageDraw.Draw(mask).ellipse(
        [size * rng.uniform(0.05, 0.2), size * rng.uniform(0.2, 0.35),
         size * rng.uniform(0.8, 0.95), size * rng.uniform(0.65, 0.8)], fill=255,
    )  # fmt: skip
    mask = mask.rotate(float(rng.uniform(0, 180)), resample=Image.Resampling.BILINEAR)
    leaf = _texture(rng, size, _color(rng, (70, 140, 55), 25), 18)
    draw = ImageDraw.Draw(leaf)
    c = size / 2
    vein = _color(rng, (120, 175, 95), 20)
    draw.line([(c - size * 0.4, c), (c + size * 0.4, c)], fill=vein, width=1)
    for x in np.linspace(c - size * 0.3, c + size * 0.3, 5):
        draw.line([(x, c), (x + size * 0.1, c - size * 0.15)], fill=vein, width=1)
        draw.line([(x, c), (x + size * 0.1, c + size * 0.15)], fill=vein, width=1)
    points = np.argwhere(np.asarray(mask) > 128)
    name = BEANS_CLASSES[label]
    n_spots = {"angular_leaf_spot": (5, 12), "bean_rust": (12, 35), "healthy": (0, 4)}[name]
    for y, x in points[rng.integers(0, len(points), rng.integers(*n_spots))]:
        if name == "angular_leaf_spot":
            r = rng.uniform(3.5, 6.5)
            draw.polygon(_polygon(rng, x, y, r * 1.5, 5), fill=_color(rng, (170, 170, 70), 25))
            draw.polygon(_polygon(rng, x, y, r, int(rng.integers(4, 7))), fill=_color(rng, (115, 80, 45), 20))
        elif name == "bean_rust":
            r = rng.uniform(1.6, 2.8)
            draw.ellipse([x - r, y - r, x + r, y + r], fill=_color(rng, (185, 95, 40), 25))
        else:  # a healthy leaf still has the odd faint blemish
            r = rng.uniform(1.0, 3.5)
            draw.ellipse([x - r, y - r, x + r, y + r], fill=_color(rng, (95, 125, 60), 20))
    img.paste(leaf, (0, 0), mask)
    return _noisy(img, rng, sigma=10)


# --- imagenette-like dogs and fish ------------------------------------------------------


def _animal(draw: ImageDraw.ImageDraw, rng: np.random.Generator, kind: str, size: int) -> None:
    s = size * rng.uniform(0.75, 1.1)
    x0, y0 = size * rng.uniform(0.35, 0.65), size * rng.uniform(0.4, 0.6)
    if kind == "dog":  # a body, a head with two drooping ears, four legs
        fur = _color(rng, [(120, 80, 45), (40, 35, 30), (215, 205, 190), (190, 140, 80)][rng.integers(4)], 25)
        for dx in (-0.25, -0.12, 0.12, 0.25):
            draw.rectangle([x0 + dx * s - s * 0.03, y0, x0 + dx * s + s * 0.03, y0 + s * 0.3], fill=fur)
        draw.ellipse([x0 - s * 0.32, y0 - s * 0.13, x0 + s * 0.32, y0 + s * 0.13], fill=fur)
        hx, hy = x0 + s * 0.3 * rng.choice([-1, 1]), y0 - s * 0.18
        draw.ellipse([hx - s * 0.13, hy - s * 0.13, hx + s * 0.13, hy + s * 0.13], fill=fur)
        ear = _color(rng, fur, 30)
        for ex in (-0.11, 0.11):
            draw.polygon([(hx + ex * s, hy - s * 0.08), (hx + ex * s * 1.6, hy + s * 0.15),
                          (hx + ex * s * 0.6, hy + s * 0.1)], fill=ear)  # fmt: skip
    else:  # a spindle-shaped body, a forked tail, a fin and an eye
        scale = _color(rng, [(95, 110, 60), (200, 120, 50), (170, 175, 165), (120, 130, 80)][rng.integers(4)], 25)
        d = rng.choice([-1, 1])
        draw.ellipse([x0 - s * 0.33, y0 - s * 0.1, x0 + s * 0.33, y0 + s * 0.1], fill=scale)
        tx = x0 - d * s * 0.3
        draw.polygon([(tx, y0), (tx - d * s * 0.18, y0 - s * 0.14), (tx - d * s * 0.12, y0),
                      (tx - d * s * 0.18, y0 + s * 0.14)], fill=scale)  # fmt: skip
        draw.polygon([(x0 - s * 0.05, y0 - s * 0.08), (x0 + s * 0.08, y0 - s * 0.2), (x0 + s * 0.12, y0 - s * 0.07)],
                     fill=_color(rng, scale, 30))  # fmt: skip
        ex, ey = x0 + d * s * 0.22, y0 - s * 0.02
        draw.ellipse([ex - 1.5, ey - 1.5, ex + 1.5, ey + 1.5], fill=(20, 20, 20))


def animal_image(kind: str, rng: np.random.Generator, size: int = 80) -> Image.Image:
    """A dog or a fish on grass, floor or water, with a little clutter."""
    ground = [(90, 130, 60), (150, 130, 110), (60, 100, 140), (120, 120, 120)][rng.integers(4)]
    img = _texture(rng, size, _color(rng, ground, 20), 35)
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(0, 4))):  # clutter: sticks and stones
        x, y, r = rng.uniform(0, size, 2).tolist() + [rng.uniform(2, 7)]
        draw.ellipse([x - r, y - r * 0.6, x + r, y + r * 0.6], fill=_color(rng, (120, 110, 100), 60))
    _animal(draw, rng, kind, size)
    return _noisy(img, rng, sigma=8)


# --- CIFAR-10-like shapes ---------------------------------------------------------------

_SHAPES = ["circle", "square", "triangle", "hbar", "vbar", "ring", "cross", "diamond", "dots", "diagonal"]


def _class_hue(label: int, rng: np.random.Generator) -> tuple[int, int, int]:
    """Each class leans to its own hue, with overlap; one image in four takes any hue (as in photos)."""
    hue = rng.uniform(0, 1) if rng.uniform() < 0.25 else (label / 10 + rng.normal(0, 0.06)) % 1
    rgb = colorsys.hsv_to_rgb(hue, rng.uniform(0.55, 1.0), rng.uniform(0.6, 1.0))
    return tuple(int(255 * c) for c in rgb)


def shape_image(label: int, rng: np.random.Generator, size: int = 32) -> np.ndarray:
    """A 32x32 RGB image of one of ten shapes, on a random dull background, as uint8 HxWx3."""
    img = _texture(rng, size, _color(rng, (90, 90, 90), 50), 30)
    draw = ImageDraw.Draw(img)
    fg = _class_hue(label, rng)
    cx, cy = rng.uniform(11, 21, 2)
    r = rng.uniform(6, 10)
    shape = _SHAPES[label]
    if shape == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fg)
    elif shape == "square":
        draw.rectangle([cx - r, cy - r, cx + r, cy + r], fill=fg)
    elif shape == "triangle":
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=fg)
    elif shape == "hbar":
        draw.rectangle([cx - r * 1.3, cy - r * 0.3, cx + r * 1.3, cy + r * 0.3], fill=fg)
    elif shape == "vbar":
        draw.rectangle([cx - r * 0.3, cy - r * 1.3, cx + r * 0.3, cy + r * 1.3], fill=fg)
    elif shape == "ring":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], outline=fg, width=3)
    elif shape == "cross":
        draw.line([(cx - r, cy), (cx + r, cy)], fill=fg, width=3)
        draw.line([(cx, cy - r), (cx, cy + r)], fill=fg, width=3)
    elif shape == "diamond":
        draw.polygon([(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)], fill=fg)
    elif shape == "dots":
        for dx in (-r * 0.6, r * 0.6):
            draw.ellipse([cx + dx - 2.5, cy - 2.5, cx + dx + 2.5, cy + 2.5], fill=fg)
    else:  # diagonal
        draw.line([(cx - r, cy - r), (cx + r, cy + r)], fill=fg, width=3)
    return np.asarray(_noisy(img, rng, sigma=10))
