"""Sphinx configuration of the course's site (`make site`, scripts/build_site.py).

The site shows the executed copies of the last `make test` or `make run`: MyST-NB renders their outputs as they are
and executes nothing (``nb_execution_mode = "off"``, as the Ray docs do). Everything it loads is inside the built
folder (the theme's fonts and scripts, Sphinx's search index), so it opens from a folder or ``python -m http.server``
in a room without internet."""

project = "Scaling a Vision Transformer with Ray"
html_title = project
author = "the course's authors"
copyright = "the course's authors"  # noqa: A001 (Sphinx's name)

extensions = ["myst_nb", "sphinx_copybutton"]
root_doc = "index"
exclude_patterns = ["_build"]

nb_execution_mode = "off"  # the outputs are the run's: nothing executes at build time
nb_output_stderr = "show"  # what the lesson explains stays visible; tests/site checks for unexplained warnings
nb_merge_streams = True
myst_heading_anchors = 3  # README and notebook headings get anchors, as GitHub gives them
myst_enable_extensions = ["colon_fence"]
suppress_warnings = ["myst.header"]  # notebooks open with an "#" title and go on at "##": that is the plan

html_theme = "sphinx_book_theme"
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "navigation_with_keys": False,
}
html_context = {"default_mode": "light"}  # the theme's script stops on an empty mode (a console error)
html_show_sourcelink = False
html_show_search_summary = False  # a summary is a fetch of the result's page, which a site opened from a folder refuses
html_copy_source = False
html_last_updated_fmt = None
html_static_path: list[str] = []
