"""aclnn status codes and the exceptions that carry them (SPEC section 2.4)."""

ACLNN_SUCCESS = 0
ACLNN_ERR_PARAM_NULLPTR = 161001
ACLNN_ERR_PARAM_INVALID = 161002

# cubeMathType values (SPEC section 1.1 and 4)
KEEP_DTYPE = 0
ALLOW_FP32_DOWN_PRECISION = 1
USE_FP16 = 2
USE_HF32 = 3


class AclnnError(Exception):
    """An aclnn status other than ACLNN_SUCCESS; ``code`` is the aclnn number."""

    code: int = 0
    name: str = ""

    def __init__(self, message: str) -> None:
        super().__init__(f"{self.name} ({self.code}): {message}")
        self.message = message

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # rebuilt from the bare message (args holds the prefixed one): an error pickled
        # to another process (dask.distributed, multiprocessing) reads the same there
        return type(self), (self.message,), self.__dict__


class ParamNullptrError(AclnnError, TypeError):
    """A required argument was None (aclnn's null pointer)."""

    code = ACLNN_ERR_PARAM_NULLPTR
    name = "ACLNN_ERR_PARAM_NULLPTR"


class ParamInvalidError(AclnnError, ValueError):
    """An argument breaks one of the operator's rules."""

    code = ACLNN_ERR_PARAM_INVALID
    name = "ACLNN_ERR_PARAM_INVALID"


def invalid(arg, rule, value):
    """A ParamInvalidError whose message names the argument, the rule and the value."""
    return ParamInvalidError(f"{arg} {rule}; got {value}")
