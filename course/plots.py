"""Plots the notebooks share: image grids, training curves, predictions."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from PIL import Image


def image_grid(
    images: Sequence[Image.Image | np.ndarray],
    titles: Sequence[str],
    ncols: int = 6,
    colors: Sequence[str] | None = None,
) -> Figure:
    """Images in a grid, each with its title (optionally coloured, e.g. green right / red wrong)."""
    nrows = int(np.ceil(len(images) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(2 * ncols, 2.2 * nrows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        ax.axis("off")
        if i < len(images):
            image = np.asarray(images[i]).squeeze()
            ax.imshow(image, cmap="gray" if image.ndim == 2 else None)
            ax.set_title(titles[i], fontsize=9, color=colors[i] if colors else "black")
    fig.tight_layout()
    return fig


def prediction_grid(
    images: Sequence[Image.Image | np.ndarray], predicted: Sequence[str], actual: Sequence[str], ncols: int = 6
) -> Figure:
    """Images titled ``predicted (true)``: green when right, red when wrong."""
    titles = [f"{p}\n(true: {a})" for p, a in zip(predicted, actual, strict=True)]
    colors = ["green" if p == a else "red" for p, a in zip(predicted, actual, strict=True)]
    return image_grid(images, titles, ncols=ncols, colors=colors)


def training_curves(log_history: list[dict]) -> Figure:
    """Training loss, validation loss and validation accuracy against the step, from ``Trainer`` logs."""
    logs = pd.DataFrame(log_history)
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 3.5))
    train = logs.dropna(subset=["loss"]) if "loss" in logs else logs.iloc[:0]
    evals = logs.dropna(subset=["eval_loss"]) if "eval_loss" in logs else logs.iloc[:0]
    ax_loss.plot(train["step"], train["loss"], label="training loss")
    ax_loss.plot(evals["step"], evals["eval_loss"], "o-", label="validation loss")
    ax_loss.set(xlabel="step", ylabel="loss", title="Loss")
    ax_loss.legend()
    if "eval_accuracy" in evals:
        ax_acc.plot(evals["step"], evals["eval_accuracy"], "o-", color="tab:green")
    ax_acc.set(xlabel="step", ylabel="accuracy", title="Validation accuracy", ylim=(0, 1.02))
    fig.tight_layout()
    return fig


def confusion_matrix(actual: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> Figure:
    """Counts of (true, predicted) label pairs as a heat map: the diagonal is right, the rest is wrong."""
    index = {name: i for i, name in enumerate(labels)}
    counts = np.zeros((len(labels), len(labels)), dtype=int)
    for a, p in zip(actual, predicted, strict=True):
        counts[index[a], index[p]] += 1
    fig, ax = plt.subplots(figsize=(1.2 * len(labels) + 2, 1.2 * len(labels) + 1.5))
    ax.imshow(counts, cmap="Blues")
    for (i, j), n in np.ndenumerate(counts):
        ax.text(j, i, str(n), ha="center", va="center", color="white" if n > counts.max() / 2 else "black")
    ax.set(xticks=range(len(labels)), yticks=range(len(labels)), xticklabels=labels, yticklabels=labels)
    ax.set(xlabel="predicted", ylabel="true", title="Confusion matrix")
    fig.tight_layout()
    return fig


def load_test_comparison(summaries: dict[str, dict[str, float]]) -> Figure:
    """Load tests side by side (``LoadTest.summary()`` by name): throughput, and p50 and p95 latency."""
    names = list(summaries)
    fig, (ax_rate, ax_latency) = plt.subplots(1, 2, figsize=(10, 3.2))
    rates = [summaries[name]["throughput (req/s)"] for name in names]
    ax_rate.bar(names, rates, color=["tab:gray", "tab:green", "tab:blue"][: len(names)])
    for i, rate in enumerate(rates):
        ax_rate.text(i, rate, f"{rate:.0f}", ha="center", va="bottom")
    ax_rate.set(ylabel="requests per second", title="Throughput (higher is better)")
    x = np.arange(len(names))
    for offset, key, color in ((-0.2, "p50 latency (ms)", "tab:olive"), (0.2, "p95 latency (ms)", "tab:red")):
        values = [summaries[name][key] for name in names]
        ax_latency.bar(x + offset, values, width=0.4, label=key.split()[0], color=color)
    ax_latency.set(xticks=x, xticklabels=names, ylabel="milliseconds", title="Latency (lower is better)")
    ax_latency.legend()
    fig.tight_layout()
    return fig


def elastic_run(
    steps: Sequence[tuple[float, int, int, int]], began: float, events: dict[str, float], gap_s: float = 2.0
) -> Figure:
    """An elastic run over time (notebook 02c), from rank 0's steps ``(time, rank, world size, step)``: its world size
    above, a line through each stretch of steps and none across a restart (a pause of over ``gap_s``, or a new world
    size), its steps per second below (over windows of 2 s), with each of ``events`` (a name, a time) marked."""
    rows = pd.DataFrame(steps, columns=["time", "rank", "world_size", "step"])
    rows = rows[rows["rank"] == 0].sort_values("time").assign(seconds=lambda r: r["time"] - began)
    window = 2.0
    rate = rows.groupby((rows["seconds"] // window) * window).size() / window
    fig, (ax_size, ax_rate) = plt.subplots(2, 1, figsize=(9, 4.5), sharex=True)
    restarted = (rows["world_size"].diff() != 0) | (rows["seconds"].diff() > gap_s)
    for _, stretch in rows.groupby(restarted.cumsum()):
        ax_size.plot(stretch["seconds"], stretch["world_size"], ".-", color="tab:blue")
    ax_size.set(ylabel="world size", yticks=[0, 1, 2], ylim=(0, 2.5), title="An elastic run: a node leaves, comes back")
    ax_rate.bar(rate.index + window / 2, rate.values, width=window * 0.9, color="tab:orange")
    ax_rate.set(xlabel="seconds since the run started", ylabel="steps per second")
    for name, at in events.items():
        for ax in (ax_size, ax_rate):
            ax.axvline(at - began, color="gray", linestyle="--")
        ax_size.annotate(name, (at - began, 2.3), xytext=(3, 0), textcoords="offset points", fontsize=9)
    fig.tight_layout()
    return fig
