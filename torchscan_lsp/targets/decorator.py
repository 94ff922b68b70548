"""The decorator form of a target annotation: ``@torchscan_lsp.target(input_shape=(3, 224, 224))``.

The language server reads the decorator's arguments from the source with ``ast`` (it never runs
it); at run time the decorator only records its options on the object and returns it unchanged.
"""

from typing import Any, Callable, TypeVar

T = TypeVar("T")

OPTIONS_ATTRIBUTE = "__torchscan_target__"


def target(**options: Any) -> Callable[[T], T]:
    """Mark a zero-argument model factory (or a no-argument ``nn.Module`` subclass) as a target.

    Args:
        **options: the same options as the ``# torchscan: ...`` pragma (``input_shape``, ``dtype``,
            ``device``, ``mode``, ``strict`` and the server's own), as Python literals.

    Returns:
        A decorator that stores ``options`` on the object under ``__torchscan_target__`` and
        returns the object itself.
    """

    def mark(obj: T) -> T:
        setattr(obj, OPTIONS_ATTRIBUTE, dict(options))
        return obj

    return mark
