"""Checkers for chapter 7's coding exercises (see lib.teach.checking)."""

from __future__ import annotations

__all__: list[str] = []
