"""The course's tools: the stand-in data and model (``make data``) and the benchmark (``make bench``)."""
