"""``python -m gpsimd_build.steps``: run one build step (``gpsimd_build.steps``)."""

import sys

from . import main

sys.exit(main())
