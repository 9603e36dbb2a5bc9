"""Sphinx configuration of roarfast's documentation site: `bash scripts/docs.sh` builds it into build/docs."""

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
# autodoc and sphinx-click import this checkout's roarfast, not another installed one; _ext: plain_text
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]

from roarfast.version import __version__  # noqa: E402  (after the path above)

project = "roarfast"
author = "the roarfast developers"
copyright = "the roarfast developers, Apache-2.0"
release = version = __version__

extensions = [
    "myst_nb",  # Markdown pages (it brings myst-parser) and the example notebook with its stored outputs
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # the docstrings' "Args:" sections
    "sphinx_click",
    "plain_text",  # docstrings and --help text shown as written (docs/_ext/plain_text.py)
]

# the notebook is shown as stored, never run: building the site trains nothing
nb_execution_mode = "off"
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# "--data-dir" in a docstring or a --help line stays two hyphens, not an en dash
smartquotes = False

exclude_patterns = ["_build", "_ext", "**.ipynb_checkpoints"]

napoleon_use_ivar = True  # attributes as fields: no second description of a dataclass's fields
autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "pydata_sphinx_theme"
html_title = f"roarfast {release}"
# the top-level pages have no section to navigate: no empty left column
html_sidebars = {page: [] for page in ("index", "getting-started", "performance", "integrity")}
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
