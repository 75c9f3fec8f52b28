"""fattn.Error and one subclass per C status (include/fattn.h's
FATTN_STATUS_MAP; tests/test_capi.py checks this table against it).

Each error carries the status code, its C name and the C library's message.
Subclasses also derive from the built-in exception a Python caller would
catch for the same fault (ValueError, TypeError, MemoryError, ...).
"""


class Error(Exception):
    """A failed fattn call: .status (negative int), .status_name
    ("FATTN_ERR_..."), .message (the C library's detail)."""

    status = -20
    status_name = "FATTN_ERR_INTERNAL"

    def __init__(self, message, status=None, function=None):
        if status is not None:
            self.status = status
            self.status_name = _NAMES.get(status, "FATTN_ERR_UNKNOWN")
        self.message = message
        self.function = function
        where = f"{function}: " if function else ""
        super().__init__(f"{where}{message} [{self.status_name}]")


# (C name without FATTN_ERR_, value, class name, extra base)
_TABLE = [
    ("NULL_POINTER", -1, "NullPointerError", ValueError),
    ("INVALID_ARGUMENT", -2, "InvalidArgumentError", ValueError),
    ("INVALID_SIZE", -3, "InvalidSizeError", ValueError),
    ("HEAD_DIM", -4, "HeadDimError", ValueError),
    ("HEADS", -5, "HeadsError", ValueError),
    ("STRIDE", -6, "StrideError", ValueError),
    ("BUFFER_TOO_SMALL", -7, "BufferTooSmallError", ValueError),
    ("DTYPE", -8, "DtypeError", TypeError),
    ("OVERFLOW", -9, "SizeOverflowError", OverflowError),
    ("WRONG_CONTEXT", -10, "WrongContextError", ValueError),
    ("UNKNOWN_BACKEND", -11, "UnknownBackendError", ValueError),
    ("BACKEND_UNAVAILABLE", -12, "BackendUnavailableError", RuntimeError),
    ("NO_DEVICE", -13, "NoDeviceError", RuntimeError),
    ("OUT_OF_MEMORY", -14, "OutOfMemoryError", MemoryError),
    ("UNSUPPORTED", -15, "UnsupportedError", NotImplementedError),
    ("DEVICE", -16, "DeviceError", RuntimeError),
    ("BUILD", -17, "BuildError", RuntimeError),
    ("ENVIRONMENT", -18, "EnvironmentVariableError", RuntimeError),
    ("OUT_OF_BOUNDS", -19, "OutOfBoundsError", IndexError),
    ("INTERNAL", -20, "InternalError", RuntimeError),
    ("MISALIGNED", -21, "MisalignedError", ValueError),
    ("INDEX_TABLE", -22, "IndexTableError", IndexError),
]

_NAMES = {value: "FATTN_ERR_" + name for name, value, _, _ in _TABLE}
_BY_STATUS = {}
ERRORS = {}
for _name, _value, _cls, _base in _TABLE:
    _c = type(_cls, (Error, _base), {"status": _value, "status_name": "FATTN_ERR_" + _name,
                                    "__module__": "fattn"})
    _BY_STATUS[_value] = _c
    ERRORS[_cls] = _c
globals().update(ERRORS)


def raise_status(status, message, function=None):
    cls = _BY_STATUS.get(status, Error)
    raise cls(message, status, function)


def fail(cls_name, message):
    """Raises a status error found by the Python layer itself (argument
    plumbing: shapes, devices, dtypes the C API never sees)."""
    raise ERRORS[cls_name](message, None, None)
