"""roarfast's docstrings and command help are plain text, not reStructuredText: this Sphinx extension shows them
as written, so that `sphinx -W` holds whatever a docstring or a `--help` line says. Used by docs/conf.py and by
tests/test_docs.py's build of the command-line reference alone."""

import io

from docutils.core import publish_doctree


def escape_click_text(app, ctx, lines):
    """A command's help (`DIR/train/<class>/*.jpg`, `quick|paper`): its `*`, `|` and `\\` are characters, not
    markup; the directive lines sphinx-click writes around it stay as they are."""
    lines[:] = [line if line.lstrip().startswith(".. ") else
                line.replace("\\", "\\\\").replace("*", "\\*").replace("|", "\\|") for line in lines]


def literal_where_not_rst(app, what, name, obj, options, lines):
    """A docstring that reStructuredText would warn about (a hanging indent, a lone `*`) is shown in a literal
    block, as written; one that parses cleanly is left to render (napoleon's `Args:` as fields)."""
    if not lines:
        return
    warnings = io.StringIO()
    try:
        publish_doctree("\n".join(lines), settings_overrides={
            "report_level": 2, "halt_level": 5, "warning_stream": warnings, "file_insertion_enabled": False,
            "env": app.env})
    except Exception:  # noqa: BLE001  (whatever a trial parse trips on, the literal block shows the text)
        warnings.write("unparsed")
    if warnings.getvalue():
        lines[:] = ["::", ""] + ["   " + line if line else "" for line in lines]


def setup(app):
    for event in ("description", "options", "arguments", "epilog"):
        app.connect(f"sphinx-click-process-{event}", escape_click_text)
    # after napoleon (priority 500), so the docstring checked is the one the page will show
    app.connect("autodoc-process-docstring", literal_where_not_rst, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
