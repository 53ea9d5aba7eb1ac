"""The checks of the "Your turn" exercises: one module per lesson, named as its notebook is without the number
(``ray_data`` for ``03_ray_data``), on the shared rules of :mod:`course.exercises.checking` (a verdict for any answer,
within a time limit, never an exception) and, for the checks that run a learner's function on Ray Train workers,
:mod:`course.exercises.train_runs`. A notebook imports its own module as ``exercises``."""
