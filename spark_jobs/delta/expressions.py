"""Column expressions over many columns, built so that Spark can analyse them at any width.

A condition or hash over every column of a table, folded left to right, is an expression as deep as
the table is wide, and Spark's analyzer and optimizer recurse through it: at 500 columns that
overflowed the JVM's stack (a ``StackOverflowError`` reported as if the job could be retried). Folded
as a balanced tree, 2,000 columns make an expression 11 levels deep.

Such expressions are written as SQL text (names :func:`quoted`) and handed to Spark once (``F.expr``,
``selectExpr``): one ``Column`` per column built through py4j costs several round trips to the JVM
each, seconds per thousand columns.
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def balanced(parts: Sequence[T], combine: Callable[[T, T], T]) -> T:
    """``parts`` combined pairwise, level by level, with the associative ``combine``: the same value
    as a left fold, in an expression of depth log2(len(parts)).

    >>> balanced([1, 2, 3, 4, 5], lambda a, b: a + b)
    15
    """
    if not parts:
        raise ValueError("balanced() needs at least one part")
    level = list(parts)
    while len(level) > 1:
        paired = [combine(a, b) for a, b in zip(level[::2], level[1::2])]
        level = paired + level[len(paired) * 2:]
    return level[0]


def quoted(name: str) -> str:
    """``name`` as a SQL identifier: in backquotes, a backquote in it doubled."""
    return "`" + name.replace("`", "``") + "`"
