"""What the lessons teach from: the image-classification pipeline, one module per stage, written to be read.

A lesson writes the calls it teaches in its own cells; what a later lesson reuses, and the stages around the one a
lesson is about, are here. The machinery around the lessons (settings, the cluster, the exercises' checks, the
stand-ins, serving plumbing, the benchmark) is the ``course`` package, imported by its own name.

==================  ====================================================================================================
module              stage
==================  ====================================================================================================
catalog             what the data sets are: class names, imagenette synsets, beans' split sizes
beans               reading beans (Hub or stand-in) into a ``DatasetDict``
ingest              Ray Data ingest of image folders: readable images, labels by file name, channels
cifar               CIFAR-10 parquet to arrays, normalisation, ``DataLoader``\\s
features            images to model inputs: the processor call, the dataset transform, the collator
models              the pretrained classifier (Auto classes): loading it with a new head, predict
vit                 the plain-PyTorch ViT of notebook 04 and its named architectures
loops               plain PyTorch epoch loops, and reporting an epoch (metrics + checkpoint) to Ray Train
train               Ray Train with Hugging Face: the workers' recipe and functions, the course's RunConfig
inference           the classifier class an actor pool runs and a Serve replica holds
metrics             accuracy with ``evaluate``, checks that a split is not empty, two accuracies compared (McNemar)
measure             measuring data pipelines (notebook 05): a tally actor, shuffledness, stand-in work, stamps
==================  ====================================================================================================

The stages read the course's settings, sources, storage and hardware from ``course.config``, ``course.sources``,
``course.storage`` and ``course.resources`` (and ``train.CrashAt`` one reach into Ray Train from ``course.internals``),
and nothing else of the machinery, so each can be read, and changed, on its own.
"""
