"""Fetch the course's pinned data once, at install time (``make data`` runs this).

    python tools/fetch_data.py            # all three data sets, into data/

The code lives in the installed library, `lib.course_data` (its docstring says what
is fetched, from where, under which licence and pin), so that a chapter's first
cell can run the same step in Colab, Binder or any fresh environment as
``python -m lib.course_data``. Importing this file gives that module itself.
"""

from __future__ import annotations

import sys

import lib.course_data as _course_data

if __name__ == "__main__":
    sys.exit(_course_data.main())
sys.modules[__name__] = _course_data
