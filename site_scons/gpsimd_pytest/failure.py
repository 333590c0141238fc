"""How the plugin's items fail: with the emulator's own line (``FAIL ...``,
``FALSIFIED ...``), not a traceback."""

__all__ = ["VectorFailed"]


class VectorFailed(Exception):
    """A vector failed; ``line`` is its ``FAIL`` line (or explore's text),
    its control characters made visible (``gpsimd_device.printable``)."""

    def __init__(self, line: str):
        from gpsimd_device.printable import visible
        line = visible(line)
        super().__init__(line)
        self.line = line


class _FailLine:
    """An item whose failure reads as its ``FAIL`` (or ``FALSIFIED``) line."""

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, VectorFailed):
            return excinfo.value.line
        return super().repr_failure(excinfo, style)
