"""Which of the engine's own dependencies (torch, transformers) a piece of code loads.

The doors that call a ``poolrag serve`` (:class:`poolrag.client.PoolragClient`, and every partner
package's classes built with ``base_url=`` or ``client=``) import what they need when they run: torch
and transformers take seconds to load and are the server's business. A test runs such a door's code
in a fresh interpreter, which fails naming, for each of those modules it loaded, the lines that
imported it.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: the modules an in-process engine needs and a remote door does not
ENGINE_STACK = ("torch", "transformers")

# A finder first on sys.meta_path sees every import before it happens; it notes who asked and finds
# nothing, so the import itself goes on as usual.
_WATCH = """
import sys as _sys, traceback as _traceback
_FIRST_IMPORTED_BY = {}
class _Watch:
    def find_spec(self, name, path=None, target=None):
        if name in _NAMES and name not in _sys.modules and name not in _FIRST_IMPORTED_BY:
            frames = [f for f in _traceback.extract_stack()[:-1] if not f.filename.startswith("<frozen")]
            _FIRST_IMPORTED_BY[name] = "".join(f"  {f.filename}:{f.lineno}  {f.line}\\n" for f in frames)
        return None
_sys.meta_path.insert(0, _Watch())
"""
_REPORT = """
import json as _json
print(_json.dumps({n: _FIRST_IMPORTED_BY.get(n, "?") for n in _NAMES if n in _sys.modules}))
"""


def assert_imports_no_engine_stack(code: str, timeout: float = 300) -> None:
    """Run ``code`` with this Python in a new process and fail, with the lines that imported it, if
    it loaded any of :data:`ENGINE_STACK` (or if ``code`` itself fails)."""
    program = f"_NAMES = {ENGINE_STACK!r}\n{_WATCH}\n{code}\n{_REPORT}"
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0:
        raise AssertionError(f"the code failed ({run.returncode}):\n{run.stderr}")
    loaded: dict[str, str] = json.loads(run.stdout.splitlines()[-1])
    if loaded:
        raise AssertionError("".join(f"{name} was imported by:\n{stack}" for name, stack in loaded.items()))
