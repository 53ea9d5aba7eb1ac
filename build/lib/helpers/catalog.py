"""What the course's data sets are, whichever source they come from: class names, synsets, split sizes.

Both the real-data path (``ingest``) and the stand-in generator (``course.standins``) read these facts from
here; neither imports the other.
"""

from __future__ import annotations

BEANS_CLASSES = ["angular_leaf_spot", "bean_rust", "healthy"]
BEANS_SPLITS = {"train": 1034, "validation": 133, "test": 128}  # images per split of the real beans

# The two imagenette classes of notebook 03, by the synset folder names imagenette uses.
IMAGENETTE_SYNSETS = {"n02102040": "dog", "n01440764": "fish"}  # English springer, tench

CIFAR10_CLASSES = [
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
]  # fmt: skip
