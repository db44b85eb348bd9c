"""The root of a clone of the sdc repository (the package itself is ``sdc/`` below).

A script beside a clone folder named ``sdc`` (``import sdc`` with the clone's parent as its
folder or the working folder) finds this folder before the installed package, and Python
used to import it as an empty namespace package (``sdc.release_frame``: AttributeError).
This file loads the package inside the clone in its place, so such a script gets this
checkout's code (docs: README, "A new job"). Nothing imports this file otherwise.
"""

import importlib.util as _util
import sys as _sys
from pathlib import Path as _Path

_inner = _Path(__file__).resolve().parent / "sdc" / "__init__.py"
if __name__ == "sdc" and _inner.is_file():
    _spec = _util.spec_from_file_location("sdc", _inner,
                                          submodule_search_locations=[str(_inner.parent)])
    if _spec is not None and _spec.loader is not None:
        _module = _util.module_from_spec(_spec)
        _sys.modules["sdc"] = _module      # what `import sdc` returns once this file has run
        _spec.loader.exec_module(_module)
