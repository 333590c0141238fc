"""``python -m gpsimd_explore``: ``gpsimd_explore.search.main``."""

import sys

from .search import main

sys.exit(main())
