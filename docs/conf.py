"""Sphinx configuration: the API reference from pool_grad's numpydoc docstrings and the
Markdown pages of docs/ (myst-parser).  CI builds it with warnings as errors:
``sphinx-build -W --keep-going -b html docs <outdir>``.

autodoc imports pool_grad: sphinx-build finds the installed package; ``python -m sphinx``
run in the checkout puts the checkout first on sys.path, so it needs the extension built
in place there.
"""
import pool_grad

project = "pool_grad"
author = copyright = "pool_grad developers"
release = version = pool_grad.__version__

extensions = ["sphinx.ext.autodoc", "numpydoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]

# torch and dask are optional peers, never dependencies: pool_grad.torch and pool_grad.dask
# are documented against autodoc's stand-ins whether or not they are installed, so the
# docs need neither and every environment builds the same pages.
autodoc_mock_imports = ["torch", "dask"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"           # numpydoc's Parameters sections give the types
numpydoc_show_class_members = False  # api.rst lists the members (no duplicate objects)
default_role = "py:obj"              # `name` in a docstring is a cross-reference...
nitpicky = True                      # ...that must resolve, except PyTorch's own
nitpick_ignore_regex = [(r"py:.*", r"torch(\..*)?")]
