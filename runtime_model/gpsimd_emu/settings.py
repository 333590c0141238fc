"""Defaults of the emulator's run settings (stdlib only, so that the
supervising CLI process reads them without importing the model)."""

#: Seconds a vector may run (all its cores together) before it is killed.
DEFAULT_TIMEOUT = 60.0
#: Host stack bytes per device stack byte (abi.h ``stack_scale``): host
#: code (x86-64/aarch64, libstdc++) needs several times the Xtensa stack.
DEFAULT_STACK_SCALE = 16
#: Seconds the whole run of a plan may take beyond its vectors' time limits
#: (the references run in the worker, outside any vector's limit).
RUN_SLACK = 30.0
