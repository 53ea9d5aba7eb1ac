"""The course's machinery: everything around the lessons that no lesson teaches. What the lessons teach from is the
``helpers`` package; the two travel together to every Ray worker (``cluster.job_runtime_env``).

==========================  ============================================================================================
module                      what it holds
==========================  ============================================================================================
lessons                     the lessons, one record each: notebook, title, headline and floor, exercises, budget section
lesson_record               what one lesson's record holds (``Lesson``): its fields, and the names derived from them
claims                      what a lesson's measurements show: a ratio of two recorded figures, with what it times
settings                    every ``COURSE_*`` variable, declared once (meaning, default, allowed values) and checked
                            where it is read; the Makefile and the shell scripts read it too (standard library only)
config                      the paths, and every setting by name, each read and checked through ``settings``
budget                      how much work each lesson does (``COURSE_BUDGET``, ``COURSE_SMOKE``): a section per
                            lesson, the cpu and gpu values, the real sources' knobs, the smoke size
budget_sections             the sections of the budget, one frozen dataclass of knobs per lesson
checked                     the rules a budget and each of its sections check when they are made
sources                     where data and the pretrained model come from (``COURSE_SOURCES``, ``COURSE_MODEL``): the
                            stand-ins or the Hub and S3, and what is missing, with its fix
storage                     where Ray's workers write (``COURSE_STORAGE_PATH``), run names, checkpoints kept; files of
                            a local path or a bucket through one pyarrow filesystem
tracking                    where MLflow runs go (``COURSE_TRACKING_URI``, ``MLFLOW_TRACKING_URI`` wins), whether it
                            answers (one line if not), MLflow imported only where used
cluster                     connecting to Ray: the job's runtime env (code, settings), loopback on this machine, shared
                            paths, quiet workers; Ray Data's settings
distributed                 how a trainer's workers find each other: torch.distributed, XGBoost and TensorFlow on
                            127.0.0.1 when Ray runs on this machine
worker_setup                what every Ray worker of the course does first: Ray Train's info lines kept out; on this
                            machine, the servers it starts (Serve's replicas') on 127.0.0.1
internals                   every reach into Ray's, torch's and transformers' internals, each with the release it was
                            written for and what it relies on (``tests/unit/test_internals.py`` watches them)
resources                   hardware: a GPU in this process, precision, and the plan of workers and actors
gpu_memory                  each lesson's GPU memory and time, estimated from its budget, plan and models (the doctor)
deadline                    running code that may hang or fail: under a time limit, its error in one line (the checks,
                            the doctor)
links                       what the repository URL pyproject.toml declares (if any) gives: the "Open in Colab" links,
                            and each lesson's install cell
results                     each notebook's headline figure, checked against its floor, for `make run`'s table
plots                       image grids, training curves, confusion matrices
display                     small metric tables in a notebook
serving                     notebook 06's plumbing around Ray Serve: the model to serve, a request's image or its 4xx,
                            a bounded load test, watching replicas, the page people use
standins                    the stand-in generator: leaves, dogs and fish, CIFAR-like shapes, from fixed seeds
build                       ``make data``: writes the stand-ins and pretrains the stand-in model
benchmark                   ``make bench``'s measurements: timed epochs and runs of ingest, training, batch inference
exercises.checking          the rules every check follows: a thread with a time limit, the verdict, its record
exercises.train_runs        running a learner's function on Ray Train workers, each watched (02b and 04)
exercises.task_watch        00.1's clock over the learner's tasks, and what it tells: at once, held back, why late
exercises.classifier_judge  03.1's run of the learner's actor class here, on batches as an actor gets them (model loads
                            and forward passes counted), and its findings
exercises.cifar10_judge     04.2's judging of a finished run: the check's model and data, the reports, the checkpoint,
                            the workers' agreement, the model's skill
exercises.search_space      07.1's search space, sampled as Tune does: ``lr`` log-uniform, ``batch_size`` a choice
exercises.<lesson>          one module per lesson, named as its notebook without the number (``ray_data``: 03)
==========================  ============================================================================================

Two layers: ``serving``, ``standins``, ``build``, ``benchmark`` and ``exercises`` are built on ``helpers``; the other
modules are what ``helpers`` stands on, and never import it (``tests/unit/test_layout.py``).

Words used one way everywhere: *lesson* (a notebook and its record in ``course.lessons``), *sources* (where data and the
pretrained model come from), *budget* (how much work: steps, batch sizes, learning rates, architectures, workers; one
section per lesson), *plan* (what to ask Ray for), *architecture* (the shape of notebook 04's ViT), *class_names* (the
list of a data set's class names), *label* (one example's class name) and *label ids* (class indices), *loop_config*
(the dict a Ray Train worker function receives), *headline* (the one figure a notebook records, with its floor).
"""
