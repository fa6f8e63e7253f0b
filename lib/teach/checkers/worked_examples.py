"""Checkers for chapter 3's coding exercises (see lib.teach.checking)."""

from __future__ import annotations

__all__: list[str] = []
