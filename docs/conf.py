"""The docs site: Sphinx with MyST (the pages are Markdown, read on GitHub as they are).

    sphinx-build -W --keep-going -b html docs docs/_build

``-W`` makes every warning an error: a link to a page or heading that does not exist,
an image that is not there, a page left out of the table of contents.
"""

project = "glyphpack"
author = "the glyphpack team"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
# Links to headings (page.md#a-heading) resolve like GitHub's anchors.
myst_heading_anchors = 3
html_theme = "alabaster"
html_title = "glyphpack"
