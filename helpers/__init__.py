"""The package the course notebooks share, in four layers; each imports only from the layers above it in this list.

==========================  ============================================================================================
module                      what it holds
==========================  ============================================================================================
**course/**                 the course's plumbing: what every lesson stands on, and no lesson teaches
course.lessons              the lessons, one record each: notebook, title, headline and floor, exercises, budget section
course.config               the settings, in one place: paths, sources (``COURSE_SOURCES``), the pretrained model
                            (``COURSE_MODEL``), the budget (``COURSE_BUDGET``) with a section per lesson, storage
course.cluster              connecting to Ray: the job's runtime env (code, settings), loopback on this machine, shared
                            paths, quiet workers; Ray Data's settings
course.distributed          how a trainer's workers find each other: torch.distributed, XGBoost and TensorFlow on
                            127.0.0.1 when Ray runs on this machine
course.worker_setup         what every Ray worker of the course does first: Ray Train's info lines kept out; on this
                            machine, the servers it starts (Serve's replicas') on 127.0.0.1
course.resources            hardware: a GPU in this process, precision, and the plan of workers and actors
course.results              each notebook's headline figure, checked against its floor, for `make run`'s table
course.plots                image grids, training curves, confusion matrices
course.display              small metric tables in a notebook
**pipeline/**               the image-classification pipeline the lessons teach from (their cells call it, or copy it)
pipeline.catalog            what the data sets are: class names, imagenette synsets, beans' split sizes
pipeline.beans              reading beans (Hub or stand-in) into a ``DatasetDict``; its class names
pipeline.ingest             Ray Data ingest of image folders: readable images, labels by file name, channels
pipeline.cifar              CIFAR-10 parquet to arrays, normalisation, ``DataLoader``\\s
pipeline.features           images to model inputs: the processor call, the dataset transform, the collator
pipeline.models             the pretrained classifier (Auto classes): loading it with a new head, the stand-in, predict
pipeline.vit                the plain-PyTorch ViT of notebook 04 and its named architectures
pipeline.loops              plain PyTorch epoch loops, and reporting an epoch (metrics + checkpoint) to Ray Train
pipeline.train              Ray Train with Hugging Face: the workers' recipe and functions, the course's RunConfig
pipeline.inference          inference: the classifier class an actor pool runs, and a Serve replica holds
pipeline.serving            notebook 06's plumbing around Ray Serve: the model to serve, a request's image or its 4xx,
                            a bounded load test, watching replicas, the page people use
pipeline.metrics            accuracy with ``evaluate``, and checks that a split is not empty
pipeline.measure            measuring data pipelines (notebook 05): a tally actor, shuffledness, stand-in work, stamps
**exercises/**              the checks of the "Your turn" exercises: a verdict with a hint, never an exception
exercises.checking          the rules every check follows: a thread with a time limit, the verdict, its record
exercises.train_runs        running a learner's function on Ray Train workers, each watched (02b and 04)
exercises.<lesson>          one module per lesson, named as its notebook without the number (``ray_data``: 03)
**tools/**                  the course's tools, not used by any lesson
tools.synthetic             the stand-in generator: leaves, dogs and fish, CIFAR-like shapes, from fixed seeds
tools.build                 ``make data``: writes the stand-ins and pretrains the stand-in model
tools.benchmark             ``make bench``'s measurements: timed epochs and runs of ingest, training, batch inference
==========================  ============================================================================================

Words used one way everywhere: *lesson* (a notebook and its record in ``course.lessons``), *sources* (where data and the
pretrained model come from), *budget* (how much work: steps, batch sizes, learning rates, architectures, workers; one
section per lesson), *plan* (what to ask Ray for), *architecture* (the shape of notebook 04's ViT), *class_names* (the
list of a data set's class names), *label* (one example's class name) and *label ids* (class indices), *loop_config*
(the dict a Ray Train worker function receives), *headline* (the one figure a notebook records, with its floor).
"""
