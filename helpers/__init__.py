"""The package the course notebooks share. One module per thing it holds:

==================  ==========================================================================================
module              what it holds
==================  ==========================================================================================
config              the settings, in one place: paths, sources (``COURSE_SOURCES``), the budget
                    (``COURSE_BUDGET``), storage, run names, checkpoints kept, ``COURSE_VERBOSE``
catalog             what the data sets are: class names, imagenette synsets, beans' split sizes
synthetic           the stand-in generator: leaves, dogs and fish, CIFAR-like shapes, from fixed seeds
build               ``make data``: writes the stand-ins and pretrains the stand-in ViT checkpoint
beans               reading beans (Hub or stand-in) into a ``DatasetDict``; its class names
ingest              Ray Data ingest of image folders: readable images, labels by file name, channels
cifar               CIFAR-10 parquet to arrays, normalisation, ``DataLoader``\\s
features            images to ViT inputs: the processor call, the dataset transform, the collator
models              Hugging Face ViT classifiers: loading with a new head, the stand-in config, predict
vit                 the plain-PyTorch ViT of notebook 04 and its named architectures
loops               plain PyTorch epoch loops, and reporting an epoch (metrics + checkpoint) to Ray Train
train               Ray Train with Hugging Face: the workers' recipe and functions, the course's RunConfig
inference           inference: the classifier class an actor pool runs, and a Serve replica holds
serving             notebook 06's plumbing around Ray Serve: the model to serve, a request's image or its 4xx, a
                    bounded load test, watching replicas, the page people use
metrics             accuracy with ``evaluate``, and checks that a split is not empty
resources           hardware: a GPU in this process, precision, and the plan of workers and actors
cluster             connecting to Ray: the job's runtime env (code, settings), loopback on this machine, shared paths,
                    quiet workers; Ray Data's settings
distributed         how Ray Train's workers connect torch.distributed: on 127.0.0.1 when Ray runs on this machine
worker_setup        what every Ray worker of the course does first: Ray Train's info lines kept out; on this machine,
                    the servers it starts (Serve's replicas') on 127.0.0.1
measure             tools to measure data pipelines: a tally actor, shuffledness, stand-in work, timestamps
benchmark           ``make bench``'s measurements: timed epochs and runs of ingest, training, batch inference
results             each notebook's headline figure, checked against its floor, for `make run`'s table
plots               image grids, training curves, confusion matrices
display             small metric tables in a notebook
exercises           the checks of the "Your turn" exercises: a verdict with a hint, never an exception
exercises_ray_core  lesson 00's checks (Ray Core): tasks collected as they finish, a tally actor
exercises_tune      lesson 07's checks (Ray Tune): a search space and scheduler, the best trial of a ResultGrid
==================  ==========================================================================================

Words used one way everywhere: *sources* (where data and the pretrained model come from), *budget*
(how much work: steps, batch sizes, learning rates, architectures, workers), *plan* (what to ask Ray
for), *architecture* (the shape of a ViT), *class_names* (the list of a data set's class names),
*label* (one example's class name) and *label ids* (class indices), *loop_config* (the dict a Ray
Train worker function receives), *headline* (the one figure a notebook records).
"""
